"""A stored rollout record -> the events a live run would have produced.

The Browse tab renders stored rollouts through the same `ChatBuilder` as the live Run tab, so there is one chat
code path. A record keeps less than the live stream (no timestamps, no per-turn usage, no note kinds, no
argument errors), so the replayed events carry what the record has: whole reasoning and text per turn instead of
deltas, no `t` stamps (so no durations), the total usage on the last turn, and argument errors re-derived the
way the loop decides them (arguments that are not a JSON object never reach the server).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gradio import ChatMessage

from viewer.chat import chat_messages

Event = dict[str, Any]


def _argument_error(arguments: str) -> str | None:
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except (ValueError, RecursionError) as exc:
        return f"the arguments are not valid JSON: {exc}"
    return None if isinstance(value, dict) else "the arguments are not a JSON object"


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, TypeError, RecursionError):
        return None


def record_events(record: Mapping[str, Any]) -> list[Event]:
    """The event list (agent/events.py shapes, with `seq`) for a stored rollout record."""
    events: list[Event] = []
    messages = list(record.get("messages") or [])
    limits = dict(record.get("limits") or {})
    max_turns = limits.get("max_turns")

    system = next((m for m in messages if m.get("role") == "system"), None)
    first_user = next((m for m in messages if m.get("role") == "user"), None)
    events.append({
        "type": "episode_started", "episode_id": record.get("episode_id"), "task_id": record.get("task_id"),
        "model": record.get("model"), "env_url": record.get("env_url"),
        "instructions": _text(system), "situation": _text(first_user), "tools": [], "limits": limits,
        "task": record.get("task") or {},
    })

    steps = [s for s in record.get("steps") or [] if isinstance(s, Mapping)]
    step_at = 0
    final = record.get("final") or {}
    turn = 0
    open_turn = False
    stop: Any = None
    call_errors: dict[str, str | None] = {}
    for message in messages:
        if message is system or message is first_user:
            continue
        role = message.get("role")
        if role == "assistant":
            if open_turn:
                events.append(_turn_finished(turn, stop, record, last=False))
            stop = message.get("stop")
            turn += 1
            open_turn = True
            events.append({"type": "turn_started", "turn": turn, "max_turns": max_turns})
            if message.get("reasoning"):
                events.append({"type": "reasoning_delta", "turn": turn, "text": str(message["reasoning"])})
            if message.get("content"):
                events.append({"type": "text_delta", "turn": turn, "text": _text(message)})
            for call in message.get("tool_calls") or []:
                arguments = call.get("arguments")
                if not isinstance(arguments, str):
                    arguments = json.dumps(arguments, ensure_ascii=False)
                error = _argument_error(arguments)
                call_errors[str(call.get("id"))] = error
                events.append({"type": "tool_call", "turn": turn, "call_id": call.get("id"),
                               "name": call.get("name"), "arguments": arguments, "error": error})
        elif role == "tool":
            name = message.get("name")
            call_id = message.get("tool_call_id")
            text = _text(message)
            step = None
            local = call_errors.get(str(call_id)) is not None
            if name in ("check_plan", "submit_plan") and not local and step_at < len(steps) \
                    and steps[step_at].get("tool") == name:
                step = steps[step_at]
                step_at += 1
            done = bool(step and name == "submit_plan" and final.get("submitted"))
            metadata = {"grade": final.get("grade"), "rubric": final.get("rubric")} if done else {}
            events.append({"type": "tool_result", "turn": turn, "call_id": call_id, "name": name, "text": text,
                           "data": _parse(text), "done": done, "reward": record.get("reward") if done else None,
                           "metadata": metadata, "step": step, "local": local})
        elif role == "user":
            events.append({"type": "note", "turn": turn, "kind": message.get("kind") or "message",
                           "text": _text(message)})
    if open_turn:
        events.append(_turn_finished(turn, stop, record, last=True))

    for switch in record.get("provider_switches") or []:
        events.append({"type": "note", "turn": turn, "kind": "provider_switch", "text": str(switch)})
    end_reason = record.get("end_reason")
    if end_reason in ("stopped", "wall_clock"):
        events.append({"type": "note", "turn": turn, "kind": end_reason,
                       "text": "stopped by the user" if end_reason == "stopped" else "the time limit was reached"})
    for err in record.get("errors") or []:
        events.append({"type": "error", "turn": turn, "message": str(err)})
    events.append({"type": "episode_finished", "record": dict(record)})
    for seq, event in enumerate(events):
        event["seq"] = seq
    return events


def _turn_finished(turn: int, stop: Any, record: Mapping[str, Any], *, last: bool) -> Event:
    # A record keeps only the episode's total usage; it goes on the last turn, where a live run has it too.
    usage = dict(record.get("usage") or {}) if last else {}
    return {"type": "turn_finished", "turn": turn, "stop": stop, "usage": {}, "usage_total": usage}


def _text(message: Mapping[str, Any] | None) -> str:
    if not message:
        return ""
    content = message.get("content")
    if isinstance(content, list):  # content blocks: keep the text parts
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping))
    return "" if content is None else str(content)


def record_messages(record: Mapping[str, Any], task: Mapping[str, Any] | None = None) -> list[ChatMessage]:
    """The chat of a stored rollout, rendered exactly like a live one."""
    return chat_messages(record_events(record), task)
