from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from typing import Any

import openai

from agent.interrupt import Interrupt
from agent.providers.base import CHARS_PER_TOKEN, ModelTurn, ProviderSetup, ToolCall, TurnStream
from agent.providers.openai_sdk import OpenAIClientAPI
from agent.spec import ModelSpec, SpecError
from rollouts import events as ev

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
HF_ROUTER_URL = "https://router.huggingface.co/v1"


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


class ChatCompletionsAPI(OpenAIClientAPI):
    """One episode's conversation with a chat-completions endpoint, with `hf:` provider fallback."""

    def __init__(self, spec: ModelSpec, setup: ProviderSetup):
        self.client = self.make_client(self.endpoint(), setup.key or "none")
        self.model = spec.model
        self.fallbacks = list(spec.fallbacks)
        self.provider_switches: list[str] = []
        self.max_tokens = setup.max_tokens
        self.extra: dict[str, Any] = {"reasoning_effort": spec.effort} if spec.effort else {}
        self.tools = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                        "parameters": t["input_schema"]}} for t in setup.tools]
        self.messages: list[dict] = [{"role": "system", "content": setup.system}]
        self._pending: list[str] = []
        self.retry_base_s = setup.retry_base_s

    @classmethod
    def endpoint(cls) -> str:
        """The OpenAI-compatible base URL requests go to."""
        raise NotImplementedError

    def should_retry(self, error: BaseException) -> bool:
        # With a fallback left, only a 429 or a dropped connection is worth waiting for: a rejected request
        # moves to the next provider instead (open_stream).
        return not self._rejected(error) and super().should_retry(error)

    def _rejected(self, error: BaseException) -> bool:
        return bool(self.fallbacks) and isinstance(error, openai.APIStatusError) and error.status_code != 429

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
    def request(self) -> Any:
        if self._pending:
            self.messages.append({"role": "user", "content": "\n\n".join(self._pending)})
            self._pending = []
        return self.client.chat.completions.create(
            model=self.model, messages=self.messages, tools=self.tools, max_tokens=self.max_tokens,
            stream=True, stream_options={"include_usage": True}, **self.extra)

    def open_stream(self, turn: int, interrupt: Interrupt) -> TurnStream:
        """On a request the provider rejects or fails (4xx other than 429, 5xx), move to the next provider."""
        while True:
            try:
                return (yield from super().open_stream(turn, interrupt))
            except openai.APIStatusError as exc:
                if not self._rejected(exc):
                    raise
                status = exc.status_code
                switch = f"{self.model} -> {self.fallbacks[0]} ({status}: {str(exc)[:120]})"
                self.provider_switches.append(switch)
                yield ev.note(turn, "provider_switch", f"{self.model} answered HTTP {status}; switching to "
                                                       f"{self.fallbacks[0]} for the rest of the episode")
                self.model = self.fallbacks.pop(0)

    def read_stream(self, stream: Iterable[Any], turn: int) -> TurnStream:
        result = ModelTurn()
        text: list[str] = []
        reasoning: list[str] = []
        calls: dict[int, dict] = {}
        splitter = ThinkSplitter()
        budget, seen = self.max_tokens * CHARS_PER_TOKEN, 0
        for chunk in stream:
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
        for kind, piece in splitter.flush():
            yield _route(turn, kind, piece, text, reasoning)
        result.text, result.reasoning = "".join(text), "".join(reasoning)
        result.calls = [ToolCall(c["id"] or f"call_{uuid.uuid4().hex[:8]}", c["name"], c["args"])
                        for _, c in sorted(calls.items())]
        result.cut_off = result.cut_off or result.stop.startswith("length")
        self._remember(result)
        return result

    def _remember(self, result: ModelTurn) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": result.text}
        if result.calls:
            message["tool_calls"] = [{"id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments or "{}"}}
                                     for c in result.calls]
        self.messages.append(message)


class HFRouterProvider(ChatCompletionsAPI):
    """`hf:org/model[:provider|provider2...]` through the Hugging Face router."""

    prefixes = ("hf",)
    label = "The Hugging Face router"
    key_env = "HF_TOKEN"
    key_name, key_label, key_order = "Hugging Face token", "Hugging Face token (hf:)", 3
    endpoint_env = "HF_ROUTER_URL"
    price_group = "hf"  # at the router's provider the spec names (`hf:org/model:together`)
    # `org/model`, then (spec.model and each fallback) the one router provider to try: `org/model:together`.
    model_grammar = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*(:[A-Za-z0-9][A-Za-z0-9._-]*)?")
    model_form = "<org>/<model>[:provider|provider2...], e.g. hf:Qwen/Qwen3-8B:together"

    @classmethod
    def endpoint(cls) -> str:
        return cls.endpoint_url() or HF_ROUTER_URL


class VLLMProvider(ChatCompletionsAPI):
    """`vllm:<model>` on any OpenAI-compatible server at VLLM_BASE_URL; a local one usually takes no key."""

    prefixes = ("vllm",)
    label = "The vLLM server"
    key_env = "VLLM_API_KEY"
    key_name, key_label, key_order = "vLLM server key", "vLLM server key (vllm:)", 4
    key_required = False
    endpoint_env = "VLLM_BASE_URL"  # self-hosted: no price
    model_grammar = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/+-]*")  # the server's own names: any but a route list
    model_form = "<model> as the server at VLLM_BASE_URL names it, e.g. vllm:meta-llama/Llama-3.1-8B-Instruct"

    @classmethod
    def endpoint(cls) -> str:
        return cls.endpoint_url() or ""

    @classmethod
    def check_endpoint(cls, spec: ModelSpec) -> None:
        if not cls.endpoint_url():
            raise SpecError(f"{spec.text} needs {cls.endpoint_env}, the OpenAI-compatible server to send requests to")


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
