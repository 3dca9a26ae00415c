"""`NodeCallRecorder`: a LangChain callback handler that records every chat-model call of one
invocation of a user's graph, attributed to its LangGraph node through the callback metadata
(``langgraph_node``, and ``langgraph_checkpoint_ns`` for the path through subgraphs), in the order the calls began.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.outputs import LLMResult

from marlang.models.accounting import NODE_KEY, reported_tokens
from marlang.usergraph.binding import ROLE_METADATA_KEY


@dataclass
class NodeCall:
    """One chat-model call: its place in the invocation (``order``, from 0), the node that made
    it (None outside any node) and the subgraph path of nodes down to it, the mark's role (None
    for a model not from a mark), the messages in, the reply, the tokens the model reports (None
    where it reports no count or one that cannot be: `reported_tokens`), the latency, the prompt
    versions bound, and the error if the call raised."""

    order: int
    node: str | None
    path: tuple[str, ...]
    role: str | None
    messages: list[BaseMessage]
    prompt_versions: dict[str, int]
    reply: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_s: float = 0.0
    error: str | None = None


def _path(checkpoint_ns: str) -> tuple[str, ...]:
    """``"outer:<task id>|inner:<task id>"`` -> ``("outer", "inner")``."""
    return tuple(part.split(":", 1)[0] for part in checkpoint_ns.split("|") if part)


class NodeCallRecorder(BaseCallbackHandler):
    """Records the chat-model calls of one graph invocation (pass it in the invocation's
    ``callbacks``); `calls` holds them in the order they began."""

    # inline: a call's start is recorded before its model runs, so the order is the order begun
    run_inline = True

    def __init__(self, prompt_versions: Mapping[str, int] | None = None) -> None:
        self.prompt_versions = dict(prompt_versions or {})
        self._calls: dict[UUID, NodeCall] = {}
        self._started: dict[UUID, float] = {}
        self._lock = threading.Lock()  # a sync graph runs parallel nodes in threads

    @property
    def calls(self) -> list[NodeCall]:
        with self._lock:
            return sorted(self._calls.values(), key=lambda call: call.order)

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        metadata = metadata or {}
        node = metadata.get(NODE_KEY)
        with self._lock:
            self._calls[run_id] = NodeCall(
                order=len(self._calls),
                node=None if node is None else str(node),
                # a subgraph's own checkpoint_ns stops at its node; LangGraph's goes down to the call's
                path=_path(str(metadata.get("langgraph_checkpoint_ns", metadata.get("checkpoint_ns", "")))),
                role=metadata.get(ROLE_METADATA_KEY),
                messages=[message for batch in messages for message in batch],
                prompt_versions=dict(self.prompt_versions),
            )
            self._started[run_id] = time.perf_counter()

    def _ended(self, run_id: UUID) -> NodeCall | None:
        """The call ``run_id`` with its latency set; None for a completion model's call, which
        this recorder does not record."""
        ended = time.perf_counter()
        with self._lock:
            call = self._calls.get(run_id)
            if call is not None:
                call.latency_s = ended - self._started.pop(run_id, ended)
        return call

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        call = self._ended(run_id)
        if call is None:
            return
        call.reply = "".join(generation.text for generations in response.generations for generation in generations)
        reported = reported_tokens(response)
        call.input_tokens, call.output_tokens = reported.input_tokens, reported.output_tokens

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        call = self._ended(run_id)
        if call is None:
            return
        call.error = f"{type(error).__name__}: {error}"
