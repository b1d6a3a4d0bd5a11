"""OpenAI Responses API, streamed, stateless (`store=False`).

Reasoning summaries stream as reasoning; the encrypted reasoning items come back in the final response and are sent
again on the next turn, so the model keeps its chain of thought without the server storing anything.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from agent.providers.base import ModelTurn, ProviderSetup, ToolCall, TurnStream
from agent.providers.openai_sdk import OpenAIClientAPI
from agent.spec import ModelSpec
from rollouts import events as ev

FINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")


class ResponsesProvider(OpenAIClientAPI):
    prefixes = ("openai",)
    label = "OpenAI"
    key_env = "OPENAI_API_KEY"
    key_name, key_order = "OpenAI API key", 2
    endpoint_env = "OPENAI_BASE_URL"
    price_group = "openai"
    model_grammar = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")  # a fine-tune's id has colons: ft:gpt-x:org::id
    model_form = "<model>[@low|@medium|@high], e.g. openai:gpt-5"

    def __init__(self, spec: ModelSpec, setup: ProviderSetup):
        self.client = self.make_client(self.endpoint_url(), setup.key)
        self.model, self.system, self.max_tokens = spec.model, setup.system, setup.max_tokens
        self.effort = spec.effort or "medium"
        self.tools = [{"type": "function", "name": t["name"], "description": t["description"],
                       "parameters": t["input_schema"]} for t in setup.tools]
        self.input: list[dict] = []
        self._pending: list[str] = []
        self.provider_switches: list[str] = []
        self.retry_base_s = setup.retry_base_s

    # -- history -----------------------------------------------------------------------------------------------
    def add_user(self, text: str) -> None:
        self._pending.append(text)

    def add_notes(self, text: str) -> None:
        self._pending.append(f"(your notes from the turn that was cut off)\n{text}")

    def add_tool_results(self, results: list[tuple[ToolCall, str]]) -> None:
        for call, text in results:
            self.input.append({"type": "function_call_output", "call_id": call.id, "output": text})

    # -- one turn ----------------------------------------------------------------------------------------------
    def request(self) -> Any:
        if self._pending:
            self.input.append({"role": "user", "content": [{"type": "input_text",
                                                            "text": "\n\n".join(self._pending)}]})
            self._pending = []
        return self.client.responses.create(
            model=self.model, instructions=self.system, input=self.input, tools=self.tools,
            max_output_tokens=self.max_tokens, store=False, include=["reasoning.encrypted_content"],
            reasoning={"effort": self.effort, "summary": "auto"}, stream=True)

    def read_stream(self, stream: Iterable[Any], turn: int) -> TurnStream:
        final = None
        calls_by_item: dict[int, tuple[str, str]] = {}  # output index -> (call id, name)
        for event in stream:
            kind = event.type
            if kind == "response.output_text.delta":
                yield ev.text_delta(turn, event.delta)
            elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
                yield ev.reasoning_delta(turn, event.delta)
            elif kind == "response.reasoning_summary_part.added" and event.summary_index > 0:
                yield ev.reasoning_delta(turn, "\n\n")
            elif kind == "response.output_item.added" and event.item.type == "function_call":
                calls_by_item[event.output_index] = (event.item.call_id, event.item.name)
            elif kind == "response.function_call_arguments.delta":
                call_id, name = calls_by_item.get(event.output_index, ("", ""))
                position = sorted(calls_by_item).index(event.output_index) \
                    if event.output_index in calls_by_item else 0
                yield ev.tool_args_delta(turn, position, call_id, name, event.delta)
            elif kind in FINAL_EVENTS:
                final = event.response
            elif kind == "error":
                raise RuntimeError(f"OpenAI stream error: {getattr(event, 'message', event)}")
        if final is None:
            raise RuntimeError("the OpenAI stream ended without a final response")
        if final.status == "failed":
            detail = getattr(final.error, "message", None) or "no detail"
            raise RuntimeError(f"OpenAI response failed: {detail}")
        return self._finish(final)

    def _finish(self, final: Any) -> ModelTurn:
        result = ModelTurn(stop=final.status or "")
        reasons = getattr(final.incomplete_details, "reason", None) if final.incomplete_details else None
        result.cut_off = final.status == "incomplete" and reasons == "max_output_tokens"
        summaries: list[str] = []
        for item in final.output:
            if item.type == "message":
                result.text += "".join(getattr(part, "text", "") or "" for part in item.content)
            elif item.type == "reasoning":
                summaries.extend(part.text for part in (item.summary or []) if getattr(part, "text", None))
            elif item.type == "function_call":
                result.calls.append(ToolCall(item.call_id, item.name, item.arguments or ""))
            # Every output item, the encrypted reasoning included, goes back as input on the next turn.
            self.input.append(item.model_dump(exclude_none=True))
        result.reasoning = "\n\n".join(summaries)
        usage = final.usage
        if usage is not None:
            result.usage = {"input_tokens": usage.input_tokens or 0, "output_tokens": usage.output_tokens or 0}
        return result
