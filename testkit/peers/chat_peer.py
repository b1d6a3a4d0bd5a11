"""A protocol peer for OpenAI-compatible chat completions (the HF router, vLLM): POST /v1/chat/completions.

Streamed chunks are `data: {chat.completion.chunk}` lines ending with `data: [DONE]`: the first delta carries
the role, then content / reasoning / tool_calls deltas (a tool call's first fragment has index, id, type and
function.name; later fragments only index and function.arguments), then a chunk with finish_reason (stop,
tool_calls, length) and, only when stream_options.include_usage, a last chunk with empty choices and the usage.

Reasoning is streamed the way the turn asks: `reasoning_content` deltas (vLLM, DeepSeek), `reasoning` deltas
(the HF router, OpenRouter) or inline <think>...</think> in the content.

`models` maps a requested model string to its own script, so `hf:` provider fallback can be tested:
ChatPeer(models={"org/m:provA": always(Error(500)), "org/m:provB": [Turn(...)]}). A model not in `models` plays
the main script; when the main script is empty it gets a 404 model_not_found, as a router answers an unknown
model.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

from .base import (
    SSE,
    JSONReply,
    Peer,
    RecordedRequest,
    Reply,
    fail_after,
    json_event,
)
from .openai_responses_peer import error_json
from .script import Script, ScriptQueue, Text, Thinking, Turn

FINISH_REASONS = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


class ChatPeer(Peer):
    """ChatPeer(script=None, *, models=None, api_key=None, validate=True);
    point openai.OpenAI(base_url=peer.url + "/v1") at it."""

    def __init__(self, script: Script | None = None, *, models: Mapping[str, Script] | None = None,
                 **options: Any) -> None:
        super().__init__(script, **options)
        self.models = {name: ScriptQueue(s) for name, s in (models or {}).items()}

    def push_model(self, model: str, *entries: Any) -> None:
        """Append entries to one model's script (creating it)."""
        self.models.setdefault(model, ScriptQueue()).push(*entries)

    def respond(self, record: RecordedRequest) -> Reply:
        if record.method != "POST" or record.path != "/v1/chat/completions":
            return self.error_reply(404, f"Invalid URL ({record.method} {record.path})")
        if not self.bearer_ok(record):
            return self.error_reply(401, "Invalid credentials in Authorization header")
        body = record.body
        if not isinstance(body, dict):
            return self.error_reply(400, "We could not parse the JSON body of your request.")
        if self.validate and (problem := request_problem(body)):
            return self.error_reply(400, problem)
        model = body.get("model")
        queue = self.models.get(model) if isinstance(model, str) else None
        if queue is None and self.models and self.script.empty:
            return JSONReply(404, error_json(404, f"The model `{model}` does not exist or is not served here.",
                                             code="model_not_found"))
        return self.play(record, self.next_entry(record, queue))

    def error_body(self, status: int, message: str, error_type: str | None = None) -> dict[str, Any]:
        return error_json(status, message, error_type)

    @staticmethod
    def usage(turn: Turn) -> dict[str, Any]:
        cached = turn.usage.cache_read_input_tokens
        prompt = turn.usage.input_tokens + cached
        completion = turn.output_tokens()
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached},
                "completion_tokens_details": {"reasoning_tokens": turn.reasoning_tokens()}}

    def json_reply(self, body: dict, turn: Turn) -> dict[str, Any]:
        text, thinking = turn.text, turn.thinking
        message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
        if thinking and turn.chat_reasoning == "think_tags":
            message["content"] = f"<think>{thinking}</think>{text}"
        elif thinking:
            message[turn.chat_reasoning] = thinking
        if turn.tool_calls:
            message["tool_calls"] = [{"id": call.id or self.new_id("call_peer"), "type": "function",
                                      "function": {"name": call.name, "arguments": call.arguments}}
                                     for call in turn.tool_calls]
        return {"id": self.new_id("chatcmpl-peer"), "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model"), "system_fingerprint": None,
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": FINISH_REASONS[turn.stop]}],
                "usage": self.usage(turn)}

    def events(self, body: dict, turn: Turn, error_after: int | None, error_message: str) -> Iterator[Any]:
        # a provider failing mid-stream sends one error object instead of a chunk, and no [DONE]
        return fail_after(self._turn_events(body, turn), error_after,
                          lambda: json_event(error_json(500, error_message)))

    def _turn_events(self, body: dict, turn: Turn) -> Iterator[Any]:
        chunk_id, created, model = self.new_id("chatcmpl-peer"), int(time.time()), body.get("model")
        with_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        def chunk(change: dict[str, Any], finish: str | None = None, **kw: Any) -> Any:
            payload: dict[str, Any] = {
                "id": chunk_id, "object": "chat.completion.chunk", "created": created, "model": model,
                "system_fingerprint": None,
                "choices": [{"index": 0, "delta": change, "logprobs": None, "finish_reason": finish}]}
            if with_usage:
                payload["usage"] = None
            return json_event(payload, **kw)

        yield chunk({"role": "assistant", "content": ""})
        last = len(turn.parts) - 1
        calls = 0
        for index, part in enumerate(turn.parts):
            endless = turn.endless and index == last
            if isinstance(part, Thinking):
                tags = turn.chat_reasoning == "think_tags"
                field = "content" if tags else turn.chat_reasoning
                if tags:
                    yield chunk({"content": "<think>"})
                for piece in turn.pieces(part.text, endless=endless):
                    yield chunk({field: piece}, delta=True, chars=len(piece))
                if tags:
                    yield chunk({"content": "</think>"})
            elif isinstance(part, Text):
                for piece in turn.pieces(part.text, endless=endless):
                    yield chunk({"content": piece}, delta=True, chars=len(piece))
            else:
                call_id = part.id or self.new_id("call_peer")
                yield chunk({"tool_calls": [{"index": calls, "id": call_id, "type": "function",
                                             "function": {"name": part.name, "arguments": ""}}]})
                for piece in turn.pieces(part.arguments):
                    yield chunk({"tool_calls": [{"index": calls, "function": {"arguments": piece}}]},
                                delta=True, chars=len(piece))
                calls += 1
        yield chunk({}, FINISH_REASONS[turn.stop])
        if with_usage:
            yield json_event({"id": chunk_id, "object": "chat.completion.chunk", "created": created, "model": model,
                              "system_fingerprint": None, "choices": [], "usage": self.usage(turn)})
        yield SSE("[DONE]")


def request_problem(body: dict) -> str | None:
    """The 400 message an OpenAI-compatible server would give this request, or None."""
    if not body.get("model"):
        return "you must provide a model parameter"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must contain at least one message"
    for i, message in enumerate(messages):
        if message.get("role") == "assistant" and message.get("tool_calls"):
            ids = [c.get("id") for c in message["tool_calls"]]
            answered = set()
            for after in messages[i + 1:]:
                if after.get("role") != "tool":
                    break
                answered.add(after.get("tool_call_id"))
            missing = [x for x in ids if x not in answered]
            if missing:
                return ("An assistant message with 'tool_calls' must be followed by tool messages responding to "
                        f"each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                        f"{', '.join(map(str, missing))}")
        if message.get("role") == "tool":
            owner = next((m for m in reversed(messages[:i]) if m.get("role") != "tool"), {})
            known = {c.get("id") for c in owner.get("tool_calls") or []}
            if owner.get("role") != "assistant" or message.get("tool_call_id") not in known:
                return ("Invalid parameter: messages with role 'tool' must be a response to a preceding message "
                        "with 'tool_calls'.")
    return None
