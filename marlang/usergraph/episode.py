"""`run_graph`: one input through a user's compiled LangGraph graph inside a binding, with the
node-call recorder, as a `GraphEpisode` (the output state, the node calls in order, and the
error of a failed run, which never leaves `run_graph` as an exception).
"""

from __future__ import annotations

import asyncio
import logging
import math
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import Runnable, RunnableConfig

from marlang.models.batching import batching_sync_calls
from marlang.usergraph.binding import Binding, bind
from marlang.usergraph.recorder import NodeCall, NodeCallRecorder

logger = logging.getLogger(__name__)

NO_MODEL_CALLED = "the graph called no chat model"
"""The error of an invocation that ended without a chat-model call: there is nothing to
attribute or train, so it counts as failed."""


RECORDED_CHARS = 2000
"""Characters kept of each value of an input or output in an episode's record (a graph's output
may be any object of any size; the record holds its text, cut)."""

_RECORDED_KEYS = 100
"""Keys kept of a recorded mapping (an input item, an output state)."""

_MESSAGE_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


@dataclass
class GraphEpisode:
    """One invocation: the graph's output state (None if it raised), its chat-model calls in the
    order they began, and the error (None for a run that ended and called a model); played as a
    task's episode (`play_task`), also the task's input item and the reward (None when failed)."""

    output: Any
    calls: list[NodeCall] = field(default_factory=list)
    error: str | None = None
    input: Any = None
    reward: float | None = None
    prompt_reads: dict[str, list[str | None]] = field(default_factory=dict)
    """Each marked prompt read, with the nodes that read it (None: outside a node)."""

    @property
    def failed(self) -> bool:
        return self.error is not None

    def to_record(self) -> dict[str, Any]:
        """The episode as JSON-able values (a line of ``episodes.jsonl``): the input and output
        as text cut to `RECORDED_CHARS` per value, the reward, the error, and each call with its
        node, path, role, messages as role/content pairs, reply, tokens, latency and prompt
        versions."""
        return {
            "input": recorded_value(self.input),
            "output": recorded_value(self.output),
            "reward": self.reward,
            "error": self.error,
            "calls": [_call_record(call) for call in self.calls],
            "prompt_reads": {name: list(nodes) for name, nodes in self.prompt_reads.items()},
        }


def _text(value: Any) -> str:
    """``value`` as text cut to `RECORDED_CHARS`; an object whose ``str`` raises is named by its type."""
    if type(value) is str:
        text = value
    else:
        try:
            text = str(value)
        except Exception:  # noqa: BLE001 - a graph's output object may raise from __str__
            text = f"<{type(value).__name__} that cannot be shown>"
        if type(text) is not str:  # a str subclass may override what it shows later
            text = f"<{type(value).__name__} that cannot be shown>"
    if len(text) <= RECORDED_CHARS:
        return text
    return f"{text[:RECORDED_CHARS]}...({len(text) - RECORDED_CHARS} characters left out)"


def recorded_value(value: Any) -> Any:
    """A JSON-safe rendering of an input item or output state: a plain mapping by key (the first
    `_RECORDED_KEYS`), each value (and any other value) None, a bool, an int, a finite float or
    its text, cut. The exact type is checked, so a subclass that lies in its methods is text."""
    if type(value) is dict:
        return {_text(key): _scalar(item) for key, item in list(value.items())[:_RECORDED_KEYS]}
    return _scalar(value)


def _scalar(value: Any) -> Any:
    if value is None or type(value) is bool or (type(value) is int and abs(value) < 2**63):
        return value
    if type(value) is float and math.isfinite(value):
        return value
    return _text(value)


def _call_record(call: NodeCall) -> dict[str, Any]:
    return {
        "order": call.order,
        "node": call.node,
        "path": list(call.path),
        "role": call.role,
        "messages": [{"role": _MESSAGE_ROLES.get(message.type, message.type), "content": message.text}
                     for message in call.messages],
        "reply": call.reply,
        "input_tokens": call.input_tokens,
        "output_tokens": call.output_tokens,
        "latency_s": call.latency_s,
        "prompt_versions": dict(call.prompt_versions),
        "error": call.error,
    }


def _config(recorder: NodeCallRecorder, recursion_limit: int, callbacks: Sequence[BaseCallbackHandler],
            metadata: Mapping[str, Any] | None) -> RunnableConfig:
    config: RunnableConfig = {"callbacks": [recorder, *callbacks], "recursion_limit": recursion_limit}
    if metadata:
        config["metadata"] = dict(metadata)
    return config


def _episode(output: Any, recorder: NodeCallRecorder, binding: Binding, error: BaseException | None) -> GraphEpisode:
    calls, reads = recorder.calls, binding.reads()
    if error is not None:
        logger.info("graph run failed: %s: %s", type(error).__name__, error)
        return GraphEpisode(None, calls, f"{type(error).__name__}: {error}", prompt_reads=reads)
    return GraphEpisode(output, calls, None if calls else NO_MODEL_CALLED, prompt_reads=reads)


def run_graph(
    graph: Runnable[Any, Any],
    inputs: Mapping[str, Any],
    binding: Binding | None = None,
    *,
    recursion_limit: int = 25,
    callbacks: Sequence[BaseCallbackHandler] = (),
    metadata: Mapping[str, Any] | None = None,
) -> GraphEpisode:
    """Invoke ``graph`` once on ``inputs`` inside ``binding`` (a fresh empty one: every mark
    returns its default) and record its chat-model calls; ``callbacks`` and ``metadata`` go to
    every call as well (a run's usage recorder, the episode's ids). A graph that raises, passes
    its recursion limit or calls no model gives a failed episode with the error."""
    binding = binding if binding is not None else Binding()
    recorder = NodeCallRecorder(binding.prompt_versions())
    with bind(binding):
        try:
            output = graph.invoke(dict(inputs), _config(recorder, recursion_limit, callbacks, metadata))
        except Exception as error:  # noqa: BLE001 - any failure of the user's graph is the episode's outcome
            return _episode(None, recorder, binding, error)
    return _episode(output, recorder, binding, None)


NODE_THREADS = 64
"""Threads of the event loop's default executor while graphs play on it: LangGraph runs each
sync node there, and Python's default (CPUs + 4, at most 32) would hold concurrent invocations'
model calls back from the local engine's batches. Threads start only as nodes need them."""

_widened: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


def widen_node_threads() -> None:
    """Give the running loop a default executor of `NODE_THREADS` threads, once per loop (the
    narrower one it may have had is shut down when its work is done)."""
    loop = asyncio.get_running_loop()
    if loop in _widened:
        return
    _widened.add(loop)
    previous = getattr(loop, "_default_executor", None)  # asyncio's own, the one set_default_executor replaces
    loop.set_default_executor(ThreadPoolExecutor(max_workers=NODE_THREADS, thread_name_prefix="marlang-node"))
    if isinstance(previous, ThreadPoolExecutor):
        previous.shutdown(wait=False)


async def arun_graph(
    graph: Runnable[Any, Any],
    inputs: Mapping[str, Any],
    binding: Binding | None = None,
    *,
    recursion_limit: int = 25,
    callbacks: Sequence[BaseCallbackHandler] = (),
    metadata: Mapping[str, Any] | None = None,
) -> GraphEpisode:
    """`run_graph` for asyncio: concurrent calls each run in their own binding, and the sync
    nodes' calls of a local model join the loop's batches with every other call's."""
    binding = binding if binding is not None else Binding()
    recorder = NodeCallRecorder(binding.prompt_versions())
    widen_node_threads()
    with bind(binding), batching_sync_calls():
        try:
            output = await graph.ainvoke(dict(inputs), _config(recorder, recursion_limit, callbacks, metadata))
        except Exception as error:  # noqa: BLE001 - any failure of the user's graph is the episode's outcome
            return _episode(None, recorder, binding, error)
    return _episode(output, recorder, binding, None)
