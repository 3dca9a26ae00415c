"""The env registry: every builtin env id (text and numeric), built by id, listed, and your own.

``make("babyai/pickup", n_agents=2)`` is how configs and the CLI get an environment. The
registry sits on top of the env families: it imports their id tables, no env imports it.
Families whose packages are heavy (Overcooked, Pistonball, the credit benchmarks) are
registered through factories that import their module on first use.

``DEFAULT_REGISTRY`` (behind ``make``, ``register_env`` and ``list_envs``) stores its ids in
``marlang.registry.ENVS``, below ``marlang.config``, so configs validate ``env.id`` (and take
its default agent count) without importing envs. That registry calls
:func:`register_builtin_envs` here before it is first read.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pettingzoo import ParallelEnv

from marlang.envs.babyai.levels import BABYAI_ENVS
from marlang.envs.tasks.factories import TASK_ENVS
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


def _factory_signature(env_class: type, fixed: tuple[str, ...]) -> inspect.Signature:
    """The signature of a factory that builds ``env_class``: ``n_agents`` (default 2), then the
    env's own parameters but those the id fixes (``fixed``), so the registry's parameter check
    lists exactly what the env takes."""
    n_agents = inspect.Parameter(
        "n_agents", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=2, annotation="int"
    )
    kept = [p for p in inspect.signature(env_class).parameters.values() if p.name not in fixed]
    return inspect.Signature([n_agents, *kept], return_annotation="ParallelEnv")


@dataclass(frozen=True)
class OvercookedLayoutFactory:
    """Builds an ``OvercookedTextEnv`` for one layout (the package is imported on first use)."""

    env_id: str
    layout: str

    @property
    def __signature__(self) -> inspect.Signature:
        from marlang.envs.overcooked.text import OvercookedTextEnv

        return _factory_signature(OvercookedTextEnv, fixed=("layout", "n_agents", "env_id"))

    def __call__(self, n_agents: int = 2, **kwargs: Any) -> ParallelEnv:
        from marlang.envs.overcooked.text import OvercookedTextEnv

        return OvercookedTextEnv(self.layout, n_agents, env_id=self.env_id, **kwargs)


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

    @property
    def __signature__(self) -> inspect.Signature:
        from marlang.envs.pistonball.text import PistonballTextEnv

        return _factory_signature(PistonballTextEnv, fixed=("n_pistons", "env_id"))

    def __call__(self, n_agents: int = 2, **kwargs: Any) -> ParallelEnv:
        from marlang.envs.pistonball.text import PistonballTextEnv

        if self.n_pistons is not None and n_agents != self.n_pistons:
            raise ValueError(
                f"{self.env_id} has {self.n_pistons} pistons, so n_agents must be "
                f"{self.n_pistons} (got {n_agents}); the id 'pistonball' takes any number from 2 "
                "to 20"
            )
        return PistonballTextEnv(n_agents, env_id=self.env_id, **kwargs)


# ---------------------------------------------------------------------- credit benchmarks


@dataclass(frozen=True)
class LazyEnvFactory:
    """Builds the env ``env_id`` through a factory in ``module``, imported on first use.

    ``attribute`` names the module's function: ``"factory"`` (the convention of this package)
    is called with ``env_id`` and returns the env factory; any other name is the env factory
    itself (e.g. ``LazyEnvFactory("marlang.envs.credit.two_switch", "gridworld/two-switch",
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
        "marlang.envs.credit.climbing",
        "Climbing matrix game (Claus & Boutilier): 2 agents, common payoff, optimum 11; 25 steps",
        2,
    ),
    (
        "lbf/8x8-2p-2f-coop",
        "marlang.envs.credit.lbf",
        (
            "Level-based foraging 8x8, 2 agents, 2 foods, whole grid in view, every food needs the "
            "team (coop); 50 steps"
        ),
        2,
    ),
    (
        "lbf/8x8-2p-2f-2s-coop",
        "marlang.envs.credit.lbf",
        (
            "Level-based foraging 8x8, 2 agents, 2 foods, sight 2, every food needs the team "
            "(coop); 50 steps"
        ),
        2,
    ),
    (
        "lbf/10x10-3p-3f",
        "marlang.envs.credit.lbf",
        "Level-based foraging 10x10, 3 agents, 3 foods, whole grid in view; 50 steps",
        3,
    ),
    (
        "lbf/10x10-3p-3f-2s",
        "marlang.envs.credit.lbf",
        "Level-based foraging 10x10, 3 agents, 3 foods, sight 2; 50 steps",
        3,
    ),
    (
        "lbf/15x15-3p-5f",
        "marlang.envs.credit.lbf",
        "Level-based foraging 15x15, 3 agents, 5 foods, whole grid in view; 50 steps",
        3,
    ),
    (
        "lbf/15x15-4p-3f",
        "marlang.envs.credit.lbf",
        "Level-based foraging 15x15, 4 agents, 3 foods, whole grid in view; 50 steps",
        4,
    ),
    (
        "lbf/15x15-4p-5f",
        "marlang.envs.credit.lbf",
        "Level-based foraging 15x15, 4 agents, 5 foods, whole grid in view; 50 steps",
        4,
    ),
    (
        "rware/tiny-4ag",
        "marlang.envs.credit.rware",
        "Robotic warehouse tiny (1x3 shelf blocks), 4 robots, 4 requests; 500 steps",
        4,
    ),
    (
        "rware/small-4ag",
        "marlang.envs.credit.rware",
        "Robotic warehouse small (2x3 shelf blocks), 4 robots, 4 requests; 500 steps",
        4,
    ),
    (
        "rware/tiny-2ag",
        "marlang.envs.credit.rware",
        "Robotic warehouse tiny (1x3 shelf blocks), 2 robots, 2 requests; 500 steps",
        2,
    ),
    (
        "pistonball/n5-sparse",
        "marlang.envs.pistonball.numeric",
        (
            "Pistonball, 5 pistons, sparse team reward (+1 at the left wall, -0.1 per cycle), "
            "numeric or text observations; 125 cycles"
        ),
        5,
    ),
    (
        "babyai-marl/goto-obj",
        "marlang.envs.babyai.numeric",
        (
            "babyai/goto-obj with numeric observations (7x7x3 view, heading, carried object) or "
            "text; pseudo_reward for bringing the target into view"
        ),
        2,
    ),
    (
        "babyai-marl/pickup",
        "marlang.envs.babyai.numeric",
        (
            "babyai/pickup with numeric observations (7x7x3 view, heading, carried object) or "
            "text; pseudo_reward for its subgoals"
        ),
        2,
    ),
    (
        "babyai-marl/unlock-pickup",
        "marlang.envs.babyai.numeric",
        (
            "babyai/unlock-pickup with numeric observations (7x7x3 view, heading, carried object) "
            "or text; pseudo_reward for its subgoals"
        ),
        2,
    ),
    (
        "babyai-marl/put-next",
        "marlang.envs.babyai.numeric",
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
        "marlang.envs.credit.two_switch",
        "make_two_switch",
        ("LCA Two-Switch: trigger both switches to unlock the door, then reach the goal; "
        "2 agents, 9x9 grid, 100 steps"),
    ),
    (
        "gridworld/victim-rubble",
        "marlang.envs.credit.victim_rubble",
        "make_victim_rubble",
        ("LCA Victim-Rubble: a healer heals 2 victims, a clearer clears 3 rubble (2 block the "
        "way to a victim); 2 agents, 11x6 grid, 100 steps"),
    ),
    (
        "spaceworld",
        "marlang.envs.credit.spaceworld",
        "make_spaceworld",
        ("Spaceworld: 2 satellites carry their mirror segments to their destinations on a 10x10 "
        "grid; a collision ends the episode; reward 10 minus extra steps; 50 steps"),
    ),
)
"""(id, module, its env factory function, description) of the two-agent worlds built from the
LCA and LLM-MCA papers' descriptions."""


NO_SUCCESS_MODULES = frozenset({"marlang.envs.credit.climbing", "marlang.envs.credit.rware"})
"""Envs with no notion of success (a payoff to maximise, deliveries without end): registered
with ``success=False``, so tables leave out their success column."""


def register_marl_envs(registry: Any) -> None:
    """Register the credit benchmarks and numeric views (lazily built) in ``registry``."""
    for env_id, module, description, agents in MARL_ENVS:
        extra = {"success": False} if module in NO_SUCCESS_MODULES else {}
        registry.register(
            env_id, LazyEnvFactory(module, env_id), description, default_agents=agents, **extra
        )
    for env_id, module, attribute, description in GRIDWORLD_ENVS:
        registry.register(env_id, LazyEnvFactory(module, env_id, attribute), description)


DEFAULT_REGISTRY = EnvRegistry(ENVS)
"""The registry behind ``make``, ``register_env`` and ``list_envs`` (its ids: ``ENVS``)."""


def register_builtin_envs(registry: EnvRegistry | None = None) -> None:
    """Register every builtin id (BabyAI, Overcooked, Pistonball, task envs, then the credit
    benchmarks and the numeric views) in ``registry`` (default: ``DEFAULT_REGISTRY``, which
    calls this before it is first read)."""
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
    register_marl_envs(registry)


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
