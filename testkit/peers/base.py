"""The HTTP machinery every protocol peer shares: a loopback server in a daemon thread, a record of every
request, JSON and SSE replies over HTTP/1.1, scripted connection drops, and a clean stop.

Streams use chunked transfer encoding, as the providers do, so a connection dropped mid-stream is a
transport error for the client (an incomplete chunked body), not a quiet end of the body.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import urlsplit

from .script import DieAfter, Entry, Error, Script, ScriptExhausted, ScriptQueue, StreamError, Turn

# An endless turn stops by itself after this many characters, so a client that never closes cannot wedge a test.
ENDLESS_LIMIT_CHARS = 200_000


@dataclass
class RecordedRequest:
    """One request as the peer saw it, and what became of its reply."""

    method: str
    path: str
    query: str
    headers: dict[str, str]  # lower-case names
    raw: bytes
    body: Any  # the parsed JSON body, None when empty or not JSON
    entry: Entry | None = None  # the script entry that answered it
    status: int | None = None
    events_sent: int = 0  # SSE events written
    chars_sent: int = 0  # characters of text/reasoning/argument deltas written
    delta_sent_at: list[float] = field(default_factory=list)  # time.time() as each delta event left
    client_closed: bool = False  # the client went away before the reply was complete
    dropped: bool = False  # the peer dropped the connection (DieAfter, an endless stream cut, peer.stop())
    finished: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    def wait(self, timeout: float = 5.0) -> bool:
        """Wait until the peer is done replying (the reply ended, failed or was dropped)."""
        return self.finished.wait(timeout)


@dataclass
class JSONReply:
    status: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass
class SSE:
    """One server-sent event. `delta` marks events that carry model output (delayed by Turn.delay);
    `chars` is how many characters of output it carries."""

    data: str
    event: str | None = None
    delta: bool = False
    chars: int = 0

    def encode(self) -> bytes:
        head = f"event: {self.event}\n" if self.event else ""
        return f"{head}data: {self.data}\n\n".encode()


@dataclass
class StreamReply:
    events: Iterable[SSE]
    delay: float = 0.0
    die_after: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass
class DropConnection:
    """Close the connection without answering."""


Reply = JSONReply | StreamReply | DropConnection


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, peer: Peer, host: str) -> None:
        self.peer = peer
        super().__init__((host, 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that resets an idle keep-alive connection is normal; anything else is a peer bug to report
        exc = sys.exc_info()[1]
        if not isinstance(exc, ConnectionError | TimeoutError):
            self.peer.problems.append(f"connection from {client_address}: {type(exc).__name__}: {exc}")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, chunked streams
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.peer._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.peer._track(self.connection, add=False)

    def do_POST(self) -> None:
        self.server.peer._serve(self)

    do_GET = do_PUT = do_DELETE = do_PATCH = do_POST

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean; everything is in peer.requests


class Peer:
    """A protocol peer: subclasses answer `respond(record)`; this class owns the server and the record.

    `with Peer(...) as peer:` or `peer = Peer(...).start()` ... `peer.stop()`.
    """

    request_id_header = "x-request-id"

    def __init__(self, script: Script | None = None, *, api_key: str | None = None, validate: bool = True,
                 host: str = "127.0.0.1") -> None:
        self.script = ScriptQueue(script)
        self.api_key = api_key
        self.validate = validate
        self.requests: list[RecordedRequest] = []
        self.problems: list[str] = []  # misuse of the peer itself (script exhausted, unrepresentable turn)
        self._host = host
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._counter = itertools.count(1)

    # lifecycle

    def start(self) -> Self:
        if self._server is None:
            self._stopping.clear()
            self._server = _Server(self, self._host)
            self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                            name=f"{type(self).__name__}-server", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None:
            return
        self._stopping.set()  # ends delays and endless streams
        server.shutdown()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:  # idle keep-alive connections would otherwise linger in their threads
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """http://127.0.0.1:PORT (no path; the OpenAI SDKs want url + "/v1")."""
        if self._server is None:
            raise RuntimeError("the peer is not running; use `with peer:` or peer.start()")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # script

    def push(self, *entries: Any) -> None:
        """Append entries to the script."""
        self.script.push(*entries)

    @property
    def remaining(self) -> int:
        """Scripted entries not yet consumed."""
        return self.script.remaining

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies of every request so far, in order."""
        with self._lock:
            return [r.body for r in self.requests]

    def new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._counter):04d}"

    # to implement

    def respond(self, record: RecordedRequest) -> Reply:
        raise NotImplementedError

    def error_body(self, status: int, message: str, error_type: str | None = None) -> Any:
        """The protocol's error JSON."""
        raise NotImplementedError

    # helpers for subclasses

    def error_reply(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONReply:
        return JSONReply(status, self.error_body(status, message), headers or {})

    def scripted_error(self, entry: Error) -> JSONReply:
        body = entry.body if entry.body is not None else self.error_body(entry.status, entry.message, entry.error_type)
        return JSONReply(entry.status, body, entry.headers)

    def misuse(self, record: RecordedRequest, problem: str) -> JSONReply:
        """The test used the peer wrongly: note it in `problems`, answer a 400 the SDKs do not retry."""
        self.problems.append(f"{record.method} {record.path}: {problem}")
        return self.error_reply(400, f"protocol peer: {problem}", {"x-should-retry": "false"})

    def next_entry(self, record: RecordedRequest, queue: ScriptQueue | None = None) -> Entry | JSONReply:
        """The script entry for this request, or the misuse reply when the script ran out."""
        try:
            entry = (queue or self.script).next(record.body)
        except ScriptExhausted as exc:
            return self.misuse(record, str(exc))
        record.entry = entry
        return entry

    def play(self, record: RecordedRequest, entry: Entry | JSONReply) -> Reply:
        """Answer with a script entry: as JSON or as a stream, whichever the request asked for."""
        if isinstance(entry, JSONReply):
            return entry
        if isinstance(entry, Error):
            return self.scripted_error(entry)
        turn, die_after, error_after, message = entry, None, None, ""
        if isinstance(entry, DieAfter):
            turn, die_after = entry.turn, entry.events
        elif isinstance(entry, StreamError):
            turn, error_after, message = entry.turn, entry.events, entry.message
        body = record.body
        if not body.get("stream"):
            if die_after is not None:
                return DropConnection()
            try:
                return JSONReply(200, self.json_reply(body, turn))
            except ValueError as exc:  # a turn this protocol cannot carry in a JSON reply
                return self.misuse(record, str(exc))
        return StreamReply(self.events(body, turn, error_after, message), delay=turn.delay, die_after=die_after)

    def json_reply(self, body: dict, turn: Turn) -> Any:
        """The non-streamed reply body for a turn."""
        raise NotImplementedError

    def events(self, body: dict, turn: Turn, error_after: int | None, error_message: str) -> Iterator[SSE]:
        """The SSE events for a turn; after `error_after` events (a StreamError) the protocol's error event."""
        raise NotImplementedError

    def bearer_ok(self, record: RecordedRequest) -> bool:
        if self.api_key is None:
            return True
        return record.headers.get("authorization", "") == f"Bearer {self.api_key}"

    # serving

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            (self._connections.add if add else self._connections.discard)(conn)

    def _serve(self, handler: _Handler) -> None:
        split = urlsplit(handler.path)
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        record = RecordedRequest(method=handler.command, path=split.path, query=split.query,
                                 headers={k.lower(): v for k, v in handler.headers.items()}, raw=raw, body=body)
        with self._lock:
            self.requests.append(record)
        try:
            try:
                reply = self.respond(record)
            except Exception as exc:  # a bug in a peer or a test's responder: say so loudly, never hang the client
                self.problems.append(f"{record.method} {record.path}: {type(exc).__name__}: {exc}")
                reply = self.error_reply(500, f"protocol peer crashed: {type(exc).__name__}: {exc}",
                                         {"x-should-retry": "false"})
            if isinstance(reply, DropConnection):
                record.dropped = True
                self._drop(handler)
            elif isinstance(reply, JSONReply):
                self._send_json(handler, record, reply)
            else:
                self._send_stream(handler, record, reply)
        finally:
            record.finished.set()

    def _headers(self, handler: _Handler, extra: Mapping[str, str]) -> None:
        handler.send_header(self.request_id_header, self.new_id("req_peer"))
        for name, value in extra.items():
            handler.send_header(name, value)

    def _send_json(self, handler: _Handler, record: RecordedRequest, reply: JSONReply) -> None:
        data = json.dumps(reply.body).encode()
        record.status = reply.status
        try:
            handler.send_response(reply.status)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(data)))
            self._headers(handler, reply.headers)
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            record.client_closed = True
            handler.close_connection = True

    def _send_stream(self, handler: _Handler, record: RecordedRequest, reply: StreamReply) -> None:
        record.status = 200
        events: Iterator[SSE] = iter(reply.events)
        try:
            handler.send_response(200)
            handler.send_header("content-type", "text/event-stream; charset=utf-8")
            handler.send_header("cache-control", "no-cache")
            handler.send_header("transfer-encoding", "chunked")
            self._headers(handler, reply.headers)
            handler.end_headers()
            for event in events:
                if reply.die_after is not None and record.events_sent >= reply.die_after:
                    record.dropped = True
                    self._drop(handler)
                    return
                if event.delta and reply.delay:
                    self._stopping.wait(reply.delay)  # a stop ends the pause at once
                if self._stopping.is_set() or record.chars_sent > ENDLESS_LIMIT_CHARS:
                    # a stream cut by the peer before its end: it never finished, so do not pretend it did
                    record.dropped = True
                    self._drop(handler)
                    return
                data = event.encode()
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                record.events_sent += 1
                record.chars_sent += event.chars
                if event.delta:
                    record.delta_sent_at.append(time.time())
            # every event went out, so the stream is whole even when the peer stops meanwhile (a test that
            # leaves its `with` as soon as the client saw the last event must not find it "dropped")
            handler.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            record.client_closed = True
            handler.close_connection = True
        except Exception as exc:  # a bug while building events: end the stream broken, and say why
            self.problems.append(f"{record.method} {record.path}: {type(exc).__name__}: {exc}")
            record.dropped = True
            self._drop(handler)
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()

    @staticmethod
    def _drop(handler: _Handler) -> None:
        handler.close_connection = True
        with contextlib.suppress(OSError):
            handler.connection.shutdown(socket.SHUT_RDWR)


def json_event(payload: Mapping[str, Any], *, event: str | None = None, delta: bool = False, chars: int = 0) -> SSE:
    return SSE(json.dumps(payload, separators=(",", ":")), event=event, delta=delta, chars=chars)


def fail_after(events: Iterator[SSE], after: int | None, failure: Callable[[], SSE]) -> Iterator[SSE]:
    """The events; or, for a StreamError, only the first `after` of them and then the protocol's error event."""
    if after is None:
        yield from events
        return
    yield from itertools.islice(events, after)
    yield failure()
