"""Imports the ``overcooked-ai`` package (1.1.0) so that it works with numpy 2 and gymnasium.

The package uses numpy's removed ``np.Inf`` alias and imports the unmaintained ``gym`` only to
register an env id; both are bridged here, at import time, without touching installed files.
"""

from __future__ import annotations

import importlib.util
import sys

import numpy as np

INSTALL_HINT = "pip install --no-deps overcooked-ai==1.1.0  (its other requirements come with marlang)"


def _bridge_removed_names() -> None:
    if not hasattr(np, "Inf"):
        # numpy 2 removed the alias; the package uses it for "no path" costs and defaults.
        np.Inf = np.inf  # type: ignore[attr-defined]
    if importlib.util.find_spec("gym") is None:
        # The package's __init__ only calls gym's register(); gymnasium offers the same call.
        import gymnasium
        import gymnasium.envs
        import gymnasium.envs.registration

        sys.modules.setdefault("gym", gymnasium)
        sys.modules.setdefault("gym.envs", gymnasium.envs)
        sys.modules.setdefault("gym.envs.registration", gymnasium.envs.registration)


_bridge_removed_names()

try:
    from overcooked_ai_py.mdp.actions import Action, Direction
    from overcooked_ai_py.mdp.overcooked_mdp import (
        ObjectState,
        OvercookedGridworld,
        OvercookedState,
        PlayerState,
        Recipe,
        SoupState,
    )
    from overcooked_ai_py.planning.planners import MotionPlanner
except ModuleNotFoundError as error:  # pragma: no cover - depends on the installation
    if error.name is not None and error.name.startswith("overcooked_ai_py"):
        raise ModuleNotFoundError(
            f"the Overcooked environments need the overcooked-ai package: {INSTALL_HINT}",
            name=error.name,
        ) from error
    raise


def state_visualizer() -> type:
    """The package's ``StateVisualizer`` class (imported on first render: it loads pygame)."""
    from overcooked_ai_py.visualization.state_visualizer import StateVisualizer

    return StateVisualizer


__all__ = [
    "INSTALL_HINT",
    "Action",
    "Direction",
    "MotionPlanner",
    "ObjectState",
    "OvercookedGridworld",
    "OvercookedState",
    "PlayerState",
    "Recipe",
    "SoupState",
    "state_visualizer",
]
