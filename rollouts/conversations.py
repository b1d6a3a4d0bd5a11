"""A rollout as a chat conversation in the format chat templates and TRL's trainers read: the one place a record's
stored turns become `messages` for training (rollouts.training_sets builds its configs from it).

The format (TRL "Dataset formats", conversational language modelling with tool calling; transformers' chat
templates) is a list of messages, each `{"role", "content"}`:

- `system`: the rules the server handed over at the reset (the record's first system message).
- `user`: the situation; then the harness's notes (a nudge after a turn without a tool call, the notes handed back
  after a cut-off turn, the last-turn reminder). Notes that follow one another go in as ONE user message joined by a
  blank line, as the chat-completions history sends them (agent/providers/chat_completions.py), since many
  templates want the roles to alternate. A note's `kind` stays in the record.
- `assistant`: the turn's text, its reasoning as `reasoning_content` (the key reasoning models' templates read; left
  out when empty), and its calls as `tool_calls: [{"id", "type": "function", "function": {"name", "arguments"}}]`
  with `arguments` the JSON object the model wrote (TRL's layout; the model's text itself when it is not a JSON
  object, so an unreadable call is kept as it was sent).
- `tool`: the server's answer, `{"role": "tool", "tool_call_id", "name", "content"}`. The harness appends how many
  turns are left to each answer it hands the model; records keep the server's text alone, so that line is not here.

A message of a role the format does not know, or that is not an object, is left out, as the traces leave it out
(rollouts.traces). Only `messages` is read: no key or header ever is (records hold none: DESIGN.md). Content blocks
(upstream's records) are joined by their text, as in the traces.

`tool_schemas` turns a server's tools (`{name, description, input_schema}`, agent.session) into the JSON-schema
function list that `apply_chat_template(messages, tools=...)` and TRL's `tools` column take.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rollouts.traces import ROLES, message_text

__all__ = ["conversation", "opening", "tool_schemas"]


def conversation(record: Mapping[str, Any]) -> list[dict]:
    """The record's conversation as chat messages (see the module doc)."""
    out: list[dict] = []
    for message in record.get("messages") or []:
        if not isinstance(message, Mapping) or message.get("role") not in ROLES:
            continue
        role = message["role"]
        content = message_text(message.get("content"))
        if role == "user" and out and out[-1]["role"] == "user":
            out[-1]["content"] = f"{out[-1]['content']}\n\n{content}" if out[-1]["content"] else content
            continue
        line: dict[str, Any] = {"role": role, "content": content}
        if role == "assistant":
            reasoning = message_text(message.get("reasoning"))
            if reasoning:
                line["reasoning_content"] = reasoning
            calls = message.get("tool_calls") if isinstance(message.get("tool_calls"), list) else []
            calls = [_tool_call(call) for call in calls if isinstance(call, Mapping)]
            if calls:
                line["tool_calls"] = calls
        elif role == "tool":
            line = {"role": "tool", "tool_call_id": str(message.get("tool_call_id") or ""),
                    "name": str(message.get("name") or ""), "content": content}
        out.append(line)
    return out


def opening(messages: list[dict]) -> tuple[list[dict], list[dict]]:
    """(the prompt: every message before the model's first turn, the system prompt and the situation; the rest,
    which the model wrote or the tools answered). The prompt is what a trainer sends a policy to start an episode."""
    for at, message in enumerate(messages):
        if message["role"] == "assistant":
            return messages[:at], messages[at:]
    return list(messages), []


def tool_schemas(tools: list[Mapping[str, Any]]) -> list[dict]:
    """A server's tools as the JSON-schema function list chat templates take, in the server's order."""
    return [{"type": "function",
             "function": {"name": str(tool["name"]), "description": str(tool.get("description") or ""),
                          "parameters": dict(tool.get("input_schema") or {"type": "object", "properties": {}})}}
            for tool in tools]


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # Python's reader takes NaN and Infinity; JSON does not


def _tool_call(call: Mapping[str, Any]) -> dict:
    return {"id": str(call.get("id") or ""), "type": "function",
            "function": {"name": str(call.get("name") or ""), "arguments": _arguments(call.get("arguments"))}}


def _arguments(value: Any) -> Any:
    """The call's arguments as the JSON object the model wrote; its own text when that is no JSON object."""
    if isinstance(value, Mapping):
        return dict(value)
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    try:
        parsed = json.loads(value, parse_constant=_not_json) if isinstance(value, str) else value
    except (ValueError, RecursionError):
        return value
    return parsed if isinstance(parsed, dict) else value
