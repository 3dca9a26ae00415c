"""Typed experiment configs: YAML files plus dotted ``--set a.b=v`` overrides.

Every section forbids unknown keys, so a typo fails fast with a message naming the key
and the valid ones (see :func:`describe_validation_error`).

Names that higher layers implement (``env.id``, ``protocol.name``, ``learning.method`` and a
method's own ``learning.*`` keys) are checked against the registries of :mod:`marlang.registry`,
the one layer below this module: config never imports envs, graphs, learners or trainers. A
learning method given as an entry point is imported when a config names it.
"""

from __future__ import annotations

import copy
import difflib
import json
import logging
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from marlang.registry import (
    CONFIG_CHECKS,
    ENVS,
    LEARNERS,
    PROTOCOLS,
    EntryPointError,
    LearnerSpec,
    Registry,
)

logger = logging.getLogger(__name__)


class ConfigError(ValueError):
    """An invalid experiment config; the message is one line naming what to fix."""


def did_you_mean(name: str, choices: Any) -> str:
    """`` (did you mean 'x'?)`` naming the closest of ``choices`` to ``name``, or ``""``."""
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=0.8)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_name(registry: Registry, name: str, sort: bool = False) -> str:
    """``name`` if ``registry`` knows it (a plugin or import path is imported here), else a
    one-line ``ValueError``: the import failure, or the valid choices (builtins and plugins)."""
    try:
        registry.entry(name)
    except EntryPointError as err:
        raise ValueError(str(err)) from None  # the caller names the key
    except ValueError:
        choices = sorted(registry) if sort else list(registry)
        paths = " (or an import path 'package.module:attr')" if registry.plugins else ""
        raise ValueError(f"unknown {registry.kind} {name!r}{did_you_mean(name, choices)}; "
                         f"valid choices: {', '.join(choices)}{paths}") from None
    return name


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class EnvConfig(_Section):
    """Which text environment to run, and its parameters."""

    id: str = "babyai/pickup"
    n_agents: int | None = Field(
        None, ge=1, validate_default=True,
        description="Number of agents; None: the env's own (2; N for pistonball/nN).",
    )
    max_steps: int | None = Field(None, ge=1, description="Episode step limit; None keeps the env's own.")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="Extra keyword arguments for the env.")

    @field_validator("id")
    @classmethod
    def _known_env(cls, v: str) -> str:
        return check_name(ENVS, v, sort=True)

    @field_validator("n_agents", mode="after")
    @classmethod
    def _default_agents(cls, v: int | None, info: Any) -> int:
        if v is not None or "id" not in info.data:
            return v if v is not None else 2
        return int(ENVS.entry(info.data["id"]).metadata.get("default_agents", 2))


class ModelConfig(_Section):
    """The chat model every agent uses, and how it is called."""

    spec: str = Field("local:smollm2", description="local:smollm2 | hf:PATH | openai:MODEL | litellm:PROVIDER/MODEL")
    temperature: float = Field(0.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(64, ge=1, description="Token budget for an action (thought + answer).")
    message_max_tokens: int = Field(40, ge=1, description="Token budget for a conversation message.")
    reflection_max_tokens: int = Field(64, ge=1, description="Token budget for a Reflexion reflection.")
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    token_limit_field: Literal["auto", "max_tokens", "max_completion_tokens", "both"] = Field(
        "auto",
        description="Request field carrying the token limit (openai: specs). auto: max_completion_tokens for "
        "OpenAI itself (no base_url), max_tokens for a server at base_url (llama.cpp, vLLM, SGLang, Ollama).",
    )
    structured: Literal["auto", "json_schema", "json_object", "none"] = Field(
        "auto",
        description="How calls that want JSON (critics' credit) ask for it: json_schema (OpenAI, vLLM) or "
        "json_object with the schema (llama-cpp-python's server) as response_format, which the local engine "
        "decodes under too (llguidance); none: unconstrained; auto: json_schema, then json_object once a "
        "server refuses that.",
    )
    timeout: float = Field(60.0, gt=0)
    max_retries: int = Field(3, ge=0)
    cache: bool = Field(True, description="Use the persistent SQLite response cache.")
    cache_path: str | None = Field(None, description="SQLite file; default: the user cache directory.")
    max_concurrency: int = Field(16, ge=1, description="Most LLM calls in flight at once.")
    adapters: str | None = Field(
        None, description="Play a trained team back: a run directory (its latest accepted adapters) or "
        "RUN_DIR/adapters/<iteration>; agents without a saved adapter act with the base model. With "
        "a weight-space learning.method (ppo, magrpo, grpo: the config that trained the team), the "
        "team is played back greedily for run.episodes instead of trained; tables name the row "
        "'METHOD (played back)'.")

    @field_validator("spec")
    @classmethod
    def _known_prefix(cls, v: str) -> str:
        prefixes = ("local:", "hf:", "openai:", "litellm:")
        if not v.startswith(prefixes):
            raise ValueError(f"unknown model spec {v!r}; valid forms: {', '.join(p + '...' for p in prefixes)}")
        return v


class ProtocolConfig(_Section):
    """The conversation the agents hold before acting at every step."""

    name: str = "none"
    rounds: int = Field(1, ge=1, description="Rounds of proposals (alternating protocol).")
    speakers: list[str] = Field(default_factory=lambda: ["agent_0"], description="Who speaks (unidirectional).")

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        """``protocol: alternating-2`` (a string) is ``{name: alternating, rounds: 2}``."""
        return _protocol_section(data) if isinstance(data, str) else data

    @field_validator("name")
    @classmethod
    def _known_protocol(cls, v: str) -> str:
        return check_name(PROTOCOLS, v)

    @property
    def label(self) -> str:
        """Short setting name used in tables: ``alternating-2``, ``unidirectional``, ..."""
        return f"{self.name}-{self.rounds}" if self.name == "alternating" else self.name


class AgentsConfig(_Section):
    """How the agents decide: LLM agents with a policy text, or the env's scripted team."""

    kind: Literal["llm", "scripted", "neural"] = Field(
        "llm", description="llm | scripted (the env's reference team) | neural (learning.method: mappo, ippo, qmix, vdn)"
    )
    policy: str = Field(
        "Work with your teammates to finish the mission in as few steps as possible.",
        description="Initial policy text shown to every agent.",
    )
    policies: dict[str, str] = Field(default_factory=dict, description="Per-agent policy text overrides.")
    chain_of_thought: bool = True
    action_selection: Literal["auto", "generate", "score"] = Field(
        "auto",
        description="generate: the model writes 'Action: ...' (parsed leniently); score: the model scores every "
        "legal action and the best is taken (local models only); auto: score for local models, else generate.",
    )
    calibration: Literal["none", "content_free"] = Field(
        "none",
        description="How a scoring agent's action scores become its policy. none: softmax over the "
        "scores (GLAM); content_free: minus the base model's scores of the same actions when the "
        "observation reads 'N/A' (contextual calibration: removes the model's preference for some "
        "action strings whatever it sees).",
    )
    reprompt: bool = Field(True, description="Ask once more when the output names no legal action.")
    fallback_action: str | None = Field(
        None, description="Action used when no legal action is found; None: the first legal action."
    )
    history: int = Field(4, ge=0, description="Recent steps of this episode shown to the agent.")
    prompt_dir: str | None = Field(None, description="Directory overriding the bundled prompt files.")


class LearningConfig(_Section):
    """How agents learn: the method, iterations of K rollouts, and the method's own keys.

    Keys beyond ``method``, ``iterations`` and ``rollouts`` belong to the method and are
    validated by its options model (``memory_size`` for reflexion; ``credit``, ``accept``,
    ``review``, ``model``, ... for langmarl); :attr:`options` holds them validated.
    """

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    method: str = Field("reflexion", description="none | reflexion | langmarl | a registered learner")
    iterations: int | None = Field(
        None, ge=1, description="Learner updates; None: run.episodes / rollouts (rounded up)."
    )
    rollouts: int | None = Field(None, ge=1, description="K trajectories per update; None: run.parallel.")
    _options: Any = PrivateAttr(None)

    @field_validator("method")
    @classmethod
    def _known_method(cls, v: str) -> str:
        return check_name(LEARNERS, v)

    @model_validator(mode="after")
    def _method_keys(self) -> LearningConfig:
        entry = learning_method(self.method)
        extra = dict(self.model_extra or {})
        valid = ["method", "iterations", "rollouts", *entry.options_model.model_fields]
        renamed = getattr(entry.options_model, "renamed", {})
        for key in extra:
            if key not in entry.options_model.model_fields and key not in renamed:
                raise ValueError(
                    f"unknown config key 'learning.{key}' for learning.method {self.method!r}"
                    f"{did_you_mean(key, valid)}; valid keys here: {', '.join(valid)}"
                )
        try:
            options = entry.options_model.model_validate(extra)
        except ValidationError as err:
            first = err.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            msg = first["msg"].removeprefix("Value error, ")
            if not loc:  # a check of several keys together (a renamed key given twice)
                raise ValueError(msg) from None
            raise ValueError(f"invalid value for 'learning.{loc}': {msg}") from None
        extras = self.__pydantic_extra__ or {}
        for old_key in [k for k in extras if k in renamed]:
            # kept under its current name: the saved config, and a resume's comparison with
            # it, see one name whichever the user wrote
            extras[renamed[old_key]] = extras.pop(old_key)
        self._options = options
        return self

    @property
    def options(self) -> Any:
        """The method's own keys, validated (an instance of its learner's options model)."""
        return self._options

    @property
    def label(self) -> str:
        return learning_method(self.method).label(self.options)


def learning_method(name: str) -> LearnerSpec:
    """The registered learning method ``name``, loaded (a one-line ``ValueError`` if its entry
    point cannot be imported). Its ``check_config(config)`` is the method's own whole-config
    check (see :class:`marlang.registry.LearnerSpec`)."""
    try:
        found = LEARNERS.load(name)
    except EntryPointError as err:
        raise ValueError(f"learning.method {name!r}: {err}") from None
    if not all(hasattr(found, a) for a in ("options_model", "label", "check_config")):
        raise ValueError(
            f"learning.method {name!r} is {found!r}, not a Learner subclass (a class with "
            "options_model, label and check_config; see marlang.learners.Learner)"
        )
    return found


def trains_weights(method: str) -> bool:
    """Whether ``learning.method`` trains the model's weights (a weight-space learner, which
    attaches its LoRA adapters to the model it is given)."""
    return bool(getattr(learning_method(method), "uses_adapters", False))


RUN_LOGGERS = ("csv", "tensorboard")
"""Valid ``run.loggers``: ``iterations.csv`` is the run's record and always written; ``tensorboard``
adds its rows as scalars (see :mod:`marlang.scalars`)."""


class RunConfig(_Section):
    """How many episodes, how many at once, seeds and naming."""

    name: str = "run"
    episodes: int = Field(10, ge=1)
    parallel: int = Field(1, ge=1, description="Episodes run at once (their LLM calls are batched).")
    seed: int = 0
    progress: bool = True
    threads: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        "auto",
        description="torch CPU threads of a local model (local:, hf:). auto: OMP_NUM_THREADS when "
        "set, else half the usable cores (1 on 2 cores, at most 8), leaving the rest to the "
        "episodes, sandbox workers and learner; more threads than free cores slows generation.",
    )
    loggers: list[str] = Field(
        default_factory=lambda: ["csv"],
        description="Where each iteration's row goes: csv (iterations.csv, always written) and "
        "tensorboard (scalars under RUN/tensorboard/).",
    )

    @field_validator("loggers")
    @classmethod
    def _known_loggers(cls, v: list[str]) -> list[str]:
        for name in v:
            if name not in RUN_LOGGERS:
                raise ValueError(f"unknown logger {name!r}{did_you_mean(name, RUN_LOGGERS)}; "
                                 f"valid choices: {', '.join(RUN_LOGGERS)}")
        return list(dict.fromkeys(v))


class SandboxConfig(_Section):
    """How generated code is confined, for the envs that run it (``code/*``)."""

    isolation: Literal["auto", "namespaces+landlock", "namespaces", "landlock", "rlimits"] = Field(
        "auto",
        description="auto: the strongest level that confines the program (never rlimits); "
        "rlimits (resource limits only, not a security boundary) runs only when named here.",
    )
    disk_mb: int = Field(64, ge=1, description="Most MiB one judged program may write in all.")


class ExperimentConfig(_Section):
    """A whole experiment: env, model, protocol, agents, learning, run, sandbox."""

    env: EnvConfig = Field(default_factory=EnvConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    protocol: ProtocolConfig = Field(default_factory=ProtocolConfig)
    agents: AgentsConfig = Field(default_factory=AgentsConfig)
    learning: LearningConfig = Field(default_factory=LearningConfig)
    run: RunConfig = Field(default_factory=RunConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    grid: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="Settings `marlang compare` runs when no --grid is given, e.g. {protocol: [none, alternating-2]}.",
    )

    @model_validator(mode="after")
    def _cross_checks(self) -> ExperimentConfig:
        names = [f"agent_{i}" for i in range(self.env.n_agents)]
        if self.protocol.name == "unidirectional":
            bad = [s for s in self.protocol.speakers if s not in names]
            if bad:
                raise ValueError(
                    f"protocol.speakers: unknown agent {bad[0]!r}; valid choices: {', '.join(names)}"
                )
        for name in CONFIG_CHECKS:  # e.g. neural agents <-> a neural learning.method
            try:
                check = CONFIG_CHECKS.load(name)
            except EntryPointError as err:
                raise ValueError(f"config check {name!r}: {err}") from None
            check(self)
        unknown = [a for a in self.agents.policies if a not in names]
        if unknown:
            raise ValueError(f"agents.policies: unknown agent {unknown[0]!r}; valid choices: {', '.join(names)}")
        if self.iterations_set:
            # The iterations decide the run's length: run.episodes follows them.
            total = self.learning.iterations * self.rollouts_per_iteration
            if self.run.episodes != total:
                self.run.episodes = total
        return self

    @property
    def plays_back(self) -> bool:
        """Whether the run plays a trained team back rather than training: ``model.adapters``
        with the weight-space ``learning.method`` that trained it (``marlang run CONFIG --set
        model.adapters=RUN``). Such a run acts greedily for ``run.episodes``; the method's own
        keys (``learning.iterations``, ``learning.rollouts``, ...) stay in the config, unused."""
        return bool(self.model.adapters) and trains_weights(self.learning.method)

    @property
    def learning_label(self) -> str:
        """The learner's name in tables: a play-back is named after the method that trained
        the team (``ppo (played back)``), not like an untrained run."""
        return f"{self.learning.method} (played back)" if self.plays_back else self.learning.label

    @property
    def iterations_set(self) -> bool:
        """Whether ``learning.iterations`` decides the run's length (not in a play-back)."""
        return self.learning.iterations is not None and not self.plays_back

    @property
    def rollouts_per_iteration(self) -> int:
        """K: ``learning.rollouts``, or ``run.parallel`` when unset (or played back)."""
        if self.plays_back:
            return self.run.parallel
        return self.learning.rollouts or self.run.parallel

    @property
    def total_iterations(self) -> int:
        """``learning.iterations``, or ``run.episodes`` / K rounded up."""
        if self.iterations_set:
            return self.learning.iterations
        return -(-self.run.episodes // self.rollouts_per_iteration)

    def agent_names(self) -> list[str]:
        return [f"agent_{i}" for i in range(self.env.n_agents)]

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


# ---------------------------------------------------------------------------------------
# Loading, overrides and error messages


def parse_value(text: str) -> Any:
    """Parse an override value the way YAML would (``3`` -> int, ``true`` -> bool, ``[a,b]``)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def apply_override(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``data[a][b] = value`` for ``dotted == "a.b"``, creating sections as needed.

    ``protocol=alternating-2`` is accepted as shorthand for ``protocol.name=alternating``
    plus ``protocol.rounds=2``.
    """
    if isinstance(data.get("protocol"), str):  # the shorthand in a config file, as a section
        data["protocol"] = _protocol_section(data["protocol"])
    if dotted == "protocol":
        name, rounds = parse_protocol_label(str(value))
        section = data.setdefault("protocol", {})
        section["name"] = name
        if rounds is not None:
            section["rounds"] = rounds
        return
    keys = dotted.split(".")
    node = data
    for k in keys[:-1]:
        nxt = node.get(k)
        if nxt is None:
            nxt = node[k] = {}
        if not isinstance(nxt, dict):
            raise ConfigError(f"cannot set {dotted!r}: {k!r} is a value, not a section")
        node = nxt
    last = keys[-1]
    if isinstance(value, dict) and isinstance(node.get(last), dict):
        # A section given as a mapping (e.g. a grid over learning: {method: ..., credit: ...})
        # updates the section, keeping its other keys.
        node[last] = {**node[last], **value}
        return
    node[last] = value


def _protocol_section(label: str) -> dict[str, Any]:
    """The protocol section a shorthand names: ``alternating-2`` -> {name: alternating, rounds: 2}."""
    name, rounds = parse_protocol_label(label)
    return {"name": name} if rounds is None else {"name": name, "rounds": rounds}


def parse_protocol_label(label: str) -> tuple[str, int | None]:
    """``alternating-2`` -> (``alternating``, 2); ``none`` -> (``none``, None)."""
    head, sep, tail = label.rpartition("-")
    if sep and tail.isdigit():
        return head, int(tail)
    return label, None


def describe_validation_error(err: ValidationError) -> str:
    """One line naming the offending key and, where known, the valid choices."""
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    kind = first["type"]
    if kind == "extra_forbidden":
        parent_model = _section_for(first["loc"][:-1])
        fields = list(parent_model.model_fields) if parent_model else []
        hint = did_you_mean(first["loc"][-1], fields)
        return f"unknown config key {loc!r}{hint}; valid keys here: {', '.join(fields) or '?'}"
    msg = first["msg"]
    msg = msg.removeprefix("Value error, ")
    if msg.startswith(("unknown config key '", "invalid value for '")):
        return msg  # already names the nested key (method-specific learning keys)
    if kind == "literal_error":
        return f"invalid value for {loc!r}: {msg}"
    if loc:
        return f"invalid value for {loc!r}: {msg}"
    return f"invalid config: {msg}"


def _section_for(path: tuple[Any, ...]) -> type[BaseModel] | None:
    model: type[BaseModel] = ExperimentConfig
    for p in path:
        field = model.model_fields.get(str(p))
        if field is None or not (isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)):
            return None
        model = field.annotation
    return model


def build_config(data: dict[str, Any]) -> ExperimentConfig:
    """Validate a plain dict into an :class:`ExperimentConfig`, raising :class:`ConfigError`."""
    if not isinstance(data, dict):
        raise ConfigError("config must be a mapping with sections env, model, protocol, agents, learning, run")
    try:
        return ExperimentConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(describe_validation_error(err)) from None


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The mapping in a YAML config file; a missing file, a directory or malformed YAML is a
    :class:`ConfigError` naming the file (and the line and column of a YAML error)."""
    p = Path(path)
    if p.is_dir():
        configs = sorted(str(c) for c in p.glob("*.y*ml"))
        hint = f"; config files there: {', '.join(configs[:8])}{', ...' if len(configs) > 8 else ''}" if configs else ""
        raise ConfigError(f"{p} is a directory, not a config file{hint}")
    if not p.is_file():
        raise ConfigError(f"config file not found: {p}")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        where = f"{p}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(p)
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        context = getattr(err, "context", None)
        raise ConfigError(f"{where}: not valid YAML: {problem}{f' ({context})' if context else ''}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: a config must be a mapping with sections env, model, protocol, agents, learning, run")
    return data


def apply_overrides(data: dict[str, Any], overrides: list[str] | None = None,
                    unset: list[str] | None = None) -> dict[str, Any]:
    """Apply ``--unset KEY`` (first) and ``--set KEY=VALUE`` items to ``data`` in place."""
    for key in unset or []:
        remove_key(data, key.strip())
    for item in overrides or []:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r} must look like section.key=value")
        apply_override(data, key.strip(), parse_value(raw))
    return data


def remove_key(data: dict[str, Any], dotted: str) -> None:
    """Delete ``data[a][b]`` for ``dotted == "a.b"`` (``--unset``): the key takes its default,
    or, for a learning method's own key, goes away. A key that is not set is an error."""
    keys = dotted.split(".")
    node: Any = data
    for k in keys[:-1]:
        node = node.get(k) if isinstance(node, dict) else None
    if not isinstance(node, dict) or keys[-1] not in node:
        where = node if isinstance(node, dict) else {}
        raise ConfigError(f"--unset {dotted}: the config does not set {dotted!r}"
                          f"{did_you_mean(keys[-1], where)}")
    del node[keys[-1]]


def load_config(path: str | Path | None = None, overrides: list[str] | None = None,
                unset: list[str] | None = None) -> ExperimentConfig:
    """Load a YAML config (or the defaults when ``path`` is None), remove the ``unset`` keys
    and apply ``a.b=v`` overrides."""
    data = copy.deepcopy(read_config_file(path)) if path is not None else {}
    return build_config(apply_overrides(data, overrides, unset))


# ---------------------------------------------------------------------------------------
# Resuming

RESUME_MAY_CHANGE = (
    "run.episodes",
    "run.parallel",
    "run.progress",
    "run.name",
    "run.loggers",
    "run.threads",
    "learning.iterations",
    "model.max_concurrency",
    "model.timeout",
    "model.max_retries",
    "model.cache",
    "model.cache_path",
    "model.base_url",
    "model.api_key_env",
    "model.token_limit_field",
    "grid",
)
"""Keys a resumed run may change: its length, concurrency, and how the model is reached."""

_ABSENT = object()


def check_resume_compatible(saved: ExperimentConfig, new: ExperimentConfig) -> None:
    """Raise :class:`ConfigError` if ``new`` changes what ``saved``'s run measures.

    Only the keys in :data:`RESUME_MAY_CHANGE` (and everything under them) may differ;
    every other key, nested ones included (``env.kwargs.*``, a learner's own keys), must be
    equal, and a key set in one config but not the other is a difference. The message names
    the first offending key with its saved and new values.
    """
    difference = _first_difference(saved.model_dump(mode="json"), new.model_dump(mode="json"), "")
    if difference is None:
        return
    key, old, now = difference
    raise ConfigError(
        f"cannot resume: {key!r} is {_show(old)} in the saved run but {_show(now)} now; only "
        "run length and concurrency (run.episodes, learning.iterations, run.parallel, "
        "model.max_concurrency, ...) may change on resume; start a new run directory instead"
    )


def _first_difference(saved: Any, new: Any, prefix: str) -> tuple[str, Any, Any] | None:
    for key in [*saved, *(k for k in new if k not in saved)]:
        path = f"{prefix}{key}"
        if any(path == k or path.startswith(k + ".") for k in RESUME_MAY_CHANGE):
            continue
        old, now = saved.get(key, _ABSENT), new.get(key, _ABSENT)
        if isinstance(old, dict) and isinstance(now, dict):
            found = _first_difference(old, now, path + ".")
            if found is not None:
                return found
        elif old != now or type(old) is not type(now):
            return path, old, now
    return None


def _show(value: Any) -> str:
    return "(not set)" if value is _ABSENT else json.dumps(value)


# Secrets ----------------------------------------------------------------------------------------
REDACTED = "***"
_SECRET_NAME = r"(?:[A-Za-z0-9]+[_-])*(?:api[_-]?key|apikey|key|token|secret|password|passwd|credentials?|authorization)"
# `name=value`, `name: value` or `"name": "value"`, where the name (its last dotted part) says
# it holds a secret: model.api_key=..., env.kwargs.hf_token: ..., "password": "..."
_SECRET_SETTING = re.compile(
    r"(?i)(?<![A-Za-z0-9_-])(" + _SECRET_NAME + r")(\"?\s*[=:]\s*[\"']?(?:bearer\s+)?)([^\s\"',}]+)")
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*):([^/\s@]+)@")
_SECRET_ENV = re.compile(r"(?i)(?:api[_-]?key|token|secret|password|passwd)")


def redact_secrets(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with what looks secret replaced by ``***``: the password of a URL
    (``https://user:***@host``), the value of a setting whose name says it is a secret
    (``--set model.api_key=***``; ``*_env`` names of variables are kept), each of ``secrets``,
    and the value of every environment variable whose name says it holds one (OPENAI_API_KEY,
    HF_TOKEN, ...). What marlang writes to a run directory and prints goes through it."""
    known = {s for s in secrets if s and len(s) >= 6}
    known |= {v for name, v in os.environ.items() if _SECRET_ENV.search(name) and len(v) >= 6}
    for secret in sorted(known, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    text = _URL_PASSWORD.sub(rf"\1:{REDACTED}@", text)
    return _SECRET_SETTING.sub(
        lambda m: m.group(0) if m.group(3) == REDACTED else f"{m.group(1)}{m.group(2)}{REDACTED}", text)
