"""OpenAI-compatible chat completions, streamed: the Hugging Face router (`hf:`) and any vLLM-style server (`vllm:`).

Streaming matters twice here: the live view gets every token, and long generations behind the HF router stall
without it. Reasoning arrives as `reasoning_content`, as `reasoning`, or inline between `<think>` tags.
"""

from __future__ import annotations

import uuid
from typing import Any

import openai

from agent import events as ev
from agent.providers.base import (
    CHARS_PER_TOKEN,
    REQUEST_TIMEOUT_S,
    Interrupt,
    ModelTurn,
    ToolCall,
    TurnStream,
    open_with_retries,
    shared_http_client,
    status_of,
)

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


class ThinkSplitter:
    """Routes streamed content between `<think>` and `</think>` to reasoning, even when a tag spans chunks."""

    def __init__(self) -> None:
        self.thinking = False
        self._held = ""  # a possible partial tag at the end of the last chunk

    def feed(self, chunk: str) -> list[tuple[str, str]]:
        """Split a content chunk into ("text" | "reasoning", piece) parts, in order."""
        data, self._held = self._held + chunk, ""
        parts: list[tuple[str, str]] = []
        while data:
            tag = THINK_CLOSE if self.thinking else THINK_OPEN
            kind = "reasoning" if self.thinking else "text"
            at = data.find(tag)
            if at >= 0:
                if at:
                    parts.append((kind, data[:at]))
                data = data[at + len(tag):]
                self.thinking = not self.thinking
                continue
            keep = _partial_suffix(data, tag)
            if len(data) > keep:
                parts.append((kind, data[: len(data) - keep]))
            self._held = data[len(data) - keep:] if keep else ""
            break
        return parts

    def flush(self) -> list[tuple[str, str]]:
        held, self._held = self._held, ""
        return [("reasoning" if self.thinking else "text", held)] if held else []


def _partial_suffix(data: str, tag: str) -> int:
    """Length of the longest suffix of `data` that is a proper prefix of `tag`."""
    for size in range(min(len(tag) - 1, len(data)), 0, -1):
        if data.endswith(tag[:size]):
            return size
    return 0


class ChatProvider:
    """One episode's conversation with a chat-completions endpoint, with `hf:` provider fallback."""

    def __init__(self, *, model: str, fallbacks: tuple[str, ...] = (), base_url: str, api_key: str,
                 system: str, tools: list[dict], max_tokens: int, effort: str | None = None,
                 label: str = "the model provider", retry_base_s: float | None = None):
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key or "none", max_retries=0,
                                    timeout=REQUEST_TIMEOUT_S, http_client=shared_http_client("openai"))
        self.model = model
        self.fallbacks = list(fallbacks)
        self.provider_switches: list[str] = []
        self.max_tokens = max_tokens
        self.extra: dict[str, Any] = {"reasoning_effort": effort} if effort else {}
        self.tools = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                        "parameters": t["input_schema"]}} for t in tools]
        self.messages: list[dict] = [{"role": "system", "content": system}]
        self._pending: list[str] = []
        self.label = label
        self.retry_base_s = retry_base_s

    # -- history -------------------------------------------------------------------------------------------
    def add_user(self, text: str) -> None:
        self._pending.append(text)

    def add_notes(self, text: str) -> None:
        last = self.messages[-1]
        if last["role"] == "assistant" and not last.get("content") and not last.get("tool_calls"):
            # The cut-off turn left an empty assistant message: its notes become what it said.
            last["content"] = f"(my notes so far, cut off by the output limit)\n{text}"
        else:
            self._pending.append(f"(your notes from the turn that was cut off)\n{text}")

    def add_tool_results(self, results: list[tuple[ToolCall, str]]) -> None:
        for call, text in results:
            self.messages.append({"role": "tool", "tool_call_id": call.id, "content": text})

    # -- one turn ------------------------------------------------------------------------------------------
    def _open(self) -> Any:
        return self.client.chat.completions.create(
            model=self.model, messages=self.messages, tools=self.tools, max_tokens=self.max_tokens,
            stream=True, stream_options={"include_usage": True}, **self.extra)

    def _open_with_fallback(self, turn: int, interrupt: Interrupt) -> TurnStream:
        """On a request the provider rejects or fails (4xx other than 429, 5xx), move to the next provider."""
        while True:
            kwargs = {"base_s": self.retry_base_s} if self.retry_base_s is not None else {}
            try:
                if self.fallbacks:
                    # With a fallback left, only a 429 or a dropped connection is worth waiting for.
                    return (yield from open_with_retries(self._open_unless_rejected, turn=turn,
                                                         interrupt=interrupt, label=self.label, **kwargs))
                return (yield from open_with_retries(self._open, turn=turn, interrupt=interrupt,
                                                     label=self.label, **kwargs))
            except _Rejected as rejected:
                exc = rejected.exc
                status = status_of(exc)
                switch = f"{self.model} -> {self.fallbacks[0]} ({status}: {str(exc)[:120]})"
                self.provider_switches.append(switch)
                yield ev.note(turn, "provider_switch", f"{self.model} answered HTTP {status}; switching to "
                                                       f"{self.fallbacks[0]} for the rest of the episode")
                self.model = self.fallbacks.pop(0)

    def _open_unless_rejected(self) -> Any:
        try:
            return self._open()
        except openai.APIStatusError as exc:
            if exc.status_code != 429:
                raise _Rejected(exc) from exc
            raise

    def stream_turn(self, turn: int, interrupt: Interrupt) -> TurnStream:
        if self._pending:
            self.messages.append({"role": "user", "content": "\n\n".join(self._pending)})
            self._pending = []
        stream = yield from self._open_with_fallback(turn, interrupt)
        result = ModelTurn()
        text: list[str] = []
        reasoning: list[str] = []
        calls: dict[int, dict] = {}
        splitter = ThinkSplitter()
        budget, seen = self.max_tokens * CHARS_PER_TOKEN, 0
        with interrupt.closing(stream.close):
            try:
                for chunk in stream:
                    interrupt.check()
                    if seen > budget:
                        result.stop, result.cut_off = "length (harness cap)", True
                        break
                    if chunk.usage:
                        result.usage = {"input_tokens": chunk.usage.prompt_tokens or 0,
                                        "output_tokens": chunk.usage.completion_tokens or 0}
                    if not chunk.choices:
                        continue
                    choice = chunk.choices[0]
                    if choice.finish_reason:
                        result.stop = choice.finish_reason
                    delta = choice.delta
                    if delta is None:
                        continue
                    extra = delta.model_extra or {}
                    thought = extra.get("reasoning_content") or extra.get("reasoning")
                    if isinstance(thought, str) and thought:
                        reasoning.append(thought)
                        seen += len(thought)
                        yield ev.reasoning_delta(turn, thought)
                    if delta.content:
                        seen += len(delta.content)
                        for kind, piece in splitter.feed(delta.content):
                            yield _route(turn, kind, piece, text, reasoning)
                    for tc in delta.tool_calls or []:
                        yield _collect_call(turn, tc, calls)
            except Exception:
                interrupt.check()  # a Stop that closed the stream is an interruption, not a provider error
                raise
            finally:
                stream.close()
        for kind, piece in splitter.flush():
            yield _route(turn, kind, piece, text, reasoning)
        interrupt.check()
        result.text, result.reasoning = "".join(text), "".join(reasoning)
        result.calls = [ToolCall(c["id"] or f"call_{uuid.uuid4().hex[:8]}", c["name"], c["args"])
                        for _, c in sorted(calls.items())]
        result.cut_off = result.cut_off or result.stop.startswith("length")
        message: dict[str, Any] = {"role": "assistant", "content": result.text}
        if result.calls:
            message["tool_calls"] = [{"id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments or "{}"}}
                                     for c in result.calls]
        self.messages.append(message)
        return result


class _Rejected(Exception):
    def __init__(self, exc: openai.APIStatusError):
        super().__init__(str(exc))
        self.exc = exc


def _route(turn: int, kind: str, piece: str, text: list[str], reasoning: list[str]) -> ev.Event:
    """Keep a piece of streamed content as text or reasoning, and make its delta event."""
    if kind == "reasoning":
        reasoning.append(piece)
        return ev.reasoning_delta(turn, piece)
    text.append(piece)
    return ev.text_delta(turn, piece)


def _collect_call(turn: int, tc: Any, calls: dict[int, dict]) -> ev.Event:
    """Add a streamed tool-call fragment (id and name come first, then argument pieces) to its call."""
    call = calls.setdefault(tc.index or 0, {"id": "", "name": "", "args": ""})
    if tc.id:
        call["id"] = tc.id
    function = tc.function
    if function is not None and function.name and not call["name"]:
        call["name"] = function.name
    piece = (function.arguments if function is not None else None) or ""
    call["args"] += piece
    return ev.tool_args_delta(turn, tc.index or 0, call["id"], call["name"], piece)
