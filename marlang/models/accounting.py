"""Per-call LLM accounting: a LangChain callback recording one row per chat-model call.

Rows carry who called (role, agent, episode, step from the call's metadata), the model,
tokens, latency, whether the response came from the cache, how often a served model's call
was retried, and any error; `append_csv` writes them to a run's ``llm_calls.csv``.
`reported_tokens` reads the tokens a response reports, for every recorder of calls.
"""

from __future__ import annotations

import csv
import logging
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.outputs import LLMResult

from marlang.models.cache import CACHED_FLAG
from marlang.rundir import append_csv
from marlang.token_counts import MAX_CALL_TOKENS, trusted_tokens

logger = logging.getLogger(__name__)

ROLE_KEY = "marlang_role"
AGENT_KEY = "marlang_agent"
EPISODE_KEY = "marlang_episode"
STEP_KEY = "marlang_step"
ITERATION_KEY = "marlang_iteration"
NODE_KEY = "langgraph_node"
"""The key under which LangGraph's callback metadata names the node a call is made in."""
UNKNOWN_ROLE = "unknown"


@dataclass(frozen=True)
class LLMCallRecord:
    """One chat-model call, as one row of ``llm_calls.csv``."""

    time: str
    """When the call started (ISO 8601, UTC)."""
    model: str
    role: str
    agent: str
    episode: Any
    step: Any
    input_tokens: int
    output_tokens: int
    """Tokens as reported by the response; for a cache hit, those of the original call."""
    latency_s: float
    cached: bool
    error: str = ""
    """Empty for a successful call, else the exception's type and message."""
    iteration: Any = None
    """The learner iteration the call belongs to (rollouts and the update that follows)."""
    retries: int = 0
    """Attempts the server failed before this call's answer (or its error, when they ran
    out): 5xx, timeouts, cut or malformed replies, ... (`ResilientChatModel`)."""


CSV_FIELDS = tuple(f.name for f in fields(LLMCallRecord))


@dataclass
class _OpenCall:
    started: float
    wall_time: str
    model: str
    role: str
    agent: str
    episode: Any
    step: Any
    iteration: Any = None
    retries: int = 0


class UsageRecorder(BaseCallbackHandler):
    """Records one `LLMCallRecord` per chat-model call it sees as a callback.

    Attach it with the caller's identity in the run metadata::

        await model.ainvoke(messages, config={
            "callbacks": [recorder],
            "metadata": {"marlang_role": "actor", "marlang_agent": "agent_0",
                         "marlang_episode": 3, "marlang_step": 7},
        })

    All four keys are optional (role defaults to ``"unknown"``, the others to empty; without
    ``marlang_agent`` the agent is the LangGraph node making the call, ``langgraph_node``, as in
    a user's own graph).
    Cache hits are recorded too, with ``cached=True``, the tokens of the cached answer and
    near-zero latency. The totals count tokens of every answered call, so a run replayed
    from the cache reports the same token use as the original; ``cached`` says how many
    calls cost nothing, and ``latency_s`` sums backend time only. A reported token count that
    cannot be one (negative, fractional, absurd: `marlang.token_counts`) is recorded as 0 and
    counted in ``distrusted_usage``. Safe to share across threads and concurrent tasks.
    """

    # Bookkeeping is cheap: run on the caller's thread/event loop instead of an executor.
    run_inline = True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: list[LLMCallRecord] = []
        self._open: dict[UUID, _OpenCall] = {}
        self._written: dict[Path, int] = {}
        self.distrusted_usage = 0
        """Calls whose reported token counts were dropped as impossible."""

    # --- LangChain callbacks -------------------------------------------------------------
    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._start(run_id, serialized, metadata, kwargs.get("invocation_params"))

    def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._start(run_id, serialized, metadata, kwargs.get("invocation_params"))

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        reported = reported_tokens(response)
        if reported.distrusted:
            with self._lock:
                self.distrusted_usage += 1
                first = self.distrusted_usage == 1
            if first:  # once: a broken server sends the same nonsense with every reply
                logger.warning("a model server reported token usage that cannot be (negative, fractional or over "
                               "%d tokens a call); it is counted as 0 (UsageRecorder.distrusted_usage counts "
                               "such calls)", MAX_CALL_TOKENS)
        self._finish(run_id, reported.input_tokens or 0, reported.output_tokens or 0, cached=_is_cached(response))

    def on_retry(self, retry_state: Any, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            call = self._open.get(run_id)
            if call is not None:
                call.retries += 1

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        # One line: a row of llm_calls.csv is one line of the file.
        self._finish(run_id, 0, 0, cached=False, error=" ".join(f"{type(error).__name__}: {error}".split()))

    # --- results ----------------------------------------------------------------------------
    @property
    def rows(self) -> list[LLMCallRecord]:
        """All finished calls so far, in the order they finished."""
        with self._lock:
            return list(self._rows)

    def append_csv(self, path: str | Path) -> int:
        """Append the rows not yet written to ``path`` (header only for a new file).

        Returns how many rows were written. Each path keeps its own position, so calling
        this after every episode writes every row exactly once. A file begun with fewer
        columns (by an older marlang: a resumed run) keeps its own.
        """
        path = Path(path)
        key = path.resolve()
        with self._lock:
            start = self._written.get(key, 0)
            new_rows = self._rows[start:]
            if not new_rows:
                return 0
            # fsynced, a torn last row (a killed writer) cut first
            append_csv(path, _header(path) or CSV_FIELDS, [asdict(row) for row in new_rows])
            self._written[key] = start + len(new_rows)
        return len(new_rows)

    def totals(self) -> dict[str, float]:
        """Totals over all calls (see `totals_by_role` for the keys)."""
        return _total(self.rows)

    def totals_by_role(self) -> dict[str, dict[str, float]]:
        """Per role: ``calls``, ``cached``, ``errors``, ``retries``, ``input_tokens``,
        ``output_tokens``, ``latency_s`` (tokens of every answered call, cache hits included;
        latency of calls a backend answered)."""
        return self._grouped(lambda row: row.role)

    def totals_by_episode(self) -> dict[Any, dict[str, float]]:
        """Per episode (as given in the metadata), the same totals as `totals_by_role`."""
        return self._grouped(lambda row: row.episode)

    def totals_by_agent(self) -> dict[str, dict[str, float]]:
        """Per agent, the same totals as `totals_by_role`."""
        return self._grouped(lambda row: row.agent)

    def _grouped(self, key: Callable[[LLMCallRecord], Hashable]) -> dict[Any, dict[str, float]]:
        groups: dict[Any, list[LLMCallRecord]] = {}
        for row in self.rows:
            groups.setdefault(key(row), []).append(row)
        return {k: _total(rows) for k, rows in groups.items()}

    # --- bookkeeping ----------------------------------------------------------------------
    def _start(
        self,
        run_id: UUID,
        serialized: dict[str, Any] | None,
        metadata: dict[str, Any] | None,
        invocation_params: dict[str, Any] | None,
    ) -> None:
        metadata = metadata or {}
        call = _OpenCall(
            started=time.perf_counter(),
            wall_time=datetime.now(UTC).isoformat(timespec="milliseconds"),
            model=_model_id(serialized or {}, metadata, invocation_params or {}),
            role=str(metadata.get(ROLE_KEY) or UNKNOWN_ROLE),
            agent=_agent(metadata),
            episode=metadata.get(EPISODE_KEY),
            step=metadata.get(STEP_KEY),
            iteration=metadata.get(ITERATION_KEY),
        )
        with self._lock:
            self._open[run_id] = call

    def _finish(
        self, run_id: UUID, input_tokens: int, output_tokens: int, *, cached: bool, error: str = ""
    ) -> None:
        finished = time.perf_counter()
        with self._lock:
            call = self._open.pop(run_id, None)
            if call is None:  # started before this recorder was attached
                return
            self._rows.append(
                LLMCallRecord(
                    time=call.wall_time,
                    model=call.model,
                    role=call.role,
                    agent=call.agent,
                    episode=call.episode,
                    step=call.step,
                    input_tokens=input_tokens,
                    output_tokens=output_tokens,
                    latency_s=round(finished - call.started, 6),
                    cached=cached,
                    error=error,
                    iteration=call.iteration,
                    retries=call.retries,
                )
            )


def _total(rows: list[LLMCallRecord]) -> dict[str, float]:
    answered = [r for r in rows if not r.error]
    return {
        "calls": len(rows),
        "cached": sum(1 for r in rows if r.cached),
        "errors": sum(1 for r in rows if r.error),
        "retries": sum(r.retries for r in rows),
        "input_tokens": sum(r.input_tokens for r in answered),
        "output_tokens": sum(r.output_tokens for r in answered),
        "latency_s": sum(r.latency_s for r in rows if not r.cached),
    }


def _header(path: Path) -> list[str] | None:
    """The columns of an existing CSV file (None for a missing or empty one)."""
    try:
        with open(path, newline="") as fh:
            first = fh.readline()
    except FileNotFoundError:
        return None
    return next(csv.reader([first]), None) if first.strip() else None


def _agent(metadata: dict[str, Any]) -> str:
    """Who made the call: the agent marlang names, else, for a call of a user's graph, which
    marlang does not tag, its LangGraph node. A marlang call that names no agent (a learner's)
    keeps none, though it is made in a node of marlang's own graphs."""
    agent = metadata[AGENT_KEY] if AGENT_KEY in metadata else metadata.get(NODE_KEY)
    return str(agent or "")


def _model_id(
    serialized: dict[str, Any], metadata: dict[str, Any], invocation_params: dict[str, Any]
) -> str:
    for value in (
        invocation_params.get("model_id"),  # marlang's own chat models
        metadata.get("ls_model_name"),
        invocation_params.get("model"),
        invocation_params.get("model_name"),
        serialized.get("name"),
    ):
        if value:
            return str(value)
    return "unknown"


@dataclass(frozen=True)
class ReportedTokens:
    """The tokens a chat-model response says its call read and wrote: None for a side it reports
    no count of, or a count that cannot be one (`trusted_tokens`: negative, fractional, absurd),
    which ``distrusted`` then says."""

    input_tokens: int | None
    output_tokens: int | None
    distrusted: bool = False


_UNREPORTED = object()


def reported_tokens(response: LLMResult) -> ReportedTokens:
    """The tokens ``response`` reports: its messages' usage metadata (summed over generations;
    a cache hit's are the original call's), else the ``token_usage`` older integrations put in
    ``llm_output``."""
    counts: list[tuple[Any, Any]] = []
    for generations in response.generations:
        for generation in generations:
            usage = getattr(getattr(generation, "message", None), "usage_metadata", None)
            if usage:
                counts.append((usage.get("input_tokens", _UNREPORTED), usage.get("output_tokens", _UNREPORTED)))
    if not counts and response.llm_output:
        usage = response.llm_output.get("token_usage") or {}
        if isinstance(usage, dict):
            counts.append((usage.get("prompt_tokens", _UNREPORTED), usage.get("completion_tokens", _UNREPORTED)))
    input_tokens, input_trusted = _summed([reported for reported, _ in counts])
    output_tokens, output_trusted = _summed([reported for _, reported in counts])
    return ReportedTokens(input_tokens, output_tokens, distrusted=not (input_trusted and output_trusted))


def _summed(reported: list[Any]) -> tuple[int | None, bool]:
    """The sum of one side's counts and whether each could be a count: None for a side no
    generation reports or one with a count that cannot be."""
    counts = [trusted_tokens(value) for value in reported if value is not _UNREPORTED]
    if not counts:
        return None, True
    if any(count is None for count in counts):
        return None, False
    return sum(count for count in counts if count is not None), True


def _is_cached(response: LLMResult) -> bool:
    generations = [g for gens in response.generations for g in gens]
    return bool(generations) and all(
        (g.generation_info or {}).get(CACHED_FLAG)
        or getattr(getattr(g, "message", None), "response_metadata", {}).get(CACHED_FLAG)
        for g in generations
    )
