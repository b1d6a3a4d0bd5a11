"""Anthropic Messages API, streamed, with thinking blocks (and their signatures) kept in the history.

We read the raw event stream rather than the SDK's accumulating helper: it keeps the tool input exactly as the
model wrote it (the record wants the raw text) and a malformed input becomes a local error, not a crashed stream.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import anthropic

from agent.providers.base import (
    REQUEST_TIMEOUT_S,
    ModelAPI,
    ModelTurn,
    ProviderSetup,
    ToolCall,
    TurnStream,
    shared_http_client,
)
from agent.spec import ModelSpec
from rollouts import events as ev


class AnthropicProvider(ModelAPI):
    prefixes = ("anthropic",)
    label = "Anthropic"
    key_env = "ANTHROPIC_API_KEY"
    key_name, key_order = "Anthropic API key", 1
    endpoint_env = "ANTHROPIC_BASE_URL"
    price_group = "anthropic"
    model_grammar = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
    model_form = "<model>[@low|@medium|@high], e.g. anthropic:claude-sonnet-4-5"

    def __init__(self, spec: ModelSpec, setup: ProviderSetup):
        self.client = anthropic.Anthropic(api_key=setup.key, base_url=self.endpoint_url(),
                                          max_retries=0, timeout=REQUEST_TIMEOUT_S,
                                          http_client=shared_http_client("anthropic", anthropic.DefaultHttpxClient))
        self.model, self.system, self.max_tokens = spec.model, setup.system, setup.max_tokens
        effort = spec.effort
        self.extra: dict[str, Any] = {"extra_body": {"output_config": {"effort": effort}}} if effort else {}
        self.tools = [{"name": t["name"], "description": t["description"], "input_schema": t["input_schema"]}
                      for t in setup.tools]
        self.messages: list[dict] = []
        self._pending: list[dict] = []
        self.provider_switches: list[str] = []
        self.retry_base_s = setup.retry_base_s

    def should_retry(self, error: BaseException) -> bool:
        """429, 5xx (529 overloaded included), and a refused, dropped or timed-out connection."""
        if isinstance(error, anthropic.APIStatusError):
            return error.status_code == 429 or error.status_code >= 500
        return isinstance(error, anthropic.APIConnectionError | anthropic.APITimeoutError)

    # -- history -----------------------------------------------------------------------------------------------
    def add_user(self, text: str) -> None:
        self._pending.append({"type": "text", "text": text})

    def add_notes(self, text: str) -> None:
        self._pending.append({"type": "text", "text": f"(your notes from the turn that was cut off)\n{text}"})

    def add_tool_results(self, results: list[tuple[ToolCall, str]]) -> None:
        # Tool results must come first in the user message that answers the tool calls.
        blocks = [{"type": "tool_result", "tool_use_id": call.id, "content": [{"type": "text", "text": text}]}
                  for call, text in results]
        self._pending = blocks + self._pending

    # -- one turn ----------------------------------------------------------------------------------------------
    def request(self) -> Any:
        if self._pending:
            self.messages.append({"role": "user", "content": self._pending})
            self._pending = []
        return self.client.messages.create(model=self.model, system=self.system, messages=self.messages,
                                           tools=self.tools, max_tokens=self.max_tokens, stream=True,
                                           **self.extra)

    def read_stream(self, stream: Iterable[Any], turn: int) -> TurnStream:
        result = ModelTurn()
        blocks: dict[int, dict] = {}
        tool_input: dict[int, str] = {}
        input_tokens = output_tokens = 0
        for event in stream:
            kind = event.type
            if kind == "message_start":
                usage = event.message.usage
                input_tokens = ((usage.input_tokens or 0) + (usage.cache_read_input_tokens or 0)
                                + (usage.cache_creation_input_tokens or 0))
                output_tokens = usage.output_tokens or 0
            elif kind == "content_block_start":
                blocks[event.index] = event.content_block.model_dump(exclude_none=True)
                if event.content_block.type == "tool_use":
                    tool_input[event.index] = ""
            elif kind == "content_block_delta":
                delta_event = _apply_delta(turn, event.index, event.delta, blocks, tool_input)
                if delta_event is not None:
                    yield delta_event
            elif kind == "message_delta":
                result.stop = event.delta.stop_reason or result.stop
                if event.usage and event.usage.output_tokens is not None:
                    output_tokens = event.usage.output_tokens
        result.usage = {"input_tokens": input_tokens, "output_tokens": output_tokens}
        result.cut_off = result.stop == "max_tokens"
        self._finish(result, blocks, tool_input)
        return result

    def _finish(self, result: ModelTurn, blocks: dict[int, dict], tool_input: dict[int, str]) -> None:
        """Fill the turn from its content blocks and keep the whole assistant message for the next turn."""
        content = []
        for index in sorted(blocks):
            block = blocks[index]
            if block["type"] == "text":
                result.text += block.get("text", "")
            elif block["type"] == "thinking":
                result.reasoning += block.get("thinking", "")
            elif block["type"] == "tool_use":
                raw = tool_input.get(index, "") or "{}"
                result.calls.append(ToolCall(block["id"], block["name"], raw))
                parsed, _ = result.calls[-1].parsed()
                block["input"] = parsed or {}
            content.append(block)
        # The whole assistant message goes back next turn: thinking blocks must keep their signatures.
        self.messages.append({"role": "assistant", "content": content or [{"type": "text", "text": ""}]})


def _apply_delta(turn: int, index: int, delta: Any, blocks: dict[int, dict],
                 tool_input: dict[int, str]) -> ev.Event | None:
    """Grow the content block a delta belongs to; return the live event it makes, if any."""
    block = blocks.get(index)
    if block is None:
        return None
    if delta.type == "text_delta":
        block["text"] = block.get("text", "") + delta.text
        return ev.text_delta(turn, delta.text)
    if delta.type == "thinking_delta":
        block["thinking"] = block.get("thinking", "") + delta.thinking
        return ev.reasoning_delta(turn, delta.thinking)
    if delta.type == "signature_delta":
        block["signature"] = block.get("signature", "") + delta.signature
        return None
    if delta.type == "input_json_delta":
        tool_input[index] = tool_input.get(index, "") + delta.partial_json
        position = sum(1 for i, b in blocks.items() if i < index and b["type"] == "tool_use")
        return ev.tool_args_delta(turn, position, block.get("id", ""), block.get("name", ""), delta.partial_json)
    return None
