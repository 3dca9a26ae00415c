"""HTTP clients for served chat models: a connection pool per event loop, and a deadline for
each whole request (connecting and the whole reply), so the settings of a grid (each on an
event loop of its own) never reuse a closed loop's connections, and a trickled reply cannot
hold a call past ``model.timeout``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx

MAX_REPLY_BYTES = 64 * 2**20
"""A reply body longer than this is refused as malformed (a chat completion is far smaller)."""


class CallDeadlineError(httpx.TimeoutException):
    """A request whose reply had not arrived in full by its deadline (``model.timeout``);
    ``kind`` says how far it got: no reply, a body that stalled, or one that came too slowly."""

    def __init__(self, kind: str, *, request: httpx.Request) -> None:
        super().__init__(kind, request=request)
        self.kind = kind


class ReplyTooLargeError(httpx.DecodingError):
    """A reply body longer than `MAX_REPLY_BYTES`."""


def _late(request: httpx.Request, seconds: float, received: int | None = None,
          idle_s: float = 0.0) -> CallDeadlineError:
    """The deadline's error, naming what had come: nothing, a body that stopped (no byte for
    at least half the deadline), or one trickled too slowly to finish."""
    deadline = f"the call's deadline of {seconds:g} s (model.timeout)"
    if received is None:
        kind = f"no reply within {deadline}"
    elif idle_s >= seconds / 2:
        kind = f"the reply stalled mid-body ({received} bytes came, then nothing for {idle_s:.1f} s) past {deadline}"
    else:
        kind = f"the reply came too slowly ({received} bytes, still coming) to finish within {deadline}"
    return CallDeadlineError(kind, request=request)


def _too_large(request: httpx.Request) -> ReplyTooLargeError:
    return ReplyTooLargeError(f"the reply body is longer than {MAX_REPLY_BYTES // 2**20} MiB", request=request)


class LoopPooledTransport(httpx.AsyncBaseTransport):
    """Sends each request with a connection pool of the running event loop's own (an
    `httpx.AsyncClient` per loop, which honours the proxy environment), and ends it with
    `CallDeadlineError` when the whole reply has not come ``deadline_s`` seconds after it was
    sent. A loop's pool is closed as the loop shuts down (`asyncio.run` ends by closing the
    loop's async generators, one of which holds the pool), so no connection outlives its loop."""

    def __init__(self, deadline_s: float, limits: httpx.Limits | None = None) -> None:
        self.deadline_s = deadline_s
        self._limits = limits or httpx.Limits(max_connections=1000, max_keepalive_connections=100)
        self._clients: dict[asyncio.AbstractEventLoop, tuple[httpx.AsyncClient, AsyncIterator[None]]] = {}
        self._lock = threading.Lock()

    async def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        with self._lock:
            for gone in [other for other in self._clients if other.is_closed()]:
                del self._clients[gone]
            held = self._clients.get(loop)
            new = held is None
            if held is None:
                client = httpx.AsyncClient(limits=self._limits, follow_redirects=False)
                held = self._clients[loop] = (client, _closed_with_the_loop(client))
        if new:
            await anext(held[1])  # runs to its yield at once: no other task sees it unstarted
        return held[0]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.deadline_s
        try:
            async with asyncio.timeout_at(deadline):
                response = await (await self._client()).send(request, stream=True)
        except TimeoutError:
            raise _late(request, self.deadline_s) from None
        return httpx.Response(response.status_code, headers=response.headers, extensions=response.extensions,
                              stream=_AsyncDeadlineStream(response, deadline, self.deadline_s))

    async def aclose(self) -> None:
        """Close the pool of the running loop (the others close with their loops)."""
        with self._lock:
            held = self._clients.pop(asyncio.get_running_loop(), None)
        if held is not None:
            await held[0].aclose()


async def _closed_with_the_loop(client: httpx.AsyncClient) -> AsyncIterator[None]:
    """Started once on a loop, this generator waits there; the loop's shutdown closes it, and
    with it ``client``'s connections."""
    try:
        yield
    finally:
        await client.aclose()


class _AsyncDeadlineStream(httpx.AsyncByteStream):
    def __init__(self, response: httpx.Response, deadline: float, seconds: float) -> None:
        self._response, self._deadline, self._seconds = response, deadline, seconds

    async def __aiter__(self) -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        chunks = self._response.aiter_raw()
        received, last = 0, loop.time()
        while True:
            try:
                async with asyncio.timeout_at(self._deadline):
                    chunk = await anext(chunks)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise _late(self._response.request, self._seconds, received, loop.time() - last) from None
            received, last = received + len(chunk), loop.time()
            if received > MAX_REPLY_BYTES:
                raise _too_large(self._response.request)
            yield chunk

    async def aclose(self) -> None:
        await self._response.aclose()


class DeadlineTransport(httpx.BaseTransport):
    """The synchronous counterpart of `LoopPooledTransport`: one pool; the request is sent on a
    thread of its own, so the wait for the status and headers ends at the deadline however
    slowly they come, and the body is cut within one read of it."""

    def __init__(self, deadline_s: float, limits: httpx.Limits | None = None) -> None:
        self.deadline_s = deadline_s
        self._client = httpx.Client(limits=limits or httpx.Limits(max_connections=1000, max_keepalive_connections=100),
                                    follow_redirects=False)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        deadline = time.monotonic() + self.deadline_s
        sent: dict[str, Any] = {}
        lock = threading.Lock()

        def send() -> None:
            try:
                response = self._client.send(request, stream=True)
            except Exception as err:  # noqa: BLE001 - handed to the caller, who raises it
                sent["error"] = err
                return
            with lock:
                if sent.get("late"):  # the caller gave up: free the connection
                    response.close()
                else:
                    sent["response"] = response

        worker = threading.Thread(target=send, name="marlang-served-call", daemon=True)
        worker.start()
        worker.join(self.deadline_s)
        with lock:
            if "response" not in sent and "error" not in sent:
                sent["late"] = True
                raise _late(request, self.deadline_s)
        if "error" in sent:
            raise sent["error"]
        response = sent["response"]
        return httpx.Response(response.status_code, headers=response.headers, extensions=response.extensions,
                              stream=_DeadlineStream(response, deadline, self.deadline_s))

    def close(self) -> None:
        self._client.close()


class _DeadlineStream(httpx.SyncByteStream):
    def __init__(self, response: httpx.Response, deadline: float, seconds: float) -> None:
        self._response, self._deadline, self._seconds = response, deadline, seconds

    def __iter__(self) -> Iterator[bytes]:
        received, last = 0, time.monotonic()
        for chunk in self._response.iter_raw():
            if time.monotonic() > self._deadline:
                raise _late(self._response.request, self._seconds, received, time.monotonic() - last)
            received, last = received + len(chunk), time.monotonic()
            if received > MAX_REPLY_BYTES:
                raise _too_large(self._response.request)
            yield chunk

    def close(self) -> None:
        self._response.close()


def served_model_clients(deadline_s: float) -> dict[str, Any]:
    """``http_client`` and ``http_async_client`` for an openai-SDK chat model: redirects
    followed (as the SDK's own clients do), proxies from the environment, a pool per event
    loop, and a ``deadline_s`` for each whole request."""
    return {
        "http_client": httpx.Client(transport=DeadlineTransport(deadline_s), follow_redirects=True, trust_env=False),
        "http_async_client": httpx.AsyncClient(transport=LoopPooledTransport(deadline_s), follow_redirects=True,
                                               trust_env=False),
    }
