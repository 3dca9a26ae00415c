"""Collecting concurrent requests on an event loop into batches that one engine runs off the
loop's thread, one batch at a time; a synchronous call from a worker thread of a loop that
batches sync calls (`batching_sync_calls`) joins that loop's batches.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

LOOP_PICKUP_S = 1.0
"""How long a sync call waits for its event loop to take its request before running it alone:
a loop whose thread is blocked (on this very call, e.g. a sync subgraph invoked from an async
node) would never take it."""

_LOOP_CHECK_S = 1.0
"""How often a sync call waiting for its batch checks that the loop is still open."""

_BATCHING_LOOP: ContextVar[asyncio.AbstractEventLoop | None] = ContextVar("marlang_batching_loop", default=None)


class BatchingEngine(Protocol):
    """What a batcher needs of its engine (`LocalLM`): batch limits and a way to run a batch
    off the event loop's thread."""

    max_batch_size: int
    max_batch_wait_s: float
    batch_window_s: float

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any: ...


class LoopBatcher:
    """Collects the requests made on one event loop into batched `LocalLM` runs
    (``run_batch`` is the engine's batched generation or its batched scoring).

    While a batch decodes in a worker thread the loop keeps running, so new requests queue
    up and form the next batch.
    """

    def __init__(self, engine: BatchingEngine, run_batch: Callable[[list[Any]], list[Any]]) -> None:
        self._engine = engine
        self._run_batch = run_batch
        self._pending: list[tuple[Any, asyncio.Future[Any]]] = []
        self._worker: asyncio.Task[None] | None = None

    async def submit(self, request: Any) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._pending.append((request, future))
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        batch: list[tuple[Any, asyncio.Future[Any]]] = []
        try:
            while self._pending:
                await self._gather_arrivals()
                size = self._engine.max_batch_size
                batch, self._pending = self._pending[:size], self._pending[size:]
                batch = [(r, f) for r, f in batch if not f.done()]  # drop cancelled callers
                if not batch:
                    continue
                try:
                    outputs = await self._engine.run(self._run_batch, [r for r, _ in batch])
                except Exception as exc:  # noqa: BLE001 - every caller in the batch gets the error
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                else:
                    for (_, future), output in zip(batch, outputs, strict=True):
                        if not future.done():
                            future.set_result(output)
                batch = []
        except BaseException:
            for _, future in batch + self._pending:
                future.cancel()
            self._pending = []
            raise

    async def _gather_arrivals(self) -> None:
        # Concurrent callers reach submit() a few loop iterations apart (LangChain runs
        # callbacks and cache lookups first), so wait while requests keep arriving.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._engine.max_batch_wait_s
        seen = -1
        while (
            len(self._pending) != seen
            and len(self._pending) < self._engine.max_batch_size
            and loop.time() < deadline
        ):
            seen = len(self._pending)
            await asyncio.sleep(self._engine.batch_window_s)


@contextmanager
def batching_sync_calls() -> Iterator[None]:
    """Inside, on a running event loop: a synchronous engine call that a worker thread makes in
    this context joins the loop's batches instead of running alone. LangGraph runs a graph's sync
    nodes in such threads, with a copy of the context, so the sync nodes of concurrent
    ``ainvoke`` calls share batches as async ones do."""
    token = _BATCHING_LOOP.set(asyncio.get_running_loop())
    try:
        yield
    finally:
        _BATCHING_LOOP.reset(token)


def in_loop_batch(job: Callable[[], Coroutine[Any, Any, T]], alone: Callable[[], T]) -> T:
    """``job()`` awaited on the loop that batches this context's sync calls, this thread waiting
    for its result; ``alone()`` where there is no such loop, it is closed or not running, this
    thread runs a loop itself (blocking a loop's own thread on it would deadlock), or the loop
    does not take the job within `LOOP_PICKUP_S`."""
    loop = _BATCHING_LOOP.get()
    if loop is None or loop.is_closed() or not loop.is_running() or _runs_a_loop():
        return alone()
    taken = threading.Lock()  # whoever takes it first decides: the loop runs the job, or this thread
    started = threading.Event()

    async def on_loop() -> T:
        if not taken.acquire(blocking=False):
            raise asyncio.CancelledError  # the caller ran it alone meanwhile
        started.set()
        return await job()

    coroutine = on_loop()
    try:
        future = asyncio.run_coroutine_threadsafe(coroutine, loop)
    except RuntimeError:  # the loop closed since the check
        coroutine.close()
        return alone()
    if not started.wait(LOOP_PICKUP_S) and taken.acquire(blocking=False):
        future.cancel()
        logger.debug("the event loop took no sync call for %.1f s (is its thread blocked?): it runs alone",
                     LOOP_PICKUP_S)
        return alone()
    while not future.done():
        concurrent.futures.wait((future,), _LOOP_CHECK_S)
        if not future.done() and loop.is_closed():  # its tasks went with it, this one too
            raise RuntimeError("the event loop closed while a sync call waited for its batch")
    return future.result()


def _runs_a_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
