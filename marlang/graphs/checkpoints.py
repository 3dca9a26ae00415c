"""The training graph's SQLite checkpointer, made durable before any model call.

LangGraph writes a step's checkpoint (and each finished task's writes) in the background
while the next step starts. A process killed in that window would lose answered calls and
make them again on resume. `FlushingSqliteSaver` counts its writes in flight, and every node
that calls a model first awaits :meth:`flushed`, so what is answered is on disk first.
`CheckpointDatabase` opens and closes its connection explicitly, so no database thread outlives
the run, however it ended, and reads the file as data (`StrictCheckpointSerializer`).
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import aiosqlite
from aiosqlite.core import _STOP_RUNNING_SENTINEL
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from marlang.graphs.checkpoint_serde import StrictCheckpointSerializer


class FlushingSqliteSaver(AsyncSqliteSaver):
    """`AsyncSqliteSaver` that can wait until every checkpoint write it started is done."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._inflight = 0
        self._idle: asyncio.Event | None = None

    def _event(self) -> asyncio.Event:
        if self._idle is None:
            self._idle = asyncio.Event()
            self._idle.set()
        return self._idle

    async def _tracked(self, coro: Any) -> Any:
        self._inflight += 1
        self._event().clear()
        try:
            return await coro
        finally:
            self._inflight -= 1
            if self._inflight == 0:
                self._event().set()

    async def aput(self, *args: Any, **kwargs: Any) -> Any:
        return await self._tracked(super().aput(*args, **kwargs))

    async def aput_writes(self, *args: Any, **kwargs: Any) -> Any:
        return await self._tracked(super().aput_writes(*args, **kwargs))

    async def flushed(self) -> None:
        """Return once no checkpoint write is in flight (after letting queued ones start)."""
        await asyncio.sleep(0)  # writes submitted just before this node run first
        while self._inflight:
            await self._event().wait()


class CheckpointDatabase:
    """The run's checkpoint file and its aiosqlite connection, whose worker is a non-daemon
    thread: :meth:`open` and :meth:`aclose` on the event loop, and :meth:`stop` after it (in a
    ``finally``), which ends the thread whatever state an interruption left the connection in
    (aiosqlite cut inside its own start or close keeps its thread waiting, and the process
    would never exit)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._connection: aiosqlite.Connection | None = None
        self._thread: threading.Thread | None = None

    async def open(self) -> FlushingSqliteSaver:
        connection = self._connection = aiosqlite.connect(str(self.path))
        self._thread = getattr(connection, "_thread", None)  # aiosqlite's worker (>= 0.17)
        await connection
        return FlushingSqliteSaver(connection, serde=StrictCheckpointSerializer(self.path))

    async def aclose(self) -> None:
        if self._connection is not None:
            await self._connection.close()

    def stop(self, timeout: float = 10.0) -> None:
        """End the connection's thread, closing the database first (a write still running
        finishes before); call it once the event loop is gone."""
        connection, thread = self._connection, self._thread
        if connection is None or thread is None or not thread.is_alive():
            return

        def close_and_stop() -> Any:
            if connection._connection is not None:
                connection._connection.close()
                connection._connection = None
            return _STOP_RUNNING_SENTINEL

        # Connection.stop() would make a future on "the current event loop", which there is no
        # longer: queue aiosqlite's own stop job with no future instead.
        connection._running = False
        connection._tx.put_nowait((None, close_and_stop))
        thread.join(timeout)
