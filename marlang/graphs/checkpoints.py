"""The training graph's SQLite checkpointer, made durable before any model call.

LangGraph writes a step's checkpoint (and each finished task's writes) in the background
while the next step starts. A process killed in that window would lose answered calls and
make them again on resume. `FlushingSqliteSaver` counts its writes in flight, and every node
that calls a model first awaits :meth:`flushed`, so what is answered is on disk first.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver


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
