"""The scripting model shared by every protocol peer: what the fake model says, one turn per request.

A script is a list of entries consumed one per request (an entry may also be a callable that receives the
request's JSON body and returns an entry), or a single callable asked for every request. An entry is a `Turn`
(a reply the peer streams or returns as JSON, whichever the request asked for) or a failure: `Error` (an HTTP
error instead of a reply), `DieAfter` (the connection drops mid-stream), `StreamError` (the protocol's own
in-stream error event mid-stream).

The parts of a turn are protocol-neutral; each peer maps them onto its wire format (see README.md).
"""

from __future__ import annotations

import base64
import hashlib
import math
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

STOPS = ("end_turn", "tool_use", "max_tokens")
CHAT_REASONING_STYLES = ("reasoning_content", "reasoning", "think_tags")


@dataclass(frozen=True)
class Thinking:
    """Reasoning the model shows: an Anthropic thinking block, a Responses reasoning item, chat reasoning deltas."""

    text: str
    signature: str | None = None  # Anthropic only; None: thinking_signature(text), which the peer later verifies


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class ToolCall:
    """A function call. `arguments` is raw text sent as is, so a test can script malformed JSON."""

    name: str
    arguments: str = "{}"
    id: str | None = None  # None: the peer makes one (toolu_..., call_...)


Part: TypeAlias = Thinking | Text | ToolCall


@dataclass(frozen=True)
class Usage:
    """Token counts. `input_tokens` is the uncached input, as Anthropic reports it; the OpenAI peers add
    `cache_read_input_tokens` to it on the wire (their input counts include cached tokens), so one Usage means
    the same total everywhere. None for output/reasoning: estimated as 1 token per 4 characters."""

    input_tokens: int = 100
    output_tokens: int | None = None
    cache_read_input_tokens: int = 0
    reasoning_tokens: int | None = None


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


class Turn:
    """One model reply: ordered parts plus how it ends and how it is streamed.

    Turn(Thinking("..."), Text("..."), ToolCall("check_plan", '{"plan": []}'), stop=None, usage=Usage(),
         chunk=4, delay=0.0, chat_reasoning="reasoning_content", endless=False)

    - a bare str part is Text;
    - stop: "end_turn" | "tool_use" | "max_tokens"; None means "tool_use" when a ToolCall is present, else
      "end_turn";
    - chunk: characters per delta event; delay: seconds slept before each delta event;
    - chat_reasoning: how the chat peer streams Thinking: "reasoning_content" deltas, "reasoning" deltas, or
      "think_tags" (inline <think>...</think> in the content);
    - endless: the last part (Text or Thinking) repeats forever, ignoring max_tokens, until the client closes
      the stream (or the peer stops); the turn never finishes.
    """

    def __init__(self, *parts: Part | str, stop: str | None = None, usage: Usage | None = None, chunk: int = 4,
                 delay: float = 0.0, chat_reasoning: str = "reasoning_content", endless: bool = False) -> None:
        self.parts: tuple[Part, ...] = tuple(Text(p) if isinstance(p, str) else p for p in parts)
        for part in self.parts:
            if not isinstance(part, Thinking | Text | ToolCall):
                raise TypeError(f"a Turn holds Thinking, Text or ToolCall parts, not {part!r}")
        if stop is None:
            stop = "tool_use" if any(isinstance(p, ToolCall) for p in self.parts) else "end_turn"
        if stop not in STOPS:
            raise ValueError(f"stop must be one of {STOPS}, not {stop!r}")
        if chunk < 1:
            raise ValueError("chunk must be at least 1 character")
        if delay < 0:
            raise ValueError("delay must not be negative")
        if chat_reasoning not in CHAT_REASONING_STYLES:
            raise ValueError(f"chat_reasoning must be one of {CHAT_REASONING_STYLES}, not {chat_reasoning!r}")
        if endless and not (self.parts and isinstance(self.parts[-1], Text | Thinking) and self.parts[-1].text):
            raise ValueError("an endless turn needs a non-empty Text or Thinking as its last part")
        self.stop = stop
        self.usage = usage or Usage()
        self.chunk = chunk
        self.delay = delay
        self.chat_reasoning = chat_reasoning
        self.endless = endless

    def __repr__(self) -> str:
        return f"Turn({', '.join(map(repr, self.parts))}, stop={self.stop!r})"

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, Text))

    @property
    def thinking(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, Thinking))

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [p for p in self.parts if isinstance(p, ToolCall)]

    def output_tokens(self) -> int:
        if self.usage.output_tokens is not None:
            return self.usage.output_tokens
        spoken = "".join(p.text if isinstance(p, Text | Thinking) else p.name + p.arguments for p in self.parts)
        return estimate_tokens(spoken)

    def reasoning_tokens(self) -> int:
        if self.usage.reasoning_tokens is not None:
            return self.usage.reasoning_tokens
        return estimate_tokens(self.thinking)

    def pieces(self, text: str, *, endless: bool = False) -> Iterator[str]:
        """The deltas of one part's text: `chunk` characters each; forever when `endless`."""
        while True:
            for start in range(0, len(text), self.chunk):
                yield text[start:start + self.chunk]
            if not endless:
                return


@dataclass(frozen=True)
class Error:
    """An HTTP error returned instead of a reply. `body` None: the protocol's own error JSON built from
    `message` (and `error_type`, else the type the provider uses for that status)."""

    status: int
    message: str = "scripted error"
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    error_type: str | None = None


def rate_limited(retry_after_ms: int = 10) -> Error:
    """A 429 the SDKs retry after `retry_after_ms` (they read `retry-after-ms` before `retry-after`)."""
    return Error(429, "rate limited by the protocol peer",
                 headers={"retry-after-ms": str(retry_after_ms), "retry-after": str(math.ceil(retry_after_ms / 1000))})


def overloaded() -> Error:
    """Anthropic's 529 overloaded_error (the OpenAI peers send it as a plain 529 too)."""
    return Error(529, "Overloaded", error_type="overloaded_error")


@dataclass(frozen=True)
class DieAfter:
    """Stream `turn`, but drop the connection after `events` SSE events, mid-body (no terminating chunk).
    On a non-streamed request the connection drops before any response is sent."""

    events: int
    turn: Turn = field(default_factory=lambda: Turn("the stream is cut off here " * 8))


@dataclass(frozen=True)
class StreamError:
    """Stream `turn`, then after `events` SSE events send the protocol's in-stream error and end the stream:
    Anthropic `event: error` (overloaded_error), Responses `response.failed`, chat a `data: {"error": ...}` chunk."""

    events: int
    turn: Turn = field(default_factory=lambda: Turn("this answer fails part way " * 8))
    message: str = "Overloaded"


Entry: TypeAlias = Turn | Error | DieAfter | StreamError
Responder: TypeAlias = Callable[[Any], Entry]
Script: TypeAlias = Sequence[Entry | Responder] | Responder
ENTRY_TYPES = (Turn, Error, DieAfter, StreamError)


def always(entry: Entry) -> Responder:
    """A script that answers every request with the same entry, e.g. always(Error(500))."""
    return lambda _request: entry


class ScriptExhausted(Exception):
    """More requests arrived than the script has entries."""


class ScriptQueue:
    """A thread-safe script: entries consumed one per request, or one responder asked every time."""

    def __init__(self, script: Script | None = None) -> None:
        self._lock = threading.Lock()
        self._entries: deque[Entry | Responder] = deque()
        self._responder: Responder | None = None
        self.served = 0
        if script is None:
            return
        if callable(script) and not isinstance(script, ENTRY_TYPES):
            self._responder = script
        elif isinstance(script, (*ENTRY_TYPES, str, bytes)):
            raise TypeError("a script is a list of entries or a callable; wrap one entry as [entry] or always(entry)")
        else:
            self.push(*script)

    def push(self, *entries: Entry | Responder) -> None:
        for entry in entries:
            if not (isinstance(entry, ENTRY_TYPES) or callable(entry)):
                raise TypeError(f"a script entry is a Turn, Error, DieAfter, StreamError or callable, not {entry!r}")
        with self._lock:
            self._entries.extend(entries)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._entries)

    @property
    def empty(self) -> bool:
        """No entries left and no responder: the next request would exhaust it."""
        with self._lock:
            return not self._entries and self._responder is None

    def next(self, request: Any) -> Entry:
        with self._lock:
            if self._entries:
                item = self._entries.popleft()
            elif self._responder is not None:
                item = self._responder
            else:
                raise ScriptExhausted(f"script exhausted after {self.served} request(s)")
            self.served += 1
        entry = item if isinstance(item, ENTRY_TYPES) else item(request)
        if not isinstance(entry, ENTRY_TYPES):
            raise TypeError(f"a script callable must return a Turn, Error, DieAfter or StreamError, not {entry!r}")
        return entry


# Opaque tokens the peers hand out and later verify, so a test can tell whether the agent sent back exactly
# what it was given (Anthropic thinking signatures, Responses encrypted reasoning).

def thinking_signature(text: str) -> str:
    digest = hashlib.sha256(b"peer-thinking\0" + text.encode()).digest()
    return base64.b64encode(digest * 2).decode()


_ENCRYPTED_PREFIX = "peerenc:"


def encrypted_reasoning(text: str) -> str:
    return base64.b64encode((_ENCRYPTED_PREFIX + text).encode()).decode()


def decrypt_reasoning(blob: str) -> str | None:
    """The reasoning text behind an encrypted_reasoning() blob, or None when it is not one."""
    try:
        plain = base64.b64decode(blob.encode(), validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    return plain[len(_ENCRYPTED_PREFIX):] if plain.startswith(_ENCRYPTED_PREFIX) else None
