"""`run_graph`: one input through a user's compiled LangGraph graph inside a binding, with the
node-call recorder, as a `GraphEpisode` (the output state, the node calls in order, and the
error of a failed run, which never leaves `run_graph` as an exception).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig

from marlang.usergraph.binding import Binding, bind
from marlang.usergraph.recorder import NodeCall, NodeCallRecorder

logger = logging.getLogger(__name__)

NO_MODEL_CALLED = "the graph called no chat model"
"""The error of an invocation that ended without a chat-model call: there is nothing to
attribute or train, so it counts as failed."""


@dataclass
class GraphEpisode:
    """One invocation: the graph's output state (None if it raised), its chat-model calls in the
    order they began, and the error (None for a run that ended and called a model)."""

    output: Any
    calls: list[NodeCall] = field(default_factory=list)
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None


def _config(recorder: NodeCallRecorder, recursion_limit: int) -> RunnableConfig:
    return {"callbacks": [recorder], "recursion_limit": recursion_limit}


def _episode(output: Any, recorder: NodeCallRecorder, error: BaseException | None) -> GraphEpisode:
    calls = recorder.calls
    if error is not None:
        logger.info("graph run failed: %s: %s", type(error).__name__, error)
        return GraphEpisode(None, calls, f"{type(error).__name__}: {error}")
    return GraphEpisode(output, calls, None if calls else NO_MODEL_CALLED)


def run_graph(
    graph: Runnable[Any, Any],
    inputs: Mapping[str, Any],
    binding: Binding | None = None,
    *,
    recursion_limit: int = 25,
) -> GraphEpisode:
    """Invoke ``graph`` once on ``inputs`` inside ``binding`` (an empty one: every mark returns
    its default) and record its chat-model calls. A graph that raises, passes its recursion
    limit or calls no model gives a failed episode with the error."""
    binding = binding if binding is not None else Binding()
    recorder = NodeCallRecorder(binding.prompt_versions())
    with bind(binding):
        try:
            output = graph.invoke(dict(inputs), _config(recorder, recursion_limit))
        except Exception as error:  # noqa: BLE001 - any failure of the user's graph is the episode's outcome
            return _episode(None, recorder, error)
    return _episode(output, recorder, None)


async def arun_graph(
    graph: Runnable[Any, Any],
    inputs: Mapping[str, Any],
    binding: Binding | None = None,
    *,
    recursion_limit: int = 25,
) -> GraphEpisode:
    """`run_graph` for asyncio: concurrent calls each run in their own binding."""
    binding = binding if binding is not None else Binding()
    recorder = NodeCallRecorder(binding.prompt_versions())
    with bind(binding):
        try:
            output = await graph.ainvoke(dict(inputs), _config(recorder, recursion_limit))
        except Exception as error:  # noqa: BLE001 - any failure of the user's graph is the episode's outcome
            return _episode(None, recorder, error)
    return _episode(output, recorder, None)
