"""Collecting concurrent requests on an event loop into batches that one engine runs off the
loop's thread, one batch at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol


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

