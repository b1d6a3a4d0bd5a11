"""A protocol peer for the OpenAI Responses API: POST /v1/responses, streamed (SSE) or JSON.

Wire format (public Responses streaming events reference): every event has `type` and a rising
`sequence_number`; response.created, response.in_progress, then per output item
response.output_item.added ... response.output_item.done, and finally response.completed, or
response.incomplete (incomplete_details.reason "max_output_tokens"). Reasoning items carry a summary only
when the request asks for one (reasoning.summary) and `encrypted_content` only when it asks with
include=["reasoning.encrypted_content"]; the encrypted content is given only on output_item.done.

Like the real API (with store=false nothing is kept server-side) it rejects: a reasoning item sent back
without its encrypted_content (404), encrypted content it did not issue, a function_call without its
function_call_output and the reverse.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from .base import Peer, RecordedRequest, Reply, fail_after, json_event
from .script import (
    Text,
    Thinking,
    ToolCall,
    Turn,
    decrypt_reasoning,
    encrypted_reasoning,
)

ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 403: "invalid_request_error",
               404: "invalid_request_error", 429: "rate_limit_error", 500: "server_error", 503: "server_error"}
ERROR_CODES = {401: "invalid_api_key", 429: "rate_limit_exceeded", 500: "server_error"}


def error_json(status: int, message: str, error_type: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type or ERROR_TYPES.get(status, "server_error"),
                      "param": None, "code": code or ERROR_CODES.get(status)}}


class ResponsesPeer(Peer):
    """ResponsesPeer(script, *, api_key=None, validate=True); point openai.OpenAI(base_url=peer.url + "/v1")."""

    def respond(self, record: RecordedRequest) -> Reply:
        if record.method != "POST" or record.path != "/v1/responses":
            return self.error_reply(404, f"Invalid URL ({record.method} {record.path})")
        if not self.bearer_ok(record):
            return self.error_reply(401, "Incorrect API key provided.")
        body = record.body
        if not isinstance(body, dict):
            return self.error_reply(400, "We could not parse the JSON body of your request.")
        if self.validate and (problem := request_problem(body)):
            return self.error_reply(*problem)
        return self.play(record, self.next_entry(record))

    def error_body(self, status: int, message: str, error_type: str | None = None) -> dict[str, Any]:
        return error_json(status, message, error_type)

    # the response object

    def shell(self, body: dict, response_id: str) -> dict[str, Any]:
        reasoning = body.get("reasoning")
        return {
            "id": response_id, "object": "response", "created_at": int(time.time()), "status": "in_progress",
            "background": False, "error": None, "incomplete_details": None,
            "instructions": body.get("instructions"), "max_output_tokens": body.get("max_output_tokens"),
            "model": body.get("model"), "output": [], "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": body.get("previous_response_id"),
            "reasoning": {"effort": (reasoning or {}).get("effort"), "summary": (reasoning or {}).get("summary")},
            "store": body.get("store", True), "temperature": body.get("temperature", 1.0),
            "text": body.get("text") or {"format": {"type": "text"}}, "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools", []), "top_p": body.get("top_p", 1.0), "truncation": "disabled",
            "usage": None, "metadata": body.get("metadata") or {},
        }

    @staticmethod
    def usage(turn: Turn) -> dict[str, Any]:
        cached = turn.usage.cache_read_input_tokens
        input_tokens = turn.usage.input_tokens + cached
        output_tokens = turn.output_tokens()
        return {"input_tokens": input_tokens,
                "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
                "output_tokens": output_tokens,
                "output_tokens_details": {"reasoning_tokens": turn.reasoning_tokens()},
                "total_tokens": input_tokens + output_tokens}

    @staticmethod
    def finish(response: dict[str, Any], turn: Turn, output: list[dict[str, Any]]) -> dict[str, Any]:
        cut = turn.stop == "max_tokens"
        response.update(status="incomplete" if cut else "completed", output=output, usage=ResponsesPeer.usage(turn),
                        incomplete_details={"reason": "max_output_tokens"} if cut else None)
        return response

    def item(self, body: dict, part: Thinking | Text | ToolCall, *, done: bool, status: str = "completed"
             ) -> dict[str, Any]:
        """An output item, as output_item.added shows it (done=False) or as output_item.done does."""
        if isinstance(part, Thinking):
            item: dict[str, Any] = {"id": "", "type": "reasoning", "summary": []}
            if done and wants_summary(body):
                item["summary"] = [{"type": "summary_text", "text": part.text}]
            if done and wants_encrypted(body):
                item["encrypted_content"] = encrypted_reasoning(part.text)
            return item
        if isinstance(part, Text):
            content = [{"type": "output_text", "text": part.text, "annotations": [], "logprobs": []}] if done else []
            return {"id": "", "type": "message", "status": status if done else "in_progress", "role": "assistant",
                    "content": content}
        return {"id": "", "type": "function_call", "status": status if done else "in_progress",
                "arguments": part.arguments if done else "", "call_id": "", "name": part.name}

    def ids(self, parts: tuple[Thinking | Text | ToolCall, ...]) -> list[tuple[str, str]]:
        """(item id, call id) for each part."""
        prefixes = {Thinking: "rs_peer", Text: "msg_peer", ToolCall: "fc_peer"}
        return [(self.new_id(prefixes[type(p)]), (p.id or self.new_id("call_peer")) if isinstance(p, ToolCall)
                 else "") for p in parts]

    def stamped(self, item: dict[str, Any], ids: tuple[str, str]) -> dict[str, Any]:
        item["id"] = ids[0]
        if item["type"] == "function_call":
            item["call_id"] = ids[1]
        return item

    def json_reply(self, body: dict, turn: Turn) -> dict[str, Any]:
        ids = self.ids(turn.parts)
        last = len(turn.parts) - 1
        output = [self.stamped(self.item(body, part, done=True,
                                         status="incomplete" if turn.stop == "max_tokens" and i == last
                                         else "completed"), ids[i])
                  for i, part in enumerate(turn.parts)]
        return self.finish(self.shell(body, self.new_id("resp_peer")), turn, output)

    # the stream

    def events(self, body: dict, turn: Turn, error_after: int | None, error_message: str) -> Iterator[Any]:
        response = self.shell(body, self.new_id("resp_peer"))
        sequence = 0

        def ev(payload: dict[str, Any], **kw: Any) -> Any:
            nonlocal sequence
            payload["sequence_number"] = sequence
            sequence += 1
            return json_event(payload, event=payload["type"], **kw)

        def failed() -> Any:
            response.update(status="failed", error={"code": "server_error", "message": error_message})
            return ev({"type": "response.failed", "response": response})

        return fail_after(self._turn_events(body, turn, response, ev), error_after, failed)

    def _turn_events(self, body: dict, turn: Turn, response: dict[str, Any], ev: Any) -> Iterator[Any]:
        yield ev({"type": "response.created", "response": dict(response)})
        yield ev({"type": "response.in_progress", "response": dict(response)})
        ids = self.ids(turn.parts)
        output: list[dict[str, Any]] = []
        last = len(turn.parts) - 1
        for index, part in enumerate(turn.parts):
            endless = turn.endless and index == last
            item_id = ids[index][0]
            where = {"item_id": item_id, "output_index": index}
            yield ev({"type": "response.output_item.added", "output_index": index,
                      "item": self.stamped(self.item(body, part, done=False), ids[index])})
            if isinstance(part, Thinking) and (wants_summary(body) or endless):
                empty = {"type": "summary_text", "text": ""}
                yield ev({"type": "response.reasoning_summary_part.added", **where, "summary_index": 0, "part": empty})
                for piece in turn.pieces(part.text, endless=endless):
                    yield ev({"type": "response.reasoning_summary_text.delta", **where, "summary_index": 0,
                              "delta": piece}, delta=True, chars=len(piece))
                yield ev({"type": "response.reasoning_summary_text.done", **where, "summary_index": 0,
                          "text": part.text})
                yield ev({"type": "response.reasoning_summary_part.done", **where, "summary_index": 0,
                          "part": {"type": "summary_text", "text": part.text}})
            elif isinstance(part, Text):
                at = {**where, "content_index": 0}
                yield ev({"type": "response.content_part.added", **at,
                          "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}})
                for piece in turn.pieces(part.text, endless=endless):
                    yield ev({"type": "response.output_text.delta", **at, "delta": piece, "logprobs": []},
                             delta=True, chars=len(piece))
                yield ev({"type": "response.output_text.done", **at, "text": part.text, "logprobs": []})
                yield ev({"type": "response.content_part.done", **at,
                          "part": {"type": "output_text", "text": part.text, "annotations": [], "logprobs": []}})
            elif isinstance(part, ToolCall):
                for piece in turn.pieces(part.arguments):
                    yield ev({"type": "response.function_call_arguments.delta", **where, "delta": piece},
                             delta=True, chars=len(piece))
                yield ev({"type": "response.function_call_arguments.done", **where, "name": part.name,
                          "arguments": part.arguments})
            status = "incomplete" if turn.stop == "max_tokens" and index == last else "completed"
            done = self.stamped(self.item(body, part, done=True, status=status), ids[index])
            output.append(done)
            yield ev({"type": "response.output_item.done", "output_index": index, "item": done})
        final = self.finish(response, turn, output)
        kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        yield ev({"type": kind, "response": final})


def wants_summary(body: dict) -> bool:
    return bool((body.get("reasoning") or {}).get("summary"))


def wants_encrypted(body: dict) -> bool:
    return "reasoning.encrypted_content" in (body.get("include") or [])


def request_problem(body: dict) -> tuple[int, str] | None:
    """(status, message) the API would answer this request with, or None."""
    if not body.get("model"):
        return 400, "Missing required parameter: 'model'."
    items = body.get("input")
    if not isinstance(items, list):
        return None
    stored = body.get("store", True) is not False
    calls = [i.get("call_id") for i in items if isinstance(i, dict) and i.get("type") == "function_call"]
    outputs = [i.get("call_id") for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]
    for call_id in outputs:
        if call_id not in calls:
            return 400, f"No tool call found for function call output with call_id {call_id}."
    for call_id in calls:
        if call_id not in outputs:
            return 400, f"No tool output found for function call {call_id}."
    for item in items:
        if not isinstance(item, dict) or item.get("type") != "reasoning":
            continue
        blob = item.get("encrypted_content")
        if blob is None and not stored:
            return 404, (f"Item with id '{item.get('id')}' not found. Items are not persisted when `store` is set "
                         "to false. Try again with `store` set to true, or remove this item from your input.")
        if blob is not None and decrypt_reasoning(blob) is None:
            return 400, f"The encrypted content for item {item.get('id')} could not be verified."
    return None
