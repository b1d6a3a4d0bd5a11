"""What every model adapter shares: the turn it returns, interruption, retries and secret scrubbing."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent import events as ev

# Long generations (32k tokens of reasoning) can take many minutes before the last byte.
REQUEST_TIMEOUT_S = 900.0
RETRY_ATTEMPTS = 5  # one request and four retries after a 429, a 5xx or a dropped connection
RETRY_BASE_S = 2.0
RETRY_CAP_S = 60.0
# A turn cut off mid-thought hands this much of its reasoning tail back to the model as notes.
NOTES_CHARS = 8000
# Chat providers that ignore max_tokens are cut by characters: about 5 characters per token.
CHARS_PER_TOKEN = 5


_HTTP_CLIENTS: dict[str, Any] = {}
_HTTP_LOCK = threading.Lock()


def shared_http_client(sdk: str) -> Any:
    """One HTTP client per SDK for the whole process, shared by every episode.

    Building a client loads the CA bundle (about 20 ms of CPU); with dozens of episodes in flight that is worth
    doing once. The SDKs' clients are thread-safe and take their timeouts per request.
    """
    with _HTTP_LOCK:
        client = _HTTP_CLIENTS.get(sdk)
        if client is None:
            if sdk == "anthropic":
                import anthropic

                client = anthropic.DefaultHttpxClient()
            else:
                import openai

                client = openai.DefaultHttpxClient()
            _HTTP_CLIENTS[sdk] = client
        return client


@dataclass(slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # the raw JSON text the model produced; it may not parse

    def parsed(self) -> tuple[dict | None, str | None]:
        """The arguments as a dict, or the reason they can't be sent to the server."""
        try:
            value = json.loads(self.arguments or "{}")
        except (json.JSONDecodeError, RecursionError) as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            return None, f"the tool-call arguments are not valid JSON ({reason}); send one JSON object"
        if not isinstance(value, dict):
            return None, "the tool-call arguments must be a JSON object, e.g. {\"plan\": [...]}"
        return value, None


@dataclass(slots=True)
class ModelTurn:
    text: str = ""
    reasoning: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    stop: str = ""  # the provider's own stop reason, as it said it
    usage: dict = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0})
    cut_off: bool = False  # the turn ran out of output tokens (or hit the harness character cap)


TurnStream = Generator[ev.Event, None, ModelTurn]


class Provider(Protocol):
    """A model behind an API, holding that API's own conversation history."""

    provider_switches: list[str]

    def add_user(self, text: str) -> None: ...
    def add_notes(self, text: str) -> None: ...
    def add_tool_results(self, results: list[tuple[ToolCall, str]]) -> None: ...
    def stream_turn(self, turn: int, interrupt: Interrupt) -> TurnStream: ...


class Interrupted(Exception):
    """The episode was stopped by its user or ran out of wall-clock time."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Interrupt:
    """Ends an episode from outside: a user's Stop or the wall clock.

    A blocked read of a provider stream can't poll, so the watcher thread also closes whatever stream is open.
    """

    def __init__(self, stop: threading.Event | None, wall_clock_s: float):
        self._stop = stop or threading.Event()
        self.deadline = time.monotonic() + wall_clock_s
        self.reason: str | None = None
        self._closers: list[Callable[[], Any]] = []
        self._lock = threading.Lock()
        self._finished = threading.Event()
        threading.Thread(target=self._watch, name="episode-interrupt", daemon=True).start()

    def _watch(self) -> None:
        while not self._finished.is_set():
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                self.trigger("wall_clock")
                return
            if self._stop.wait(timeout=min(remaining, 0.25)):
                self.trigger("stopped")
                return

    def trigger(self, reason: str) -> None:
        with self._lock:
            if self.reason is None:
                self.reason = reason
            closers = list(self._closers)
        for close in closers:
            # The stream may already be closed; the reader sees the interruption anyway.
            with suppress(Exception):
                close()

    def check(self) -> None:
        if self.reason is None:
            if self._stop.is_set():
                self.trigger("stopped")
            elif time.monotonic() >= self.deadline:
                self.trigger("wall_clock")
        if self.reason is not None:
            raise Interrupted(self.reason)

    def sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while True:
            self.check()
            left = end - time.monotonic()
            if left <= 0:
                return
            self._stop.wait(timeout=min(left, 0.25))

    @contextmanager
    def closing(self, close: Callable[[], Any]) -> Iterator[None]:
        """While inside, a Stop or the wall clock closes the open stream at once."""
        with self._lock:
            self._closers.append(close)
        try:
            if self.reason is not None:
                close()
            yield
        finally:
            with self._lock:
                self._closers.remove(close)

    def finish(self) -> None:
        self._finished.set()


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of an SDK error (anthropic and openai share the shape), or None for transport errors."""
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def is_retryable(exc: BaseException) -> bool:
    """429, 5xx (Anthropic's 529 overloaded included) and dropped or refused connections get retried."""
    status = status_of(exc)
    if status is not None:
        return status == 429 or status >= 500
    name = type(exc).__name__
    return name in ("APIConnectionError", "APITimeoutError")


def retry_delay(exc: BaseException, attempt: int, base_s: float) -> float:
    """Honour the provider's retry-after(-ms) header; otherwise back off exponentially."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    for key, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(key) if hasattr(headers, "get") else None
        if value is None:
            continue
        try:
            return min(RETRY_CAP_S, max(0.0, float(value) * scale))
        except ValueError:
            continue
    return min(RETRY_CAP_S, base_s * (2 ** attempt))


def open_with_retries(open_stream: Callable[[], Any], *, turn: int, interrupt: Interrupt, label: str,
                      base_s: float = RETRY_BASE_S,
                      attempts: int = RETRY_ATTEMPTS) -> Generator[ev.Event, None, Any]:
    """Open a provider request, retrying 429/5xx/connection failures with a visible note for each wait."""
    for attempt in range(attempts):
        interrupt.check()
        try:
            return open_stream()
        except Exception as exc:
            if not is_retryable(exc) or attempt == attempts - 1:
                raise
            wait = retry_delay(exc, attempt, base_s)
            status = status_of(exc)
            why = f"HTTP {status}" if status else type(exc).__name__
            yield ev.note(turn, "retry", f"{label} answered {why}; retrying in {wait:.1f} s "
                                         f"(attempt {attempt + 2} of {attempts})")
            interrupt.sleep(wait)
    raise AssertionError("unreachable")


def scrub(text: str, secrets: list[str]) -> str:
    """Remove every secret (an API key, a token) from a text that may reach a record, a log or a page."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    return text
