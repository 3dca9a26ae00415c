"""The ``graph:`` and ``task:`` sections of a config that plays a user's own LangGraph graph:
`GraphSpec` (the builder of the compiled graph, the state keys an input goes to and the answer is
read from) and `TaskSpec` (the inputs, the reward and what counts as a success), each checked in
one line before anything is played or created.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Self

from pydantic import ConfigDict, Field, ValidationError, field_validator

from marlang.config.sections import ConfigError, NumbersNotBooleans, did_you_mean, error_message
from marlang.registry import (
    EntryPointError,
    check_import_allowed,
    describe_object,
    is_entry_point,
    load_entry_point,
    plugin_function_problem,
)

if TYPE_CHECKING:
    from langgraph.pregel import Pregel

TaskItem = str | Mapping[str, Any]
"""One input of a task: the value the graph's input key gets, or a mapping holding it under
that key beside whatever the reward needs (the graph is given the input only)."""

Reward = Callable[[TaskItem, Any, Any], Any]
"""``reward(item, output, episode)``: the item as the data gave it, the value of the graph's
output key, the `GraphEpisode`; returns the episode's reward as an int or a float."""

_ROOT_CHANNEL = "__root__"
"""The one channel of a graph whose state is a plain value (``StateGraph(dict)``): any key goes."""


def load_function(key: str, entry_point: str, positional: int) -> Callable[..., Any]:
    """The function ``"package.module:function"`` named by config key ``key``, taking
    ``positional`` arguments: imported under the trust rules of config-named import paths (a
    config read from a directory imports nothing unless trusted) and refused, before it is
    called, unless it is a function written in that module (never a library callable)."""
    if not is_entry_point(entry_point):
        raise ValueError(f"{key} {entry_point!r} must look like 'package.module:function'")
    try:
        check_import_allowed(entry_point)
        target = load_entry_point(entry_point)
    except EntryPointError as err:
        raise ValueError(f"{key} {err}") from None
    problem = plugin_function_problem(target, entry_point, positional=positional)
    if problem is not None:
        raise ValueError(f"{key} {entry_point!r} is {describe_object(target)}: {problem}; "
                         f"name a function taking {positional} arguments defined in that module")
    return target


class _SpecSection(NumbersNotBooleans):
    model_config = ConfigDict(extra="forbid", frozen=True)
    key: ClassVar[str]
    """The config section this model is (``graph``, ``task``), for messages."""

    @classmethod
    def from_mapping(cls, value: Mapping[str, Any]) -> Self:
        """The section read from ``value`` (a config's mapping), or a `ConfigError` of one line
        naming the key to fix and, for an unknown key, the valid keys."""
        if not isinstance(value, Mapping):
            raise ConfigError(f"{cls.key}: give a mapping of {', '.join(cls.model_fields)}, "
                              f"not {type(value).__name__}")
        try:
            return cls.model_validate(dict(value))
        except ValidationError as err:
            first = err.errors()[0]
            name = ".".join(str(part) for part in (cls.key, *first["loc"]))
            if first["type"] == "extra_forbidden":
                fields = list(cls.model_fields)
                raise ConfigError(f"unknown config key {name!r}{did_you_mean(str(first['loc'][-1]), fields)}; "
                                  f"valid keys here: {', '.join(fields)}") from None
            if first["type"] == "missing":
                raise ConfigError(f"{name} is missing; give {cls.key}.{first['loc'][-1]}") from None
            message = error_message(cls, first)
            if message.startswith(f"{name} "):  # a loading check's message names its key already
                raise ConfigError(message) from None
            raise ConfigError(f"invalid value for {name!r}: {message}") from None


class GraphSpec(_SpecSection):
    """The graph a run plays: ``build`` names the function that returns the compiled graph,
    ``input`` the state key an input goes to, ``output`` the state key read as the answer."""

    key: ClassVar[str] = "graph"

    build: str = Field(description="'package.module:function' returning a compiled LangGraph graph.")
    input: str = Field(min_length=1, description="The state key each input of the task goes to.")
    output: str = Field(min_length=1, description="The state key read as the graph's answer.")
    recursion_limit: int = Field(25, ge=1, description="Supersteps an invocation may take before it fails.")
    prompts: dict[str, str] = Field(
        default_factory=dict,
        description="Texts the marked prompts start from, by mark name, in place of the defaults the app gives "
        "them (e.g. a trained run's, as crossplay plays them); each name must be one the app marks.")

    @property
    def played(self) -> str:
        """What a run of this graph plays, as tables and manifests name it: ``graph:`` and the builder."""
        return f"graph:{self.build}"

    @field_validator("build")
    @classmethod
    def _importable_builder(cls, v: str) -> str:
        load_function("graph.build", v, positional=0)  # refused here, while the config is validated
        return v

    def build_graph(self) -> Pregel[Any, Any, Any, Any]:
        """Call the builder and check what it returns: a compiled graph whose state has the
        ``input`` and ``output`` keys; a `ConfigError` of one line otherwise."""
        from langgraph.graph import StateGraph
        from langgraph.graph.state import CompiledStateGraph
        from langgraph.pregel import Pregel

        builder = load_function("graph.build", self.build, positional=0)
        try:
            graph = builder()
        except Exception as err:  # noqa: BLE001 - whatever the user's builder raises is a config error
            raise ConfigError(f"graph.build {self.build!r} raised {type(err).__name__}: {err}") from None
        if isinstance(graph, StateGraph):
            raise ConfigError(f"graph.build {self.build!r} returned a StateGraph that is not compiled; "
                              "call .compile() on it and return the compiled graph")
        if not isinstance(graph, Pregel):
            raise ConfigError(f"graph.build {self.build!r} returned {describe_object(graph)}, not a compiled "
                              "LangGraph graph; return graph.compile()")
        if isinstance(graph, CompiledStateGraph):
            builder_state = graph.builder
            _check_key("graph.input", self.input, list(builder_state.schemas[builder_state.input_schema]), "input")
        outputs = graph.output_channels
        _check_key("graph.output", self.output, [outputs] if isinstance(outputs, str) else list(outputs), "output")
        return graph


def _check_key(name: str, key: str, channels: list[str], which: str) -> None:
    if key in channels or channels == [_ROOT_CHANNEL]:
        return
    has = ", ".join(channels) if channels else "none"
    raise ConfigError(f"{name} {key!r} is not a key of the graph's {which} state{did_you_mean(key, channels)}; "
                      f"its {which} keys: {has}")


class TaskSpec(_SpecSection):
    """What a run plays the graph on: ``data`` names the function that returns the inputs,
    ``reward`` the function ``(item, output, episode) -> float`` that scores each episode."""

    key: ClassVar[str] = "task"

    data: str = Field(description="'package.module:function' returning the list of inputs.")
    reward: str = Field(description="'package.module:function' (item, output, episode) -> float.")
    success: float = Field(1.0, description="A reward at or above this counts as a success (success rates).")

    @field_validator("data")
    @classmethod
    def _importable_data(cls, v: str) -> str:
        load_function("task.data", v, positional=0)
        return v

    @field_validator("reward")
    @classmethod
    def _importable_reward(cls, v: str) -> str:
        load_function("task.reward", v, positional=3)
        return v

    def load_items(self, input_key: str) -> list[TaskItem]:
        """The inputs the data function returns: a non-empty list, each a str or a mapping
        holding ``input_key``; a `ConfigError` of one line otherwise."""
        data = load_function("task.data", self.data, positional=0)
        try:
            items = data()
        except Exception as err:  # noqa: BLE001 - whatever the user's data function raises is a config error
            raise ConfigError(f"task.data {self.data!r} raised {type(err).__name__}: {err}") from None
        if type(items) is not list or not items:
            shown = "an empty list" if type(items) is list else describe_object(items)
            raise ConfigError(f"task.data {self.data!r} returned {shown}; return a non-empty list of inputs "
                              f"(each a str, or a mapping holding {input_key!r})")
        for index, item in enumerate(items):
            if isinstance(item, str):
                continue
            if not isinstance(item, Mapping):
                raise ConfigError(f"task.data {self.data!r}: item {index} is {describe_object(item)}; give a str "
                                  f"or a mapping holding {input_key!r}")
            if input_key not in item:
                keys = ", ".join(repr(key) for key in list(item)[:10])
                raise ConfigError(f"task.data {self.data!r}: item {index} has no key {input_key!r} (graph.input); "
                                  f"its keys: {keys or 'none'}")
        return items

    def reward_function(self) -> Reward:
        """The reward function, checked as at validation."""
        return load_function("task.reward", self.reward, positional=3)

