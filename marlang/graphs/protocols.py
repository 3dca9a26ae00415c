"""Conversation protocols before acting, one LangGraph state machine each.

Every protocol graph takes ``{"observations": {agent: TextObservation}}`` and returns a
``transcript`` (list of :class:`Message`) and one :class:`Decision` per agent. The call
context (episode, step, callbacks) is the graph's runtime context (LangGraph's typed
``context_schema``: a `CallContext`), read in a node with `call_context`.
Independent calls (concurrent messages, every final action) fan out with ``Send``.

The names live in ``marlang.registry.PROTOCOLS``, below ``marlang.config``, so configs validate
``protocol.name`` without importing this module: the builtins are declared there by entry
point (``"marlang.graphs.protocols:build_alternating"``); :func:`register_protocol` adds one.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Protocol, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime, get_runtime
from langgraph.types import Send

from marlang.registry import PROTOCOLS
from marlang.types import CallContext, Decision, Message, TextObservation


def _merge(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    return {**(left or {}), **(right or {})}


class ProtocolState(TypedDict, total=False):
    """State shared by every protocol graph."""

    observations: dict[str, TextObservation]
    transcript: Annotated[list[Message], operator.add]
    decisions: Annotated[dict[str, Decision], _merge]
    turn: int


class AgentTask(TypedDict):
    """What one fanned-out speak/act node receives: one agent and what it may see."""

    agent: str
    observation: TextObservation
    visible: list[Message]
    round: int


class ConversingAgent(Protocol):
    """What a protocol needs of an agent (``LLMAgent`` satisfies it)."""

    name: str

    async def speak(self, obs: TextObservation, transcript: list[Message], ctx: CallContext, round: int = 0,
                    role: str | None = None) -> Message:
        """A message to the team; ``role``: instructions for this message in place of the
        slot's own role (a protocol giving one speaker other instructions than the others)."""

    async def act(self, obs: TextObservation, transcript: list[Message], ctx: CallContext,
                  role: str | None = None) -> Decision:
        """One action; ``role`` as in :meth:`speak`."""


ProtocolBuilder = Callable[[Mapping[str, ConversingAgent], Any], Any]
"""``builder(agents, protocol_config) -> compiled LangGraph`` following :class:`ProtocolState`."""


def register_protocol(name: str, builder: ProtocolBuilder | str, description: str = "") -> None:
    """Make a protocol graph selectable by ``protocol.name`` in configs. ``builder`` may be an
    entry point ``"package.module:function"``, imported when the protocol is first built."""
    PROTOCOLS.register(name, builder, description)


def list_protocols() -> dict[str, str]:
    return PROTOCOLS.describe()


def build_protocol(name: str, agents: Mapping[str, ConversingAgent], config: Any) -> Any:
    if name not in PROTOCOLS:
        raise ValueError(f"unknown protocol {name!r}; valid choices: {', '.join(PROTOCOLS)}")
    return PROTOCOLS.load(name)(agents, config)


def call_context(where: Runtime[CallContext] | RunnableConfig | None = None) -> CallContext:
    """The call context of the protocol graph's run: its runtime context, from the node's
    ``runtime`` (or, for a node that takes ``config``, the run it belongs to); a default
    `CallContext` where the graph was invoked without one."""
    if isinstance(where, Runtime):
        runtime: Runtime[Any] | None = where
    else:
        try:
            runtime = get_runtime()
        except RuntimeError:  # called outside a graph run
            runtime = None
    context = runtime.context if runtime is not None else None
    return context if isinstance(context, CallContext) else CallContext()


# building blocks ---------------------------------------------------------------------------


def others(messages: list[Message], agent: str) -> list[Message]:
    """Messages an agent receives from its teammates (``m_{-i}``)."""
    return [m for m in messages if m.sender != agent]


def _speak_node(agents: Mapping[str, ConversingAgent]):
    async def speak(task: AgentTask, runtime: Runtime[CallContext]) -> dict[str, Any]:
        msg = await agents[task["agent"]].speak(task["observation"], task["visible"], call_context(runtime),
                                                task["round"])
        return {"transcript": [msg]}

    return speak


def _act_node(agents: Mapping[str, ConversingAgent]):
    async def act(task: AgentTask, runtime: Runtime[CallContext]) -> dict[str, Any]:
        decision = await agents[task["agent"]].act(task["observation"], task["visible"], call_context(runtime))
        return {"decisions": {task["agent"]: decision}}

    return act


def _fan_out_acts(visible: Callable[[ProtocolState, str], list[Message]]):
    def route(state: ProtocolState) -> list[Send]:
        return [
            Send("act", AgentTask(agent=a, observation=o, visible=visible(state, a), round=0))
            for a, o in state["observations"].items()
        ]

    return route


def _join(state: ProtocolState) -> dict[str, Any]:
    return {}


# the four protocols -------------------------------------------------------------------------


def build_no_communication(agents: Mapping[str, ConversingAgent], config: Any = None) -> Any:
    """Every agent acts on its own observation; nothing is said."""
    g = StateGraph(ProtocolState, context_schema=CallContext)
    g.add_node("act", _act_node(agents))
    g.add_conditional_edges(START, _fan_out_acts(lambda s, a: []), ["act"])
    g.add_edge("act", END)
    return g.compile(name="protocol:none")


def _build_broadcast(agents: Mapping[str, ConversingAgent], speakers: list[str], name: str) -> Any:
    """Chosen speakers write concurrently from their own observation; then everyone acts
    seeing the messages of the others."""

    def fan_out_speakers(state: ProtocolState) -> list[Send]:
        return [
            Send("speak", AgentTask(agent=a, observation=state["observations"][a], visible=[], round=0))
            for a in speakers
            if a in state["observations"]
        ]

    g = StateGraph(ProtocolState, context_schema=CallContext)
    g.add_node("speak", _speak_node(agents))
    g.add_node("listen", _join)
    g.add_node("act", _act_node(agents))
    g.add_conditional_edges(START, fan_out_speakers, ["speak"])
    g.add_edge("speak", "listen")
    g.add_conditional_edges("listen", _fan_out_acts(lambda s, a: others(s.get("transcript", []), a)), ["act"])
    g.add_edge("act", END)
    return g.compile(name=f"protocol:{name}")


def build_bidirectional(agents: Mapping[str, ConversingAgent], config: Any = None) -> Any:
    """FAMA-style: every agent sends a message, then every agent acts on the others' messages."""
    return _build_broadcast(agents, list(agents), "bidirectional")


def build_unidirectional(agents: Mapping[str, ConversingAgent], config: Any = None) -> Any:
    """Only the configured speakers send; the others listen, then everyone acts."""
    speakers = list(getattr(config, "speakers", None) or [next(iter(agents))])
    unknown = [s for s in speakers if s not in agents]
    if unknown:
        raise ValueError(f"protocol.speakers: unknown agent {unknown[0]!r}; valid choices: {', '.join(agents)}")
    return _build_broadcast(agents, speakers, "unidirectional")


def build_alternating(agents: Mapping[str, ConversingAgent], config: Any = None) -> Any:
    """n-round alternating proposals: agents speak in turn over a shared transcript for
    ``rounds`` rounds; then every agent acts with the full transcript."""
    order = list(agents)
    rounds = int(getattr(config, "rounds", 1) or 1)
    total_turns = rounds * len(order)

    async def speak_turn(state: ProtocolState, runtime: Runtime[CallContext]) -> dict[str, Any]:
        turn = state.get("turn", 0)
        name = order[turn % len(order)]
        msg = await agents[name].speak(
            state["observations"][name], list(state.get("transcript", [])), call_context(runtime), turn // len(order)
        )
        return {"transcript": [msg], "turn": turn + 1}

    def next_turn(state: ProtocolState) -> Any:
        if state.get("turn", 0) < total_turns:
            return "speak_turn"
        return _fan_out_acts(lambda s, a: list(s.get("transcript", [])))(state)

    g = StateGraph(ProtocolState, context_schema=CallContext)
    g.add_node("speak_turn", speak_turn)
    g.add_node("act", _act_node(agents))
    g.add_edge(START, "speak_turn")
    g.add_conditional_edges("speak_turn", next_turn, ["speak_turn", "act"])
    g.add_edge("act", END)
    return g.compile(name=f"protocol:alternating-{rounds}")



async def run_protocol(graph: Any, observations: dict[str, TextObservation],
                       ctx: CallContext) -> tuple[list[Message], dict[str, Decision]]:
    """Run one compiled protocol graph for one joint observation."""
    out = await graph.ainvoke(
        {"observations": observations, "transcript": [], "decisions": {}, "turn": 0},
        config={"recursion_limit": 1000}, context=ctx,
    )
    decisions = out.get("decisions", {})
    missing = [a for a in observations if a not in decisions]
    if missing:
        raise RuntimeError(f"protocol graph returned no decision for {', '.join(missing)}")
    return list(out.get("transcript", [])), decisions
