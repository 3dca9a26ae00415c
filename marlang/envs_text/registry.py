"""Registry of text environments: build any of them by id, list them, add your own.

``make("babyai/pickup", n_agents=2)`` is how configs and the CLI get an environment. The
registry sits on top of the ``envs_text`` envs: it imports them, no env imports it.

``DEFAULT_REGISTRY`` (behind ``make``, ``register_env`` and ``list_envs``) stores its ids in
``marlang.registry.ENVS``, below ``marlang.config``, so configs validate ``env.id`` (and take
its default agent count) without importing envs. That registry calls two sources before it
is first read: :func:`register_builtin_envs` here (BabyAI, Overcooked, Pistonball, task envs)
and ``marlang.envs_marl.registration.register_builtin_envs`` (``envs_marl`` sits above
``envs_text`` and registers its ids into ``DEFAULT_REGISTRY``; this module never imports it).
"""

from __future__ import annotations

import difflib
import inspect
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pettingzoo import ParallelEnv

from marlang.envs_text.babyai_levels import BABYAI_ENVS
from marlang.envs_text.task_envs import TASK_ENVS
from marlang.registry import ENVS, Registry

logger = logging.getLogger(__name__)

EnvFactory = Callable[..., ParallelEnv]
"""Builds an env; called as ``factory(n_agents=..., **kwargs)``."""


@dataclass(frozen=True)
class EnvSpec:
    """A registered environment: its id, how to build it, and a one-line description."""

    env_id: str
    factory: EnvFactory
    description: str
    default_agents: int = 2
    """Agents when none are asked for (Pistonball ids: their piston count)."""


class EnvRegistry:
    """Maps env ids to factories. ``make``/``register_env``/``list_envs`` use a default one.

    ``store`` holds the ids (a ``marlang.registry.Registry``; the default one's is
    ``marlang.registry.ENVS``, which configs read); a new registry gets an empty store of its own.
    """

    def __init__(self, store: Registry | None = None) -> None:
        self._store = store if store is not None else Registry("env id")

    def register(
        self,
        env_id: str,
        factory: EnvFactory,
        description: str,
        *,
        overwrite: bool = False,
        default_agents: int = 2,
        success: bool = True,
    ) -> None:
        """Add an env. ``factory(n_agents=..., **kwargs)`` must return a PettingZoo ParallelEnv.
        ``success=False``: the env has no notion of success (tables leave that column out)."""
        if not isinstance(env_id, str) or not env_id.strip() or env_id != env_id.strip():
            raise ValueError(
                f"env_id must be a non-empty string without outer spaces, got {env_id!r}"
            )
        if not callable(factory):
            raise TypeError(f"factory for {env_id!r} must be callable, got {factory!r}")
        if not isinstance(description, str) or not description.strip():
            raise ValueError(f"description for {env_id!r} must be a non-empty string")
        if env_id in self._store and not overwrite:
            raise ValueError(
                f"env id {env_id!r} is already registered; pass overwrite=True to replace it"
            )
        extra = {} if success else {"success": False}
        self._store.register(
            env_id, factory, description.strip(), default_agents=default_agents, **extra
        )

    def unregister(self, env_id: str) -> None:
        """Remove ``env_id`` (``ValueError`` listing valid ids if it is not registered)."""
        self.spec(env_id)
        self._store.unregister(env_id)

    def spec(self, env_id: str) -> EnvSpec:
        """The spec registered under ``env_id``; ``ValueError`` listing valid ids if unknown."""
        if env_id not in self._store:
            ids = self._store.names()
            valid = ", ".join(sorted(ids)) or "(none)"
            close = difflib.get_close_matches(str(env_id), ids, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown environment id {env_id!r}; valid ids: {valid}.{hint}")
        entry = self._store.entry(env_id)
        return EnvSpec(
            env_id, entry.load(), entry.description, entry.metadata.get("default_agents", 2)
        )

    def make(self, env_id: str, n_agents: int | None = None, **kwargs: Any) -> ParallelEnv:
        """Build the env registered under ``env_id`` with ``n_agents`` agents (default: its own)."""
        spec = self.spec(env_id)
        factory = spec.factory
        n_agents = spec.default_agents if n_agents is None else n_agents
        _check_parameters(env_id, factory, {"n_agents": n_agents, **kwargs})
        return factory(n_agents=n_agents, **kwargs)

    def list(self) -> dict[str, str]:
        """Registered ids (sorted) mapped to their one-line descriptions."""
        described = self._store.describe()
        return {env_id: described[env_id] for env_id in sorted(described)}

    def __contains__(self, env_id: object) -> bool:
        return env_id in self._store

    def __len__(self) -> int:
        return len(self._store)


def _check_parameters(env_id: str, factory: EnvFactory, kwargs: Mapping[str, Any]) -> None:
    """Turn "unexpected keyword" errors into a ValueError that lists the valid parameters."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return  # not introspectable (some builtins); let the factory complain itself
    parameters = signature.parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return  # the factory validates its own **kwargs
    valid = [
        p.name
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]
    for name in kwargs:
        if name not in valid:
            raise ValueError(
                f"{env_id} has no parameter {name!r}; valid parameters: {', '.join(valid)}"
            )


# ---------------------------------------------------------------------- Overcooked, Pistonball


@dataclass(frozen=True)
class OvercookedLayoutFactory:
    """Builds an ``OvercookedTextEnv`` for one layout (the package is imported on first use)."""

    env_id: str
    layout: str

    def __call__(
        self,
        n_agents: int = 2,
        *,
        action_mode: str = "subgoal",
        max_steps: int | None = None,
        random_start: bool = False,
        patience: int = 5,
        wait_ticks: int = 3,
        counter_options: int = 3,
        render_mode: str | None = None,
    ) -> ParallelEnv:
        from marlang.envs_text.overcooked import OvercookedTextEnv

        return OvercookedTextEnv(
            self.layout, n_agents, action_mode=action_mode, max_steps=max_steps,
            random_start=random_start, patience=patience, wait_ticks=wait_ticks,
            counter_options=counter_options, render_mode=render_mode, env_id=self.env_id,
        )


OVERCOOKED_ENVS: tuple[tuple[str, str], ...] = (
    ("cramped-room", "Overcooked-AI Cramped Room: two cooks, one pot, a tight kitchen"),
    (
        "asymmetric-advantages",
        "Overcooked-AI Asymmetric Advantages: two kitchens, each cook near different things",
    ),
    ("coordination-ring", "Overcooked-AI Coordination Ring: a one-cell-wide ring the cooks share"),
    (
        "forced-coordination",
        "Overcooked-AI Forced Coordination: items must be passed over the counter",
    ),
    (
        "counter-circuit",
        "Overcooked-AI Counter Circuit (one order): a loop around a central counter",
    ),
)
"""Built-in Overcooked layouts (ids ``overcooked/<name>``); 400 ticks, subgoal actions by
default."""


@dataclass(frozen=True)
class PistonballFactory:
    """Builds a ``PistonballTextEnv``; ``n_pistons`` fixes the team size (else ``n_agents``
    does)."""

    env_id: str
    n_pistons: int | None = None

    def __call__(
        self,
        n_agents: int = 2,
        *,
        max_steps: int | None = None,
        render_mode: str | None = None,
        time_penalty: float = -0.1,
        random_drop: bool = True,
        random_rotate: bool = True,
        ball_mass: float = 0.75,
        ball_friction: float = 0.3,
        ball_elasticity: float = 1.5,
        reward_mode: str = "dense",
    ) -> ParallelEnv:
        from marlang.envs_text.pistonball import PistonballTextEnv

        if self.n_pistons is not None and n_agents != self.n_pistons:
            raise ValueError(
                f"{self.env_id} has {self.n_pistons} pistons, so n_agents must be "
                f"{self.n_pistons} (got {n_agents}); the id 'pistonball' takes any number from 2 "
                "to 20"
            )
        return PistonballTextEnv(
            n_agents, max_steps=max_steps, render_mode=render_mode, env_id=self.env_id,
            time_penalty=time_penalty, random_drop=random_drop, random_rotate=random_rotate,
            ball_mass=ball_mass, ball_friction=ball_friction, ball_elasticity=ball_elasticity,
            reward_mode=reward_mode,
        )


DEFAULT_REGISTRY = EnvRegistry(ENVS)
"""The registry behind ``make``, ``register_env`` and ``list_envs`` (its ids: ``ENVS``)."""


def register_builtin_envs(registry: EnvRegistry | None = None) -> None:
    """Register the ``envs_text`` ids (BabyAI, Overcooked, Pistonball, task envs) in
    ``registry`` (default: ``DEFAULT_REGISTRY``, which calls this before it is first read)."""
    registry = DEFAULT_REGISTRY if registry is None else registry
    for factory, description in BABYAI_ENVS:
        registry.register(factory.env_id, factory, description)
    for layout, description in OVERCOOKED_ENVS:
        env_id = f"overcooked/{layout}"
        registry.register(
            env_id, OvercookedLayoutFactory(env_id, layout), f"{description}; 400 ticks"
        )
    for n in (5, 10, 20):
        registry.register(
            f"pistonball/n{n}",
            PistonballFactory(f"pistonball/n{n}", n),
            f"PettingZoo Pistonball, {n} pistons (agents): ball to the left wall; 125 cycles",
            default_agents=n,
        )
    registry.register(
        "pistonball",
        PistonballFactory("pistonball"),
        "PettingZoo Pistonball with n_agents pistons (2 to 20): ball to the left wall; 125 cycles",
    )
    for env_id, factory, description in TASK_ENVS:
        registry.register(env_id, factory, description)


def make(env_id: str, n_agents: int | None = None, **kwargs: Any) -> ParallelEnv:
    """Build a registered text env by id, e.g. ``make("babyai/pickup", n_agents=2)``.

    ``n_agents`` defaults to the env's own count: 2, or the piston count of ``pistonball/nN``.

    Unknown ids and parameters raise ``ValueError`` naming them and listing the valid ones.
    Every env takes ``max_steps`` and ``render_mode`` (``"rgb_array"``). BabyAI envs also take
    their level's options (``room_size``, ``num_dists``, ``num_objs``, ``distractors``);
    Overcooked envs ``action_mode`` (``"subgoal"``/``"primitive"``), ``random_start``,
    ``patience``, ``wait_ticks``, ``counter_options`` (``max_steps`` is the horizon in ticks);
    Pistonball envs the ball's physics options (``max_steps`` counts cycles).
    Task envs (``code/humaneval``, ``code/mbpp``, ``code/coophumaneval``, ``math/math``,
    ``qa/hotpotqa``) take ``structure``, ``feedback``, ``memory``, ``sandbox_slice``,
    ``expert_model``, ``reward`` (coding), ``split``, ``dataset``, ``data_files``, ``limit``,
    ``task_ids`` (the problems to pose, by id or index),
    ... (``max_steps`` counts turns; see ``marlang.envs_text.cooperative_tasks``).
    """
    return DEFAULT_REGISTRY.make(env_id, n_agents=n_agents, **kwargs)


def register_env(
    env_id: str,
    factory: EnvFactory,
    description: str,
    *,
    overwrite: bool = False,
    default_agents: int = 2,
) -> None:
    """Add your own env under ``env_id``; ``factory(n_agents=..., **kwargs)`` builds it."""
    DEFAULT_REGISTRY.register(
        env_id, factory, description, overwrite=overwrite, default_agents=default_agents
    )


def default_agents(env_id: str) -> int:
    """How many agents ``env_id`` has when a config or ``make`` does not say."""
    return DEFAULT_REGISTRY.spec(env_id).default_agents


def list_envs() -> dict[str, str]:
    """Registered env ids mapped to one-line descriptions (what ``marlang envs`` prints)."""
    return DEFAULT_REGISTRY.list()
