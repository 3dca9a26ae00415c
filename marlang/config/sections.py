"""The sections of an experiment config, each a pydantic model that forbids unknown keys; the
names higher layers implement are checked against :mod:`marlang.registry` (see the package's
docstring, :mod:`marlang.config`)."""

from __future__ import annotations

import difflib
import logging
import math
import re
import types
import typing
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from marlang.registry import (
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


def _wants_number(annotation: Any) -> bool:
    """Whether a field typed ``annotation`` takes a number (int or float) but no boolean."""
    if annotation in (int, float):
        return True
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return _wants_number(args[0])
    if origin in (typing.Union, types.UnionType):
        return bool not in args and any(_wants_number(a) for a in args)
    return False


class NumbersNotBooleans(BaseModel):
    """A config model whose number keys refuse booleans (YAML reads ``episodes: true`` as a
    boolean, which pydantic would take as the count 1) and whose values hold no infinite or NaN
    number (``.inf``, ``.nan``; also inside free-form keys such as ``env.kwargs``) and no NUL
    character, which no file name, path or prompt may hold. Every config model derives from it."""

    model_config = ConfigDict(allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if isinstance(value, bool) and field is not None and _wants_number(field.annotation):
            raise ValueError(f"{str(value).lower()} is a boolean, not a number; give a number")
        if field is not None and not _holds_model(field.annotation):  # a section checks its own keys
            problem = _unusable(value)
            if problem is not None:
                raise ValueError(problem + (f"; give {valid_range(cls, info.field_name)}"
                                            if _wants_number(field.annotation) else ""))
        return value


def _holds_model(annotation: Any) -> bool:
    """Whether a field typed ``annotation`` holds config models (sections), which check their
    own values."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return any(_holds_model(a) for a in typing.get_args(annotation))


def _unusable(value: Any, where: str = "", depth: int = 0) -> str | None:
    """Why ``value`` (or a value inside it, named by its place) cannot be used: a number that
    is not finite, or text holding a NUL character; None if it can."""
    at = f" (at {where})" if where else ""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value} is not a finite number{at}"
    if isinstance(value, str) and "\0" in value:
        return f"the text holds a NUL character{at}, which no file name, path or prompt may hold"
    if depth < 50 and isinstance(value, dict):
        for key, item in value.items():
            found = _unusable(key, where, depth + 1) or _unusable(item, f"{where}.{key}".lstrip("."), depth + 1)
            if found is not None:
                return found
    if depth < 50 and isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = _unusable(item, f"{where}[{i}]", depth + 1)
            if found is not None:
                return found
    return None


MESSAGE_LIMIT = 1000
"""Characters kept of what a config error says about a value (it may echo the value: a long
string, a list expanded from YAML aliases)."""


def shorten(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` cut to about ``limit`` characters in its middle (where an echoed value is; the
    advice at its end stays), noting how many were left out."""
    if len(text) <= limit:
        return text
    keep = limit // 2
    return f"{text[:keep]}...({len(text) - 2 * keep} characters left out)...{text[-keep:]}"


def error_message(model: type[BaseModel] | None, error: Any) -> str:
    """What one pydantic error of a field of ``model`` says, shortened; a number that is not
    finite also says which numbers the field takes."""
    msg = shorten(error["msg"].removeprefix("Value error, "))
    if error["type"] == "finite_number" and error["loc"]:
        msg = f"{shorten(str(error.get('input')), 40)} is not a finite number; give " \
              f"{valid_range(model, str(error['loc'][-1]))}"
    return msg


def valid_range(model: type[BaseModel] | None, name: str | None) -> str:
    """The numbers the field ``name`` of ``model`` takes, in words: ``a finite number >= 0``."""
    field = model.model_fields.get(name or "") if model is not None else None
    bounds = [f"{sign} {getattr(m, attr)}" for m in (field.metadata if field is not None else ())
              for attr, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="))
              if getattr(m, attr, None) is not None]
    whole = field is not None and int in (field.annotation, *typing.get_args(field.annotation)) \
        and float not in typing.get_args(field.annotation)
    return ("a whole number" if whole else "a finite number") + (" " + " and ".join(bounds) if bounds else "")


class _Section(NumbersNotBooleans):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class EnvConfig(_Section):
    """Which text environment to run, and its parameters."""

    id: str = "babyai/pickup"
    n_agents: int = Field(
        None, ge=1, validate_default=True,
        description="Number of agents; None: the env's own (2; N for pistonball/nN).",
    )
    max_steps: int | None = Field(None, ge=1, description="Episode step limit; None keeps the env's own.")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="Extra keyword arguments for the env.")

    @field_validator("id")
    @classmethod
    def _known_env(cls, v: str) -> str:
        return check_name(ENVS, v, sort=True)

    @field_validator("n_agents", mode="before")
    @classmethod
    def _default_agents(cls, v: Any, info: Any) -> Any:
        # before the type check: a validated config always holds the team size
        if v is not None or "id" not in info.data:
            return v if v is not None else 2
        return int(ENVS.entry(info.data["id"]).metadata.get("default_agents", 2))


class ModelPrice(_Section):
    """What a model's tokens cost, in USD per million tokens (tables and ``marlang compare``'s
    score against cost price a row's calls with it)."""

    input: float = Field(ge=0, description="USD per million prompt tokens.")
    output: float = Field(ge=0, description="USD per million completion tokens.")


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
    price: ModelPrice | None = Field(
        None, description="USD per million tokens, {input: X, output: Y}: tables show each row's price per "
        "episode, and marlang compare plots score against it when every row is priced. A team slot on "
        "another model is priced by its own team.SLOT.model.price only.")

    @field_validator("price", mode="before")
    @classmethod
    def _price_mapping(cls, v: Any) -> Any:
        if v is not None and not isinstance(v, dict):
            raise ValueError(f"{v!r} is no price; give USD per million tokens as {{input: X, output: Y}}")
        return v

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
        "llm", description="llm | scripted (the env's reference team) | neural "
        "(learning.method: mappo, ippo, qmix, vdn)"
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


class LoopConfig(_Section):
    """The training loop's own keys, written under ``learning:`` beside ``method``,
    ``iterations`` and ``rollouts``: whether a candidate is checked before it is committed, and
    whether a person reviews it. A method whose updates rewrite policy texts
    (``uses_policies``: langmarl) takes them; for any other, they are unknown keys."""

    accept: Literal["always", "improved"] = Field(
        "always", description="improved: keep new policies only if eval_rollouts fresh episodes do not lose return."
    )
    eval_rollouts: int = Field(3, ge=1, description="Episodes the candidate policies play when accept is improved.")
    review: bool = Field(False, description="Pause before each update for `marlang review RUN_DIR`.")


def method_keys(entry: LearnerSpec) -> list[str]:
    """The ``learning.*`` keys a loaded learning method takes beyond ``method``, ``iterations``
    and ``rollouts``: the loop's (:class:`LoopConfig`) where its updates rewrite policy texts,
    then its options model's."""
    learner = getattr(entry, "learner_class", None) or entry
    loop = list(LoopConfig.model_fields) if getattr(learner, "uses_policies", False) else []
    return [*loop, *entry.options_model.model_fields]


def _validated_keys(model: type[BaseModel], keys: dict[str, Any]) -> Any:
    """``keys`` validated by ``model``; a ``ValueError`` naming the first bad ``learning.*`` key."""
    try:
        return model.model_validate(keys)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        msg = error_message(model, first)
        if not loc:  # a check of several keys together
            raise ValueError(msg) from None
        raise ValueError(f"invalid value for 'learning.{loc}': {msg}") from None


class LearningConfig(_Section):
    """How agents learn: the method, iterations of K rollouts, the loop's own keys and the
    method's own keys.

    ``accept``, ``eval_rollouts`` and ``review`` are the loop's (:class:`LoopConfig`,
    :attr:`loop`), taken by methods that rewrite policy texts. Other keys beyond ``method``,
    ``iterations`` and ``rollouts`` belong to the method and are validated by its options
    model (``memory_size`` for reflexion; ``credit``, ``model``, ... for langmarl);
    :attr:`options` holds them validated.
    """

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    method: str = Field("reflexion", description="none | reflexion | langmarl | a registered learner")
    iterations: int | None = Field(
        None, ge=1, description="Learner updates; None: run.episodes / rollouts (rounded up)."
    )
    rollouts: int | None = Field(None, ge=1, description="K trajectories per update; None: run.parallel.")
    _options: Any = PrivateAttr(None)
    _loop: LoopConfig = PrivateAttr(default_factory=LoopConfig)

    @field_validator("method")
    @classmethod
    def _known_method(cls, v: str) -> str:
        return check_name(LEARNERS, v)

    @model_validator(mode="after")
    def _method_keys(self) -> LearningConfig:
        entry = learning_method(self.method)
        extra = dict(self.model_extra or {})
        own = method_keys(entry)
        valid = ["method", "iterations", "rollouts", *own]
        for key in extra:
            if key not in own:
                raise ValueError(
                    f"unknown config key 'learning.{key}' for learning.method {self.method!r}"
                    f"{did_you_mean(key, valid)}; valid keys here: {', '.join(valid)}"
                )
        loop = {key: extra.pop(key) for key in LoopConfig.model_fields if key in extra}
        self._loop = _validated_keys(LoopConfig, loop)
        self._options = _validated_keys(entry.options_model, extra)
        return self

    @property
    def loop(self) -> LoopConfig:
        """The loop's own keys, validated (the defaults for a method that does not take them)."""
        return self._loop

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
adds its rows as scalars (see :mod:`marlang.statistics.scalars`)."""


_SIZE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_size(value: Any) -> int | None:
    """Bytes from ``4GB``, ``512MiB``, ``1.5gb`` or a whole number of bytes (None stays None);
    a ``ValueError`` saying what a size looks like otherwise."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        return value
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(value)) if not isinstance(value, bool) else None
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _SIZE_UNITS or float(match.group(1)) <= 0:
        raise ValueError(f"{value!r} is not a size; give bytes or a number with a unit, e.g. 4GB, 512MiB")
    return int(float(match.group(1)) * _SIZE_UNITS[unit])


class ResourcesConfig(_Section):
    """What one run asks of a Ray cluster (``marlang compare --executor ray``): its task starts
    on a node with this much free; the local executor runs every setting in-process and reads
    none of it."""

    cpus: float = Field(1.0, ge=0, description="CPU cores the run's task reserves.")
    gpus: float = Field(0.0, ge=0, description="GPUs the run's task reserves (e.g. 1 for a PPO or MAGRPO "
                        "setting; a fraction shares one GPU); a scripted team reserves none.")
    memory: int | None = Field(None, description="Memory the run's task reserves: bytes or a size such as "
                               "4GB or 512MiB; None reserves none.")

    @field_validator("memory", mode="before")
    @classmethod
    def _size(cls, v: Any) -> int | None:
        return parse_size(v)


SEED_MAX = 2**32 - 1
"""The largest run seed: env and sampling seeds are unsigned 32-bit numbers in most libraries."""

Seed = Annotated[StrictInt, Field(ge=0, le=SEED_MAX)]

NAME_MAX = 100
"""The longest ``run.name``: it names folders (``runs/NAME-TIME``), under the file system's 255."""


class RunConfig(_Section):
    """How many episodes, how many at once, seeds and naming."""

    name: str = Field("run", description="Names the run's folder (runs/NAME-TIME): a file name, at most "
                      f"{NAME_MAX} characters, without '/'.")
    episodes: int = Field(10, ge=1)
    parallel: int = Field(1, ge=1, description="Episodes run at once (their LLM calls are batched).")
    seed: Seed = Field(0, description="Derives the run's env seeds (its own stream per phase: "
                       "two run seeds share no level; marlang.seeds) and its LLM sampling seeds.")
    eval_seed: Seed = Field(0, description="Derives the held-out evaluation's env seeds: one fixed "
                            "set for every run.seed unless changed.")
    levels: Literal["train", "held_out"] = Field(
        "train", description="Which levels the run's episodes play: train (run.seed's own stream) or held_out "
        "(the held-out set of run.eval_seed that learners evaluate on, greedily; for a run that trains "
        "nothing: learning.method none, or a trained team played back, as marlang crossplay plays).")
    seeds: list[Seed] | None = Field(
        None,
        description="Run every setting once per seed, each run with run.seed set to one of them "
        "(one run directory per seed; tables pool the seeds). None: run.seed alone.",
    )
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
    resources: ResourcesConfig = Field(
        default_factory=ResourcesConfig,
        description="CPUs, GPUs and memory the run reserves on a Ray cluster (compare --executor ray).",
    )

    @field_validator("name")
    @classmethod
    def _file_name(cls, v: str) -> str:
        if not v.strip() or v in (".", "..") or "/" in v or "\\" in v or len(v) > NAME_MAX:
            raise ValueError(f"{shorten(v, 40)!r} cannot name a folder; give a file name of 1 to {NAME_MAX} "
                             "characters, without '/' or '\\', other than '.' and '..'")
        return v

    @field_validator("loggers")
    @classmethod
    def _known_loggers(cls, v: list[str]) -> list[str]:
        for name in v:
            if name not in RUN_LOGGERS:
                raise ValueError(f"unknown logger {name!r}{did_you_mean(name, RUN_LOGGERS)}; "
                                 f"valid choices: {', '.join(RUN_LOGGERS)}")
        return list(dict.fromkeys(v))

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, v: list[int] | None, info: ValidationInfo) -> list[int] | None:
        if v is None:
            return v
        if not v:
            raise ValueError("give at least one seed, e.g. [0, 1, 2] (or leave run.seeds out: run.seed alone)")
        twice = sorted({s for s in v if v.count(s) > 1})
        if twice:
            raise ValueError(f"seed {twice[0]} is listed twice; list each seed once")
        seed = info.data.get("seed", 0)
        if seed != 0 and seed not in v:
            # run.seeds sets each run's run.seed: a run.seed outside them would be ignored.
            raise ValueError(f"run.seed is {seed}, not one of run.seeds {v}; give the seeds in "
                             "run.seeds alone (or run.seed as one of them)")
        return v


class SandboxConfig(_Section):
    """How generated code is confined, for the envs that run it (``code/*``)."""

    isolation: Literal["auto", "namespaces+landlock", "namespaces", "landlock", "rlimits"] = Field(
        "auto",
        description="auto: the strongest level that confines the program (never rlimits); "
        "rlimits (resource limits only, not a security boundary) runs only when named here.",
    )
    disk_mb: int = Field(64, ge=1, description="Most MiB one judged program may write in all.")


# ---------------------------------------------------------------------------------------
# Loading, overrides and error messages


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
