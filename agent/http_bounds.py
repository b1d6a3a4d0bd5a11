"""HTTP answers read within a budget: at most `max_bytes` and `max_s` per answer, whatever the server sends.

httpx's timeouts bound each read, never a whole answer, and a client reads a body whole before parsing it: the Task
API client, asked for a 300 MB task list by a loopback server, peaked at 2,639 MB (from 219 MB) and took 7 s; with
these bounds, 251 MB and 0.1 s, the answer refused at 32 MB. The hooks here wrap each answer's stream and cut an
answer off as it streams past either bound (`AnswerRefused`, an httpx transport error, so callers that handle
httpx's errors handle it). They ask for no compression and refuse a compressed answer: its length says nothing
of what it unpacks to. agent/netguard.py builds every client that talks to a berth server with them.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator

import httpx

_STARTED = "bounded_started"  # a request extension: when the request left (httpcore ignores keys it does not use)


class AnswerRefused(httpx.TransportError):
    """An answer larger than a client's `max_bytes`, still coming after its `max_s`, or compressed (a client here
    asks for none: a compressed answer's size says nothing of what it unpacks to)."""


class AnswerTooLarge(AnswerRefused):
    """An answer larger than a client's `max_bytes` (declared so, or counted as it streamed)."""


def _bounded_headers(response: httpx.Response, max_bytes: int) -> None:
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    length = response.headers.get("content-length", "")
    if encoding not in ("", "identity"):
        raise AnswerRefused(f"the server sent a compressed answer ({encoding[:20]}) it was not asked for")
    if length.isdigit() and int(length) > max_bytes:
        raise AnswerTooLarge(f"the answer is larger than {max_bytes / 2**20:.0f} MB")


def _counted(seen: int, chunk: bytes, max_bytes: int, deadline: float, max_s: float) -> int:
    seen += len(chunk)
    if seen > max_bytes:
        raise AnswerTooLarge(f"the answer is larger than {max_bytes / 2**20:.0f} MB")
    if time.monotonic() > deadline:
        raise AnswerRefused(f"the answer took longer than {max_s:.0f} s")
    return seen


class _BoundedStream(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, max_bytes: int, deadline: float, max_s: float):
        self.inner, self.max_bytes, self.deadline, self.max_s = inner, max_bytes, deadline, max_s

    def __iter__(self) -> Iterator[bytes]:
        seen = 0
        for chunk in self.inner:
            seen = _counted(seen, chunk, self.max_bytes, self.deadline, self.max_s)
            yield chunk

    def close(self) -> None:
        self.inner.close()


class _AsyncBoundedStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, max_bytes: int, deadline: float, max_s: float):
        self.inner, self.max_bytes, self.deadline, self.max_s = inner, max_bytes, deadline, max_s

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self.inner:
            seen = _counted(seen, chunk, self.max_bytes, self.deadline, self.max_s)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


def bound_answers(client: httpx.Client | httpx.AsyncClient, max_bytes: int, max_s: float) -> None:
    """Read every answer `client` gets within `max_bytes` and `max_s` (counted from the request), through its own
    event hooks: the client keeps its transports (a guarded pool, or the proxies the environment names)."""
    client.headers["accept-encoding"] = "identity"
    asynchronous = isinstance(client, httpx.AsyncClient)

    def stamp(request: httpx.Request) -> None:
        request.extensions = {**request.extensions, _STARTED: time.monotonic()}

    def bound(response: httpx.Response) -> None:
        _bounded_headers(response, max_bytes)
        deadline = response.request.extensions.get(_STARTED, time.monotonic()) + max_s
        stream = _AsyncBoundedStream if asynchronous else _BoundedStream
        response.stream = stream(response.stream, max_bytes, deadline, max_s)  # type: ignore[arg-type]

    async def stamp_async(request: httpx.Request) -> None:
        stamp(request)

    async def bound_async(response: httpx.Response) -> None:
        bound(response)

    hooks = client.event_hooks
    hooks["request"] = [*hooks.get("request", []), stamp_async if asynchronous else stamp]
    hooks["response"] = [*hooks.get("response", []), bound_async if asynchronous else bound]
    client.event_hooks = hooks
