"""Gymnasium spaces for text environments: a fixed set of action strings, and text observations.

They let PettingZoo tooling (``parallel_api_test``, random rollouts) work with envs whose
actions are strings and whose observations are ``TextObservation`` records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium.spaces import Space

from marlang.types import TextObservation


class ActionStringSpace(Space[str]):
    """One of a fixed, ordered list of action strings (``sample`` picks one uniformly)."""

    def __init__(self, actions: Sequence[str], seed: int | np.random.Generator | None = None):
        if not actions:
            raise ValueError("actions must be a non-empty list of strings")
        self.actions: tuple[str, ...] = tuple(actions)
        super().__init__(shape=None, dtype=None, seed=seed)

    def sample(self, mask: Any | None = None, probability: Any | None = None) -> str:
        if mask is not None or probability is not None:
            raise NotImplementedError("ActionStringSpace.sample takes no mask or probability")
        return self.actions[int(self.np_random.integers(len(self.actions)))]

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and x in self.actions

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __len__(self) -> int:
        return len(self.actions)

    def __repr__(self) -> str:
        return f"ActionStringSpace({list(self.actions)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ActionStringSpace) and self.actions == other.actions

    def __hash__(self) -> int:
        return hash(self.actions)


class TextObservationSpace(Space[TextObservation]):
    """Any ``TextObservation`` (it has no meaningful random sample)."""

    def __init__(self) -> None:
        super().__init__(shape=None, dtype=None)

    def sample(self, mask: Any | None = None, probability: Any | None = None) -> TextObservation:
        raise NotImplementedError("text observations cannot be sampled")

    def contains(self, x: Any) -> bool:
        return isinstance(x, TextObservation)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "TextObservationSpace()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TextObservationSpace)

    def __hash__(self) -> int:
        return hash(type(self))


StepResult = tuple[
    dict[str, TextObservation],
    dict[str, float],
    dict[str, bool],
    dict[str, bool],
    dict[str, dict[str, Any]],
]
"""What a text env's ``step`` returns: observations, rewards, terminations, truncations, infos."""


def check_joint_action(live_agents: Sequence[str], actions: Mapping[str, Any]) -> None:
    """Raise unless ``actions`` has exactly one entry per live agent (and the episode is live)."""
    if not live_agents:
        raise RuntimeError("the episode is over (or never started); call reset() first")
    if len(actions) == len(live_agents) and all(agent in actions for agent in live_agents):
        return  # (every step of every env comes here: the common case without building sets)
    unknown = sorted(set(actions) - set(live_agents))
    missing = [agent for agent in live_agents if agent not in actions]
    if unknown or missing:
        raise ValueError(
            f"step() needs exactly one action per live agent {list(live_agents)}; "
            f"missing: {missing}, unknown: {unknown}"
        )


def is_integer(value: Any) -> bool:
    """A Python or numpy integer, and not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def check_render_mode(render_mode: str | None, metadata: Mapping[str, Any]) -> None:
    """Raise unless ``render_mode`` is None or one the env's ``metadata`` lists."""
    if render_mode not in (None, *metadata["render_modes"]):
        raise ValueError(
            f"render_mode must be None or one of {metadata['render_modes']}, got {render_mode!r}"
        )
