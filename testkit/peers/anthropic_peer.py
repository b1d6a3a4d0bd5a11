"""A protocol peer for the Anthropic Messages API: POST /v1/messages, streamed (SSE) or JSON.

Wire format (public Messages streaming reference): message_start (the message with empty content and the
input usage), ping, then per content block content_block_start / content_block_delta (thinking_delta +
signature_delta, text_delta, input_json_delta) / content_block_stop, then message_delta (stop_reason and the
cumulative output_tokens) and message_stop. Errors are {"type": "error", "error": {"type", "message"}}.

Like the real API it rejects a few requests an agent loop gets wrong: a tool_use without a tool_result in the
next message (and the reverse), a thinking block sent back with a changed signature, max_tokens not above the
thinking budget.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from typing import Any

from .base import Peer, RecordedRequest, Reply, fail_after, json_event
from .script import Script, Text, Thinking, ToolCall, Turn, thinking_signature

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
               403: "permission_error", 404: "not_found_error", 413: "request_too_large",
               429: "rate_limit_error", 500: "api_error", 504: "timeout_error", 529: "overloaded_error"}


def error_json(status: int, message: str, error_type: str | None = None) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type or ERROR_TYPES.get(status, "api_error"), "message": message}}


class AnthropicPeer(Peer):
    """AnthropicPeer(script, *, api_key=None, validate=True); point anthropic.Anthropic(base_url=peer.url) at it."""

    request_id_header = "request-id"

    def __init__(self, script: Script | None = None, **options: Any) -> None:
        super().__init__(script, **options)
        self.signed: set[tuple[str, str]] = set()  # (thinking, signature) pairs handed out, verified when sent back

    def respond(self, record: RecordedRequest) -> Reply:
        if record.method != "POST" or record.path != "/v1/messages":
            return self.error_reply(404, f"Not found: {record.method} {record.path}")
        if not self.key_ok(record):
            return self.error_reply(401, "invalid x-api-key")
        body = record.body
        if not isinstance(body, dict):
            return self.error_reply(400, "The request body is not valid JSON.")
        if self.validate and (problem := request_problem(body, self.signed)):
            return self.error_reply(400, problem)
        return self.play(record, self.next_entry(record))

    def key_ok(self, record: RecordedRequest) -> bool:
        # the API takes the key as x-api-key; SDK 2.x sends it as a bearer token
        return self.api_key is None or record.headers.get("x-api-key") == self.api_key or self.bearer_ok(record)

    def error_body(self, status: int, message: str, error_type: str | None = None) -> dict[str, Any]:
        return error_json(status, message, error_type)

    # building replies

    def json_reply(self, body: dict, turn: Turn) -> dict[str, Any]:
        return self.message(body, turn, final=True)

    def message(self, body: dict, turn: Turn, *, final: bool) -> dict[str, Any]:
        usage = turn.usage
        message: dict[str, Any] = {
            "id": self.new_id("msg_peer"), "type": "message", "role": "assistant", "model": body.get("model"),
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": usage.input_tokens, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": usage.cache_read_input_tokens,
                      "output_tokens": turn.output_tokens() if final else 1},
        }
        if final:
            message["content"] = [self.block(part, complete=True) for part in turn.parts]
            message["stop_reason"] = turn.stop
        return message

    def signature(self, part: Thinking) -> str:
        signature = part.signature or thinking_signature(part.text)
        self.signed.add((part.text, signature))
        return signature

    def block(self, part: Thinking | Text | ToolCall, *, complete: bool) -> dict[str, Any]:
        if isinstance(part, Thinking):
            return {"type": "thinking", "thinking": part.text if complete else "",
                    "signature": self.signature(part) if complete else ""}
        if isinstance(part, Text):
            return {"type": "text", "text": part.text if complete else ""}
        tool_input: Any = {}
        if complete:
            try:
                tool_input = json.loads(part.arguments or "{}")
            except ValueError:
                raise ValueError(f"malformed tool input {part.arguments!r} cannot be sent in a non-streamed "
                                 "message (the API always returns parsed input); stream the request") from None
        return {"type": "tool_use", "id": part.id or self.new_id("toolu_peer"), "name": part.name,
                "input": tool_input}

    def events(self, body: dict, turn: Turn, error_after: int | None, error_message: str) -> Iterator[Any]:
        # mid-stream failures arrive as an `error` event; overloaded_error is the one the docs name
        return fail_after(self._turn_events(body, turn), error_after,
                          lambda: json_event(error_json(529, error_message, "overloaded_error"), event="error"))

    def _turn_events(self, body: dict, turn: Turn) -> Iterator[Any]:
        def ev(payload: dict[str, Any], **kw: Any) -> Any:
            return json_event(payload, event=payload["type"], **kw)

        yield ev({"type": "message_start", "message": self.message(body, turn, final=False)})
        yield ev({"type": "ping"})
        last = len(turn.parts) - 1
        for index, part in enumerate(turn.parts):
            endless = turn.endless and index == last
            block = self.block(part, complete=False)
            yield ev({"type": "content_block_start", "index": index, "content_block": block})
            if isinstance(part, Thinking):
                for piece in turn.pieces(part.text, endless=endless):
                    yield ev({"type": "content_block_delta", "index": index,
                              "delta": {"type": "thinking_delta", "thinking": piece}}, delta=True, chars=len(piece))
                yield ev({"type": "content_block_delta", "index": index,
                          "delta": {"type": "signature_delta", "signature": self.signature(part)}})
            elif isinstance(part, Text):
                for piece in turn.pieces(part.text, endless=endless):
                    yield ev({"type": "content_block_delta", "index": index,
                              "delta": {"type": "text_delta", "text": piece}}, delta=True, chars=len(piece))
            else:
                for piece in turn.pieces(part.arguments):
                    yield ev({"type": "content_block_delta", "index": index,
                              "delta": {"type": "input_json_delta", "partial_json": piece}},
                             delta=True, chars=len(piece))
            yield ev({"type": "content_block_stop", "index": index})
        yield ev({"type": "message_delta", "delta": {"stop_reason": turn.stop, "stop_sequence": None},
                  "usage": {"output_tokens": turn.output_tokens()}})
        yield ev({"type": "message_stop"})


def request_problem(body: dict, signed: Collection[tuple[str, str]] = ()) -> str | None:
    """The 400 message the API would give this request, or None. `signed`: extra valid (thinking, signature)."""
    for name in ("model", "max_tokens", "messages"):
        if name not in body:
            return f"{name}: Field required"
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    thinking = body.get("thinking") or {}
    if thinking.get("type") == "enabled" and int(thinking.get("budget_tokens", 0)) >= int(body["max_tokens"]):
        return "`max_tokens` must be greater than `thinking.budget_tokens`"
    for i, message in enumerate(messages):
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        if message.get("role") == "assistant":
            for block in blocks:
                pair = (block.get("thinking", ""), block.get("signature"))
                if block.get("type") == "thinking" and pair[1] != thinking_signature(pair[0]) and pair not in signed:
                    return f"messages.{i}.content: Invalid `signature` in `thinking` block"
            used = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
            if used:
                after = messages[i + 1] if i + 1 < len(messages) else {}
                after_blocks = after.get("content") if isinstance(after.get("content"), list) else []
                answered = {b.get("tool_use_id") for b in after_blocks if b.get("type") == "tool_result"}
                missing = [u for u in used if u not in answered]
                if after.get("role") != "user" or missing:
                    return (f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks immediately "
                            f"after: {', '.join(missing or used)}. Each `tool_use` block must have a matching "
                            "`tool_result` block in the next message.")
        elif message.get("role") == "user":
            results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
            if results:
                before = messages[i - 1] if i > 0 else {}
                before_blocks = before.get("content") if isinstance(before.get("content"), list) else []
                used = {b.get("id") for b in before_blocks if b.get("type") == "tool_use"}
                unknown = [r for r in results if r not in used]
                if before.get("role") != "assistant" or unknown:
                    return (f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: "
                            f"{', '.join(unknown or results)}. Each `tool_result` block must have a matching "
                            "`tool_use` block in the previous message.")
    return None
