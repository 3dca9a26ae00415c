"""The env registry: one :class:`EnvSpec` per env id, built by id, listed, and your own.

``make("babyai/pickup", n_agents=2)`` is how configs and the CLI get an environment. Every id
is one spec (as Gymnasium's ``EnvSpec``): its entry point (a callable, or an import path
``"package.module:attr"`` imported on first use, so heavy packages load only when their env is
built), the keyword arguments the id fixes, its default agent count and whether it has a
notion of success. The builtin ids are one table, ``marlang.envs.builtin.BUILTIN_ENVS``; the
registry sits on top of the env families and no env imports it.

``DEFAULT_REGISTRY`` (behind ``make``, ``register_env`` and ``list_envs``) stores its specs in
``marlang.registry.ENVS``, below ``marlang.config``, so configs validate ``env.id`` (and take
its default agent count) without importing envs. That registry calls
:func:`register_builtin_envs` here before it is first read.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
from typing import Any

from pettingzoo import ParallelEnv

from marlang.envs.builtin import BUILTIN_ENVS, MARL_ENVS
from marlang.envs.core.spec import EnvFactory, EnvSpec, check_spec
from marlang.registry import ENVS, Registry, plugin_function_problem

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_REGISTRY",
    "EnvFactory",
    "EnvRegistry",
    "EnvSpec",
    "default_agents",
    "list_envs",
    "make",
    "register_builtin_envs",
    "register_env",
    "register_marl_envs",
]


class EnvRegistry:
    """Maps env ids to :class:`EnvSpec` s. ``make``/``register_env``/``list_envs`` use a default
    one.

    ``store`` holds the specs (a ``marlang.registry.Registry``; the default one's is
    ``marlang.registry.ENVS``, which configs read); a new registry gets an empty store of its own.
    """

    def __init__(self, store: Registry | None = None) -> None:
        self._store = store if store is not None else Registry("env id")

    def register(
        self,
        env_id: str | EnvSpec,
        factory: EnvFactory | str | None = None,
        description: str | None = None,
        *,
        overwrite: bool = False,
        default_agents: int = 2,
        success: bool = True,
    ) -> None:
        """Add a spec, ``register(EnvSpec(...))``, or ``register(env_id, factory, description)``
        whose ``factory(n_agents=..., **kwargs)`` returns a PettingZoo ParallelEnv.
        ``success=False``: the env has no notion of success (tables leave that column out)."""
        if isinstance(env_id, EnvSpec):
            spec = env_id
        elif factory is None or description is None:
            raise TypeError(f"register({env_id!r}) needs a factory and a description, or one EnvSpec")
        else:
            spec = EnvSpec(env_id, factory, description, default_agents=default_agents, success=success)
        check_spec(spec)
        if spec.id in self._store and not overwrite:
            raise ValueError(
                f"env id {spec.id!r} is already registered; pass overwrite=True to replace it"
            )
        extra = {} if spec.success else {"success": False}
        description = spec.description.strip()
        if description != spec.description:
            spec = dataclasses.replace(spec, description=description)
        self._store.register(
            spec.id, spec, description, default_agents=spec.default_agents, **extra
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
        target = entry.load()
        if isinstance(target, EnvSpec):
            return target
        # a plugin or import path: its factory, described by its entry
        return EnvSpec(
            env_id, target, entry.description or env_id,
            default_agents=entry.metadata.get("default_agents", 2),
            success=entry.metadata.get("success", True),
        )

    def make(self, env_id: str, n_agents: int | None = None, **kwargs: Any) -> ParallelEnv:
        """Build the env registered under ``env_id`` with ``n_agents`` agents (default: its own)."""
        spec = self.spec(env_id)
        if spec.id != env_id:  # an import path registered under its own name
            spec = dataclasses.replace(spec, id=env_id)
        return spec.make(n_agents, **kwargs)

    def list(self) -> dict[str, str]:
        """Registered ids (sorted) mapped to their one-line descriptions."""
        described = self._store.describe()
        return {env_id: described[env_id] for env_id in sorted(described)}

    def __contains__(self, env_id: object) -> bool:
        return env_id in self._store

    def __len__(self) -> int:
        return len(self._store)


DEFAULT_REGISTRY = EnvRegistry(ENVS)
"""The registry behind ``make``, ``register_env`` and ``list_envs`` (its ids: ``ENVS``)."""


def env_plugin_problem(value: Any, entry_point: str) -> str | None:
    """Why an env plugin is not an env (an ``EnvSpec``, a ``ParallelEnv`` subclass or a factory
    function taking ``n_agents``), or None; checked before it is called with ``env.kwargs``."""
    if isinstance(value, EnvSpec) or (isinstance(value, type) and issubclass(value, ParallelEnv)):
        return None
    problem = plugin_function_problem(value, entry_point, keywords=("n_agents",))
    if problem is None:
        return None
    return f"{problem}, not an env factory(n_agents=..., **kwargs), an EnvSpec or a pettingzoo ParallelEnv subclass"


def register_builtin_envs(registry: EnvRegistry | None = None) -> None:
    """Register every builtin spec (``marlang.envs.builtin.BUILTIN_ENVS``) in ``registry``
    (default: ``DEFAULT_REGISTRY``, which calls this before it is first read)."""
    registry = DEFAULT_REGISTRY if registry is None else registry
    for spec in BUILTIN_ENVS:
        registry.register(spec)


def register_marl_envs(registry: Any) -> None:
    """Register the builtin envs with numeric observations (the credit benchmarks and the
    numeric views; ``marlang.envs.builtin.MARL_ENVS``) in ``registry``."""
    for spec in MARL_ENVS:
        registry.register(spec)


def make(env_id: str, n_agents: int | None = None, **kwargs: Any) -> ParallelEnv:
    """Build a registered env by id, e.g. ``make("babyai/pickup", n_agents=2)``.

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
    ... (``max_steps`` counts turns; see ``marlang.envs.tasks.cooperative``).
    """
    return DEFAULT_REGISTRY.make(env_id, n_agents=n_agents, **kwargs)


def register_env(
    env_id: str | EnvSpec,
    factory: EnvFactory | str | None = None,
    description: str | None = None,
    *,
    overwrite: bool = False,
    default_agents: int = 2,
) -> None:
    """Add your own env: ``register_env(EnvSpec(env_id, entry_point, description, ...))``, or
    ``register_env(env_id, factory, description)`` where ``factory(n_agents=..., **kwargs)``
    builds it."""
    DEFAULT_REGISTRY.register(
        env_id, factory, description, overwrite=overwrite, default_agents=default_agents
    )


def default_agents(env_id: str) -> int:
    """How many agents ``env_id`` has when a config or ``make`` does not say."""
    return DEFAULT_REGISTRY.spec(env_id).default_agents


def list_envs() -> dict[str, str]:
    """Registered env ids mapped to one-line descriptions (what ``marlang envs`` prints)."""
    return DEFAULT_REGISTRY.list()
