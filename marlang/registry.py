"""The names a config is checked against: learning methods, protocols, env ids, config checks.

marlang imports in one direction only. Its layers, top to bottom (``[tool.importlinter]`` in
``pyproject.toml``; ``make lint`` and ``make test`` check them):

    cli | testing, compare | view | review, run, trainers, credit, learners, graphs, agents,
    envs, sandbox, models, prompts, report | rundir, scalars | plots | intervals, config,
    registry | types | lazy | seeds

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
  ``marlang.envs.registry:register_builtin_envs`` (every builtin id, text and numeric: the
  ``EnvSpec`` table ``marlang.envs.builtin``).
* :data:`CONFIG_CHECKS`: whole-config checks owned by a higher layer (the pairing of
  ``agents.kind: neural`` with a neural method), called by ``ExperimentConfig`` validation.

**User plugins, without a wrapper script.** Besides registered names, :data:`ENVS`,
:data:`PROTOCOLS` and :data:`LEARNERS` accept

* an *import path* as the name itself (``protocol: {name: "mypkg.protocols:leader"}``): the
  first lookup imports it and registers it under that name; and
* the *entry points* installed distributions declare in the groups ``marlang.envs``,
  ``marlang.protocols`` and ``marlang.learners`` (:data:`PLUGIN_GROUPS`): their names are read
  from ``importlib.metadata`` the first time the registry is listed or a name is missing, and
  each target is imported on the first lookup of its name.

A plugin's metadata (``agents_kind``, ``default_agents``) comes from attributes of the loaded
object of the same names. A builtin or runtime registration keeps its name when a plugin
declares the same one.

**A config read from a directory imports no code.** A run directory's ``config.yaml`` (or a
comparison's) may be a stranger's: while one is validated (:func:`untrusted_config`), an import
path it names is refused before anything is imported (:class:`ImportRefused`), unless the user
allows it for the command (:func:`trusting_imports`, ``--trust-imports``). Registered names and
installed distributions' entry points stay valid: they are code the user installed. Whoever
names a plugin, its loaded object must be of the kind the registry holds (``plugin_check``,
e.g. an env factory, not ``subprocess:run``), checked before it is called or read.

The upper layers' public functions are views of these registries, so what a user registers
at runtime validates in configs too: ``marlang.learners.register_learner/list_learners/
learner_entry`` (:data:`LEARNERS`), ``marlang.graphs.register_protocol/list_protocols/
build_protocol`` (:data:`PROTOCOLS`), ``marlang.envs.register_env/list_envs/make`` and
``marlang.envs.registry.DEFAULT_REGISTRY`` (:data:`ENVS`).

What a loaded entry must offer:

* a learning method: a ``Learner`` subclass or a ``LearnerEntry`` (see :class:`LearnerSpec`);
  metadata ``agents_kind``: ``"llm"`` or ``"neural"`` (the agents it trains);
* a protocol: ``builder(agents, protocol_config) -> compiled graph``;
* an env id: ``factory(n_agents=..., **kwargs) -> ParallelEnv`` (a registered or builtin id
  holds a ``marlang.envs.EnvSpec`` around one); metadata ``default_agents`` (agents when a
  config does not say; 2 when absent) and ``success`` (False: no notion of success);
* a config check: ``check(config: ExperimentConfig) -> None``, raising a one-line
  ``ValueError``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

_ENTRY_POINT = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_UNLOADED: Any = object()

PLUGIN_METADATA = ("agents_kind", "default_agents")
"""Metadata a plugin gives as attributes of its loaded object (see the module docstring)."""


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
    except Exception as err:  # whatever a plugin raises on import, one line names it
        cause = str(err).splitlines()[0] if str(err) else ""
        raise EntryPointError(
            f"cannot load entry point {entry_point!r} ({type(err).__name__}: {cause})"
        ) from err
    return found


# ------------------------------------------------------------- import paths a config names

TRUST_IMPORTS_FLAG = "--trust-imports"
"""The option of every command that reads configs from directories that lets them import."""


class ImportRefused(EntryPointError):
    """An import path named by a config read from a directory, refused before it was imported."""

    def __init__(self, entry_point: str, source: str) -> None:
        self.entry_point, self.source = entry_point, source
        super().__init__(f"{entry_point!r} is an import path in {source}, a config read from a directory, "
                         f"which imports no code (add {TRUST_IMPORTS_FLAG} to the command to allow it)")


@dataclass
class _UntrustedConfig:
    source: str
    allowed: frozenset[str]
    refused: list[str] = field(default_factory=list)


# Context variables, not globals: the state is the validating call's own (threads and asyncio
# tasks each start from the defaults: imports allowed, nothing read from a directory).
_READING: ContextVar[_UntrustedConfig | None] = ContextVar("marlang_untrusted_config", default=None)
_TRUSTED: ContextVar[bool] = ContextVar("marlang_trust_imports", default=False)


@contextmanager
def untrusted_config(source: str, allowed: Iterable[str] = ()) -> Iterator[list[str]]:
    """While a config read from a directory (``source``: its file, for messages) is validated,
    an import path is refused (:class:`ImportRefused`) unless :func:`trusting_imports` is on or
    it is one of ``allowed`` (those a config the user gave names); yields the list the refused
    import paths are appended to."""
    reading = _UntrustedConfig(str(source), frozenset(allowed))
    token = _READING.set(reading)
    try:
        yield reading.refused
    finally:
        _READING.reset(token)


@contextmanager
def trusting_imports(trust: bool = True) -> Iterator[None]:
    """Let configs read from directories import the plugins they name (``--trust-imports``)."""
    token = _TRUSTED.set(trust or _TRUSTED.get())
    try:
        yield
    finally:
        _TRUSTED.reset(token)


def imports_trusted() -> bool:
    """Whether this command lets configs read from directories import plugins (``--trust-imports``)."""
    return _TRUSTED.get()


def check_import_allowed(entry_point: str) -> None:
    """Raise :class:`ImportRefused` if ``entry_point``, named by a config, may not be imported
    now: while a config read from a directory is validated, without :func:`trusting_imports`."""
    reading = _READING.get()
    if reading is not None and not _TRUSTED.get() and entry_point not in reading.allowed:
        reading.refused.append(entry_point)
        raise ImportRefused(entry_point, reading.source)


def describe_object(value: Any) -> str:
    """``value`` in a message: its kind and where it is defined (``function subprocess.run``)."""
    kind = "class" if isinstance(value, type) else type(value).__name__
    where = getattr(value, "__module__", None) or type(value).__module__
    name = getattr(value, "__qualname__", None) or type(value).__qualname__
    return f"{kind} {where}.{name}"


def plugin_function_problem(value: Any, entry_point: str, *, positional: int = 0,
                            keywords: tuple[str, ...] = ()) -> str | None:
    """Why ``value`` (loaded from ``entry_point``) is not a plugin's function, or None: it must
    be a Python function defined in the module the entry point names, outside Python's standard
    library, that takes ``positional`` arguments by position and ``keywords`` by name. So an
    import path names code written as a plugin, never a library callable (``subprocess:run``)
    that would be called with a config's values."""
    module = entry_point.partition(":")[0]
    if not inspect.isfunction(value):
        return "not a Python function"
    if value.__module__ != module:
        return f"defined in {value.__module__}, not in {module} (name it where it is defined)"
    if module.partition(".")[0] in sys.stdlib_module_names:
        return "a function of Python's standard library"
    parameters = inspect.signature(value).parameters.values()
    by_position = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    by_name = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    if len(by_position) < positional:
        return f"a function of {len(by_position)} positional parameters, not {positional}"
    missing = [k for k in keywords if k not in by_name]
    if missing:
        return f"a function without the parameter {missing[0]}"
    return None


@dataclass
class Entry:
    """One registered name: its description, metadata, and target (loaded on first use)."""

    name: str
    description: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    entry_point: str | None = None
    """``"package.module:attr"`` when the target was given as an entry point."""
    plugin: str | None = None
    """Where a plugin entry came from: ``"import path"`` or its distribution's name."""
    _value: Any = field(default=_UNLOADED, repr=False)

    @property
    def loaded(self) -> bool:
        return self._value is not _UNLOADED

    def load(self, check: Callable[[Any, str], str | None] | None = None) -> Any:
        """The target; an entry point is imported the first time. ``check(value, entry_point)``
        says why a plugin's object is not of the registry's kind (:class:`EntryPointError`),
        before anything of it is read or called."""
        if self._value is _UNLOADED:
            assert self.entry_point is not None
            if self.plugin == "import path":
                check_import_allowed(self.entry_point)
            value = load_entry_point(self.entry_point)
            problem = check(value, self.entry_point) if check is not None and self.plugin else None
            if problem is not None:
                raise EntryPointError(f"{self.entry_point!r} is {describe_object(value)}: {problem}; "
                                      "refused before it was called")
            self._value = value
            if self.plugin is not None:
                found = {k: getattr(self._value, k) for k in PLUGIN_METADATA
                         if hasattr(self._value, k)}
                self.metadata = {**self.metadata, **found}  # attributes over the defaults
                if not self.description:
                    doc = (getattr(self._value, "__doc__", None) or "").strip()
                    self.description = doc.splitlines()[0] if doc else ""
        return self._value


class Registry:
    """Names mapped to :class:`Entry` objects, in registration order.

    ``kind`` names what the names are in messages (``"learning method"``). ``sources`` are
    entry points of functions ``() -> None`` that register entries; each is called once, the
    first time the registry is read or written (a source may itself register; while sources
    run, reads see what is registered so far).

    With ``plugins=True`` a name that is an import path ``"package.module:attr"`` is
    registered on its first lookup, and ``group`` names the ``importlib.metadata`` entry-point
    group whose entries are plugins (both described in the module docstring). A plugin's
    metadata is ``plugin_defaults`` updated by its object's attributes of the same names.
    ``plugin_check`` is the entry point of ``check(value, entry_point) -> str | None``, the
    reason a plugin's loaded object is not of this registry's kind (None: it is).
    """

    def __init__(
        self, kind: str, *, sources: tuple[str, ...] = (), group: str | None = None,
        plugins: bool = False, plugin_defaults: Mapping[str, Any] | None = None,
        plugin_check: str | None = None,
    ) -> None:
        self.kind = kind
        self.group = group
        self.plugins = plugins or group is not None
        self.plugin_defaults = dict(plugin_defaults or {})
        self.plugin_check = plugin_check
        self._entries: dict[str, Entry] = {}
        self._pending = list(sources)
        self._loading = False
        self._group_path: tuple[str, ...] | None = None

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

    def _read_group(self) -> None:
        """Add the group's entry points not already registered (imported on first lookup)."""
        self._group_path = tuple(sys.path)
        if self.group is None:
            return
        for ep in importlib.metadata.entry_points(group=self.group):
            if ep.name in self._entries or not is_entry_point(ep.value):
                continue
            source = ep.dist.name if ep.dist is not None else "an installed distribution"
            self._entries[ep.name] = Entry(
                ep.name, metadata=dict(self.plugin_defaults), entry_point=ep.value, plugin=source
            )

    def refresh_plugins(self) -> None:
        """Read the entry-point group again (after installing a distribution at runtime)."""
        self._read_group()

    def _find(self, name: str) -> Entry | None:
        """The entry of ``name``: registered, an installed plugin, or an import path
        (imported here; :class:`EntryPointError` if that fails)."""
        self._run_sources()
        found = self._entries.get(name)
        if found is None and not self._loading and self._group_path != tuple(sys.path):
            # Read first, or again since sys.path changed (new distributions); never while the
            # builtins register, so a plugin cannot take a builtin's name.
            self._read_group()
            found = self._entries.get(name)
        if found is None and self.plugins and is_entry_point(name):
            found = Entry(name, metadata=dict(self.plugin_defaults), entry_point=name,
                          plugin="import path")
            found.load(self._check)
            self._entries[name] = found
        if found is not None and found.plugin is not None:
            found.load(self._check)  # a plugin's metadata comes from its object: import it on lookup
        return found

    def _check(self, value: Any, entry_point: str) -> str | None:
        return None if self.plugin_check is None else load_entry_point(self.plugin_check)(value, entry_point)

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
        """The entry of ``name``; ``ValueError`` naming the valid choices if unknown, and
        :class:`EntryPointError` if it is a plugin or import path that does not import."""
        found = self._find(name)
        if found is None:
            hint = " (or an import path 'package.module:attr')" if self.plugins else ""
            raise ValueError(
                f"unknown {self.kind} {name!r}; valid choices: {', '.join(self)}{hint}"
            )
        return found

    def load(self, name: str) -> Any:
        """The target of ``name``, importing its entry point the first time
        (:class:`EntryPointError` if that fails)."""
        return self.entry(name).load()

    def names(self) -> list[str]:
        """Every name: builtins and registrations, then installed plugins."""
        self._run_sources()
        if self._group_path is None and not self._loading:
            self._read_group()
        return list(self._entries)

    def describe(self) -> dict[str, str]:
        """Names mapped to their one-line descriptions, in registration order."""
        return {name: self._entries[name].description for name in self.names()}

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is known; a plugin or import path that does not import is not."""
        if not isinstance(name, str):
            return False
        try:
            return self._find(name) is not None
        except EntryPointError:
            return False

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

PLUGIN_GROUPS = {
    "envs": "marlang.envs", "protocols": "marlang.protocols", "learners": "marlang.learners",
}
"""The ``importlib.metadata`` entry-point groups whose entries are user plugins."""

LEARNERS = Registry(
    "learning method", group=PLUGIN_GROUPS["learners"], plugin_defaults={"agents_kind": "llm"},
    plugin_check="marlang.learners.base:learner_plugin_problem",
)
"""``learning.method`` -> a ``Learner`` subclass or ``LearnerEntry``; metadata ``agents_kind``."""

PROTOCOLS = Registry("protocol", group=PLUGIN_GROUPS["protocols"],
                     plugin_check="marlang.registry:protocol_plugin_problem")
"""``protocol.name`` -> ``builder(agents, protocol_config)`` of the conversation graph."""

ENVS = Registry(
    "env id",
    sources=(
        "marlang.envs.registry:register_builtin_envs",
    ),
    group=PLUGIN_GROUPS["envs"],
    plugin_defaults={"default_agents": 2},
    plugin_check="marlang.envs.registry:env_plugin_problem",
)
"""``env.id`` -> an ``EnvSpec`` (a plugin: its ``factory(n_agents=..., **kwargs)``); metadata
``default_agents``."""

def protocol_plugin_problem(value: Any, entry_point: str) -> str | None:
    """Why a protocol plugin is not a builder ``builder(agents, protocol_config)``, or None."""
    problem = plugin_function_problem(value, entry_point, positional=2)
    return None if problem is None else f"{problem}, not a protocol builder(agents, protocol_config)"


CONFIG_CHECKS = Registry("config check")
"""Checks of a whole ``ExperimentConfig`` owned by higher layers, run when it is validated."""


# ------------------------------------------------------------------------- the builtins

_BUILTIN_LEARNERS = (
    # (learning.method, class, description, agents.kind it trains)
    ("none", "marlang.learners.base:Learner",
     "static prompting: policies never change (the CoT baseline)", "llm"),
    ("langmarl", "marlang.methods.langmarl.learner:LangMARLLearner",
     "centralized language critic, per-agent credit, language gradients, policy rewrites", "llm"),
    ("reflexion", "marlang.methods.reflexion.learner:ReflexionLearner",
     "agents write a lesson after each episode into a bounded memory", "llm"),
    ("mappo", "marlang.methods.neural.algorithms:MAPPOLearner",
     "neural (BenchMARL): multi-agent PPO with a centralized critic on the state", "neural"),
    ("ippo", "marlang.methods.neural.algorithms:IPPOLearner",
     "neural (BenchMARL): independent PPO, one critic per agent's observation", "neural"),
    ("qmix", "marlang.methods.neural.algorithms:QMIXLearner",
     "neural (BenchMARL): Q-learning with a monotonic mixing network", "neural"),
    ("vdn", "marlang.methods.neural.algorithms:VDNLearner",
     "neural (BenchMARL): Q-learning of per-agent values summed into the team value", "neural"),
    ("ppo", "marlang.methods.ppo.learner:PPOLearner",
     "GLAM PPO: LoRA adapter per agent, softmax over legal-action scores, value heads", "llm"),
    ("magrpo", "marlang.methods.magrpo.learner:MAGRPOLearner",
     ("MAGRPO: LoRA adapter per agent, G sampled answers per agent and node, tree returns, "
      "group-relative advantages (code/, math/, qa/ envs)"), "llm"),
    ("grpo", "marlang.methods.magrpo.learner:GRPOLearner",
     "GRPO: MAGRPO with one agent (the single-agent baseline)", "llm"),
)
for _name, _target, _description, _kind in _BUILTIN_LEARNERS:
    LEARNERS.register(_name, _target, _description, agents_kind=_kind)

_BUILTIN_PROTOCOLS = (
    ("none", "build_no_communication", "no communication: every agent acts on its own observation"),
    ("bidirectional", "build_bidirectional", "every agent sends a message, then all act (FAMA)"),
    ("unidirectional", "build_unidirectional",
     "only protocol.speakers send; the others listen, then all act"),
    ("alternating", "build_alternating",
     "agents propose in turn for protocol.rounds rounds, then all act with CoT"),
)
for _name, _builder, _description in _BUILTIN_PROTOCOLS:
    PROTOCOLS.register(_name, f"marlang.graphs.protocols:{_builder}", _description)

CONFIG_CHECKS.register(
    "neural-pairing", "marlang.methods.neural.algorithms:check_neural_pairing",
    "agents.kind neural <-> a neural learning.method, on an env with numeric observations",
)
