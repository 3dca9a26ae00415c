"""The names a config is checked against: learning methods, protocols, env ids, config checks.

marlang imports in one direction only. Its layers, top to bottom (``[tool.importlinter]`` in
``pyproject.toml``; ``make lint`` and ``make test`` check them):

    cli | testing, compare, experiment, runtime, trainers, learners, graphs, agents,
    envs, sandbox, models, prompts, report | rundir, config, registry | types

``marlang.config`` validates ``learning.method``, ``protocol.name`` and ``env.id`` (and a
learner's own ``learning.*`` keys) without importing the layers that implement them: it asks
the registries in this module, which sit at the bottom and import nothing from marlang.

**One mechanism: entries that are objects or entry points.** A registry maps a name to an
:class:`Entry` holding a description, metadata (what is known without importing, e.g. an env's
default agent count) and its target: an object, or an entry-point string
``"package.module:attr"`` imported on first :meth:`Registry.load` (as setuptools entry points
and gymnasium's ``register(id, entry_point="pkg.mod:Env")`` work). So a builtin is known by
name before, and without, its module being imported, and no lower layer ever names a higher
one except in such a string.

* :data:`LEARNERS` (``learning.method``) and :data:`PROTOCOLS` (``protocol.name``): the
  builtins are declared at the end of this module, by entry point.
* :data:`ENVS` (``env.id``): the env packages register their own ids. The registry names them
  as *sources*, entry points of functions called once before it is first read:
  ``marlang.envs.registry:register_builtin_envs`` (every builtin id, text and numeric).
* :data:`CONFIG_CHECKS`: whole-config checks owned by a higher layer (the pairing of
  ``agents.kind: neural`` with a neural method), called by ``ExperimentConfig`` validation.

The upper layers' public functions are views of these registries, so what a user registers
at runtime validates in configs too: ``marlang.learners.register_learner/list_learners/
learner_entry`` (:data:`LEARNERS`), ``marlang.graphs.register_protocol/list_protocols/
build_protocol`` (:data:`PROTOCOLS`), ``marlang.envs.register_env/list_envs/make`` and
``marlang.envs.registry.DEFAULT_REGISTRY`` (:data:`ENVS`).

What a loaded entry must offer:

* a learning method: a ``Learner`` subclass or a ``LearnerEntry`` (see :class:`LearnerSpec`);
  metadata ``agents_kind``: ``"llm"`` or ``"neural"`` (the agents it trains);
* a protocol: ``builder(agents, protocol_config) -> compiled graph``;
* an env id: ``factory(n_agents=..., **kwargs) -> ParallelEnv``; metadata
  ``default_agents`` (agents when a config does not say; 2 when absent);
* a config check: ``check(config: ExperimentConfig) -> None``, raising a one-line
  ``ValueError``.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

_ENTRY_POINT = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_UNLOADED: Any = object()


class EntryPointError(ImportError):
    """An entry point could not be imported; the message names it and the cause (one line)."""


def is_entry_point(target: object) -> bool:
    """Whether ``target`` is an entry-point string ``"package.module:attr"``."""
    return isinstance(target, str) and bool(_ENTRY_POINT.match(target))


def load_entry_point(entry_point: str) -> Any:
    """Import ``"package.module:attr"`` (``attr`` may be dotted) and return the attribute."""
    if not is_entry_point(entry_point):
        raise ValueError(f"not an entry point {entry_point!r}; expected 'package.module:attr'")
    module_name, _, attr = entry_point.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as err:
        cause = str(err).splitlines()[0] if str(err) else ""
        raise EntryPointError(
            f"cannot load entry point {entry_point!r} ({type(err).__name__}: {cause})"
        ) from err
    return found


@dataclass
class Entry:
    """One registered name: its description, metadata, and target (loaded on first use)."""

    name: str
    description: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    entry_point: str | None = None
    """``"package.module:attr"`` when the target was given as an entry point."""
    _value: Any = field(default=_UNLOADED, repr=False)

    @property
    def loaded(self) -> bool:
        return self._value is not _UNLOADED

    def load(self) -> Any:
        """The target; an entry point is imported the first time."""
        if self._value is _UNLOADED:
            assert self.entry_point is not None
            self._value = load_entry_point(self.entry_point)
        return self._value


class Registry:
    """Names mapped to :class:`Entry` objects, in registration order.

    ``kind`` names what the names are in messages (``"learning method"``). ``sources`` are
    entry points of functions ``() -> None`` that register entries; each is called once, the
    first time the registry is read or written (a source may itself register; while sources
    run, reads see what is registered so far).
    """

    def __init__(self, kind: str, *, sources: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self._entries: dict[str, Entry] = {}
        self._pending = list(sources)
        self._loading = False

    def _run_sources(self) -> None:
        if self._loading or not self._pending:
            return
        self._loading = True
        try:
            while self._pending:
                source = self._pending[0]
                load_entry_point(source)()
                self._pending.pop(0)
        finally:
            self._loading = False

    # writing --------------------------------------------------------------------------------
    def register(self, name: str, target: Any, description: str = "", **metadata: Any) -> None:
        """Add or replace ``name``. ``target`` is the object, or an entry point
        ``"package.module:attr"`` imported on first :meth:`load`; replacing keeps the name's
        place in the order."""
        self._run_sources()
        if isinstance(target, str):
            if not is_entry_point(target):
                raise ValueError(
                    f"{self.kind} {name!r}: {target!r} is not an entry point 'package.module:attr'"
                )
            entry = Entry(name, description, dict(metadata), entry_point=target)
        else:
            entry = Entry(name, description, dict(metadata), _value=target)
        self._entries[name] = entry

    def unregister(self, name: str) -> None:
        """Remove ``name`` (``ValueError`` naming the valid choices if it is not registered)."""
        self.entry(name)
        del self._entries[name]

    def pop(self, name: str, default: Any = None) -> Entry | Any:
        """Remove ``name`` and return its entry, or ``default`` if it is not registered."""
        self._run_sources()
        return self._entries.pop(name, default)

    # reading --------------------------------------------------------------------------------
    def entry(self, name: str) -> Entry:
        """The entry of ``name``; ``ValueError`` naming the valid choices if unknown."""
        self._run_sources()
        found = self._entries.get(name)
        if found is None:
            raise ValueError(f"unknown {self.kind} {name!r}; valid choices: {', '.join(self)}")
        return found

    def load(self, name: str) -> Any:
        """The target of ``name``, importing its entry point the first time
        (:class:`EntryPointError` if that fails)."""
        return self.entry(name).load()

    def names(self) -> list[str]:
        self._run_sources()
        return list(self._entries)

    def describe(self) -> dict[str, str]:
        """Names mapped to their one-line descriptions, in registration order."""
        self._run_sources()
        return {name: entry.description for name, entry in self._entries.items()}

    def __contains__(self, name: object) -> bool:
        self._run_sources()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        self._run_sources()
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {len(self._entries)} entries)"


class LearnerSpec(Protocol):
    """What ``marlang.config`` uses of a loaded learning method (a ``Learner`` subclass, whose
    classmethods fit, or a ``LearnerEntry``)."""

    options_model: Any
    """The pydantic model of the method's own ``learning.*`` keys."""

    def label(self, options: Any) -> str:
        """The method's name in tables, given its validated options."""
        ...

    def check_config(self, config: Any) -> None:
        """Raise a one-line ``ValueError`` for settings the method cannot train. The hook for
        whole-config checks of one method: ``Experiment`` calls it before the run directory is
        created (through ``marlang.learners.learner_entry(name).check_config(config)``)."""
        ...


# ------------------------------------------------------------------------- the registries

LEARNERS = Registry("learning method")
"""``learning.method`` -> a ``Learner`` subclass or ``LearnerEntry``; metadata ``agents_kind``."""

PROTOCOLS = Registry("protocol")
"""``protocol.name`` -> ``builder(agents, protocol_config)`` of the conversation graph."""

ENVS = Registry(
    "env id",
    sources=(
        "marlang.envs.registry:register_builtin_envs",
    ),
)
"""``env.id`` -> ``factory(n_agents=..., **kwargs)``; metadata ``default_agents``."""

CONFIG_CHECKS = Registry("config check")
"""Checks of a whole ``ExperimentConfig`` owned by higher layers, run when it is validated."""


# ------------------------------------------------------------------------- the builtins

LEARNERS.register(
    "none", "marlang.learners.base:Learner",
    "static prompting: policies never change (the CoT baseline)", agents_kind="llm",
)
LEARNERS.register(
    "langmarl", "marlang.learners.langmarl:LangMARLLearner",
    "centralized language critic, per-agent credit, language gradients, policy rewrites",
    agents_kind="llm",
)
LEARNERS.register(
    "reflexion", "marlang.learners.reflexion:ReflexionLearner",
    "agents write a lesson after each episode into a bounded memory", agents_kind="llm",
)
LEARNERS.register(
    "mappo", "marlang.trainers.neural.methods:MAPPOLearner",
    "neural (BenchMARL): multi-agent PPO with a centralized critic on the state",
    agents_kind="neural",
)
LEARNERS.register(
    "ippo", "marlang.trainers.neural.methods:IPPOLearner",
    "neural (BenchMARL): independent PPO, one critic per agent's observation",
    agents_kind="neural",
)
LEARNERS.register(
    "qmix", "marlang.trainers.neural.methods:QMIXLearner",
    "neural (BenchMARL): Q-learning with a monotonic mixing network", agents_kind="neural",
)
LEARNERS.register(
    "vdn", "marlang.trainers.neural.methods:VDNLearner",
    "neural (BenchMARL): Q-learning of per-agent values summed into the team value",
    agents_kind="neural",
)
LEARNERS.register(
    "ppo", "marlang.trainers.ppo:PPOLearner",
    "GLAM PPO: LoRA adapter per agent, softmax over legal-action scores, value heads",
    agents_kind="llm",
)
LEARNERS.register(
    "magrpo", "marlang.trainers.magrpo:MAGRPOLearner",
    "MAGRPO: LoRA adapter per agent, G sampled answers per agent and node, tree returns, "
    "group-relative advantages (code/, math/, qa/ envs)",
    agents_kind="llm",
)
LEARNERS.register(
    "grpo", "marlang.trainers.magrpo:GRPOLearner",
    "GRPO: MAGRPO with one agent (the single-agent baseline)",
    agents_kind="llm",
)

PROTOCOLS.register(
    "none", "marlang.graphs.protocols:build_no_communication",
    "no communication: every agent acts on its own observation",
)
PROTOCOLS.register(
    "bidirectional", "marlang.graphs.protocols:build_bidirectional",
    "every agent sends a message, then all act (FAMA)",
)
PROTOCOLS.register(
    "unidirectional", "marlang.graphs.protocols:build_unidirectional",
    "only protocol.speakers send; the others listen, then all act",
)
PROTOCOLS.register(
    "alternating", "marlang.graphs.protocols:build_alternating",
    "agents propose in turn for protocol.rounds rounds, then all act with CoT",
)

CONFIG_CHECKS.register(
    "neural-pairing", "marlang.trainers.neural.methods:check_neural_pairing",
    "agents.kind neural <-> a neural learning.method, on an env with numeric observations",
)
