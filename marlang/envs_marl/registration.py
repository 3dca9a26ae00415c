"""Adds the ``envs_marl`` ids to an env registry without importing the env modules yet.

``envs_marl`` sits above ``envs_text``: its envs build on text envs, and its ids go into the
text envs' ``DEFAULT_REGISTRY`` from here. ``marlang.registry.ENVS`` (the ids configs validate
against) names :func:`register_builtin_envs` as a source, called before it is first read; the
env modules load their packages (lbforaging, rware, ...) only when an env is built, so each id
is registered through a ``LazyEnvFactory``.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LazyEnvFactory:
    """Builds the env ``env_id`` through a factory in ``module``, imported on first use.

    ``attribute`` names the module's function: ``"factory"`` (the convention of this package)
    is called with ``env_id`` and returns the env factory; any other name is the env factory
    itself (e.g. ``LazyEnvFactory("marlang.envs_marl.two_switch", "gridworld/two-switch",
    "make_two_switch")``). Its signature is the real factory's, so the registry's parameter
    check (and its error listing the valid parameters) works as for any other factory.
    """

    module: str
    env_id: str
    attribute: str = "factory"

    def resolve(self) -> Callable[..., Any]:
        """The real factory for ``env_id`` (importing its module)."""
        found = getattr(importlib.import_module(self.module), self.attribute)
        return found(self.env_id) if self.attribute == "factory" else found

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self.resolve())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)


MARL_ENVS: tuple[tuple[str, str, str, int], ...] = (
    (
        "matrix/climbing",
        "marlang.envs_marl.climbing",
        "Climbing matrix game (Claus & Boutilier): 2 agents, common payoff, optimum 11; 25 steps",
        2,
    ),
    (
        "lbf/8x8-2p-2f-coop",
        "marlang.envs_marl.lbf",
        (
            "Level-based foraging 8x8, 2 agents, 2 foods, whole grid in view, every food needs the "
            "team (coop); 50 steps"
        ),
        2,
    ),
    (
        "lbf/8x8-2p-2f-2s-coop",
        "marlang.envs_marl.lbf",
        (
            "Level-based foraging 8x8, 2 agents, 2 foods, sight 2, every food needs the team "
            "(coop); 50 steps"
        ),
        2,
    ),
    (
        "lbf/10x10-3p-3f",
        "marlang.envs_marl.lbf",
        "Level-based foraging 10x10, 3 agents, 3 foods, whole grid in view; 50 steps",
        3,
    ),
    (
        "lbf/10x10-3p-3f-2s",
        "marlang.envs_marl.lbf",
        "Level-based foraging 10x10, 3 agents, 3 foods, sight 2; 50 steps",
        3,
    ),
    (
        "lbf/15x15-3p-5f",
        "marlang.envs_marl.lbf",
        "Level-based foraging 15x15, 3 agents, 5 foods, whole grid in view; 50 steps",
        3,
    ),
    (
        "lbf/15x15-4p-3f",
        "marlang.envs_marl.lbf",
        "Level-based foraging 15x15, 4 agents, 3 foods, whole grid in view; 50 steps",
        4,
    ),
    (
        "lbf/15x15-4p-5f",
        "marlang.envs_marl.lbf",
        "Level-based foraging 15x15, 4 agents, 5 foods, whole grid in view; 50 steps",
        4,
    ),
    (
        "rware/tiny-4ag",
        "marlang.envs_marl.rware",
        "Robotic warehouse tiny (1x3 shelf blocks), 4 robots, 4 requests; 500 steps",
        4,
    ),
    (
        "rware/small-4ag",
        "marlang.envs_marl.rware",
        "Robotic warehouse small (2x3 shelf blocks), 4 robots, 4 requests; 500 steps",
        4,
    ),
    (
        "rware/tiny-2ag",
        "marlang.envs_marl.rware",
        "Robotic warehouse tiny (1x3 shelf blocks), 2 robots, 2 requests; 500 steps",
        2,
    ),
    (
        "pistonball/n5-sparse",
        "marlang.envs_marl.pistonball",
        (
            "Pistonball, 5 pistons, sparse team reward (+1 at the left wall, -0.1 per cycle), "
            "numeric or text observations; 125 cycles"
        ),
        5,
    ),
    (
        "babyai-marl/goto-obj",
        "marlang.envs_marl.babyai",
        (
            "babyai/goto-obj with numeric observations (7x7x3 view, heading, carried object) or "
            "text; pseudo_reward for bringing the target into view"
        ),
        2,
    ),
    (
        "babyai-marl/pickup",
        "marlang.envs_marl.babyai",
        (
            "babyai/pickup with numeric observations (7x7x3 view, heading, carried object) or "
            "text; pseudo_reward for its subgoals"
        ),
        2,
    ),
    (
        "babyai-marl/unlock-pickup",
        "marlang.envs_marl.babyai",
        (
            "babyai/unlock-pickup with numeric observations (7x7x3 view, heading, carried object) "
            "or text; pseudo_reward for its subgoals"
        ),
        2,
    ),
    (
        "babyai-marl/put-next",
        "marlang.envs_marl.babyai",
        (
            "babyai/put-next with numeric observations (7x7x3 view, heading, carried object) or "
            "text; pseudo_reward for its subgoals"
        ),
        2,
    ),
)
"""(id, module with ``factory(env_id)``, description, default agent count) of every env."""

GRIDWORLD_ENVS: tuple[tuple[str, str, str, str], ...] = (
    (
        "gridworld/two-switch",
        "marlang.envs_marl.two_switch",
        "make_two_switch",
        ("LCA Two-Switch: trigger both switches to unlock the door, then reach the goal; "
        "2 agents, 9x9 grid, 100 steps"),
    ),
    (
        "gridworld/victim-rubble",
        "marlang.envs_marl.victim_rubble",
        "make_victim_rubble",
        ("LCA Victim-Rubble: a healer heals 2 victims, a clearer clears 3 rubble (2 block the "
        "way to a victim); 2 agents, 11x6 grid, 100 steps"),
    ),
    (
        "spaceworld",
        "marlang.envs_marl.spaceworld",
        "make_spaceworld",
        ("Spaceworld: 2 satellites carry their mirror segments to their destinations on a 10x10 "
        "grid; a collision ends the episode; reward 10 minus extra steps; 50 steps"),
    ),
)
"""(id, module, its env factory function, description) of the two-agent worlds built from the
LCA and LLM-MCA papers' descriptions."""


def register_builtin_envs() -> None:
    """Register every ``envs_marl`` id in ``marlang.envs_text``'s ``DEFAULT_REGISTRY``."""
    from marlang.envs_text.registry import DEFAULT_REGISTRY

    register_marl_envs(DEFAULT_REGISTRY)


NO_SUCCESS_MODULES = frozenset({"marlang.envs_marl.climbing", "marlang.envs_marl.rware"})
"""Envs with no notion of success (a payoff to maximise, deliveries without end): registered
with ``success=False``, so tables leave out their success column."""


def register_marl_envs(registry: Any) -> None:
    """Register every ``envs_marl`` id in ``registry`` (an ``EnvRegistry``)."""
    for env_id, module, description, agents in MARL_ENVS:
        extra = {"success": False} if module in NO_SUCCESS_MODULES else {}
        registry.register(
            env_id, LazyEnvFactory(module, env_id), description, default_agents=agents, **extra
        )
    for env_id, module, attribute, description in GRIDWORLD_ENVS:
        registry.register(env_id, LazyEnvFactory(module, env_id, attribute), description)
