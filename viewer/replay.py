"""A stored rollout record -> the events a live run would have produced.

The Browse tab renders stored rollouts through the same `ChatBuilder` as the live Run tab, so there is one chat
code path. A record keeps less than the live stream (no timestamps, no per-turn usage, no argument errors), so the
replayed events carry what the record has: whole reasoning and text per turn instead of deltas, no `t` stamps (so
no durations), the total usage on the last turn, argument errors re-derived the way the loop decides them
(arguments that are not a JSON object never reach the server), and for user notes stored without their kind
(upstream's records) the kind `agent.notes.note_kind` reads from their words and place.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gradio import ChatMessage

from agent import events as ev
from agent.events import NOTE_KINDS, Event
from agent.notes import note_kind
from viewer.chat import chat_messages

_END_NOTES = {"stopped": "stopped by the user", "wall_clock": "the time limit was reached"}


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


@dataclass
class _Replay:
    """Walks a record's messages in order, turning each into the events the loop emitted for it."""

    record: Mapping[str, Any]
    max_turns: int | None
    steps: list[dict]
    events: list[Event] = field(default_factory=list)
    turn: int = 0
    open_turn: bool = False
    stop: str = ""
    last_assistant: Mapping[str, Any] | None = None
    step_at: int = 0
    call_errors: dict[str, str | None] = field(default_factory=dict)

    def assistant(self, message: Mapping[str, Any]) -> None:
        if self.open_turn:
            self.events.append(_turn_finished(self.turn, self.stop, self.record, last=False))
        self.stop = str(message.get("stop") or "")
        self.turn += 1
        self.open_turn = True
        self.last_assistant = message
        self.events.append(ev.turn_started(self.turn, self.max_turns))
        if message.get("reasoning"):
            self.events.append(ev.reasoning_delta(self.turn, str(message["reasoning"])))
        if message.get("content"):
            self.events.append(ev.text_delta(self.turn, _text(message)))
        for call in message.get("tool_calls") or []:
            arguments = call.get("arguments")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            error = _argument_error(arguments)
            call_id = str(call.get("id") or "")
            self.call_errors[call_id] = error
            self.events.append(ev.tool_call(self.turn, call_id, str(call.get("name") or ""), arguments, error))

    def tool(self, message: Mapping[str, Any]) -> None:
        name, call_id, text = str(message.get("name") or ""), str(message.get("tool_call_id") or ""), _text(message)
        local = self.call_errors.get(call_id) is not None
        step = None
        if name in ("check_plan", "submit_plan") and not local and self.step_at < len(self.steps) \
                and self.steps[self.step_at].get("tool") == name:
            step = self.steps[self.step_at]
            self.step_at += 1
        final = self.record.get("final") or {}
        done = bool(step and name == "submit_plan" and final.get("submitted"))
        metadata = {"grade": final.get("grade"), "rubric": final.get("rubric")} if done else {}
        reward = _number(self.record.get("reward")) if done else None
        self.events.append(ev.tool_result(self.turn, call_id, name, text, data=_parse(text), done=done,
                                          reward=reward, metadata=metadata, step=step, local=local))

    def user(self, message: Mapping[str, Any]) -> None:
        kind = message.get("kind")
        if kind not in NOTE_KINDS:
            last = self.last_assistant
            toolless = last is not None and not last.get("tool_calls")
            kind = note_kind(_text(message), after_toolless_turn=toolless,
                             after_cut_off_turn=toolless and _cut_off(last),
                             before_last_turn=self.max_turns is not None and self.turn + 1 == self.max_turns)
        self.events.append(ev.note(self.turn, kind, _text(message)))

    def end(self) -> None:
        """What follows the last message: the last turn's end, provider switches, how the episode ended."""
        record, turn = self.record, self.turn
        if self.open_turn:
            self.events.append(_turn_finished(turn, self.stop, record, last=True))
        for switch in record.get("provider_switches") or []:
            self.events.append(ev.note(turn, "provider_switch", str(switch)))
        end_reason = record.get("end_reason")
        if end_reason in _END_NOTES:
            self.events.append(ev.note(turn, end_reason, _END_NOTES[end_reason]))
        for err in record.get("errors") or []:
            self.events.append(ev.error(turn, str(err)))
        self.events.append(ev.episode_finished(dict(record)))


def record_events(record: Mapping[str, Any]) -> list[Event]:
    """The event list (agent/events.py types, each with `seq`, none with `t`) for a stored rollout record."""
    messages = [m for m in record.get("messages") or [] if isinstance(m, Mapping)]
    limits = dict(record.get("limits") or {})
    max_turns = limits.get("max_turns")
    system = next((m for m in messages if m.get("role") == "system"), None)
    first_user = next((m for m in messages if m.get("role") == "user"), None)
    replay = _Replay(record, max_turns if isinstance(max_turns, int) and not isinstance(max_turns, bool) else None,
                     [s for s in record.get("steps") or [] if isinstance(s, dict)])
    replay.events.append(ev.episode_started(
        episode_id=str(record.get("episode_id") or ""), task_id=str(record.get("task_id") or ""),
        model=str(record.get("model") or ""), env_url=_str_or_none(record.get("env_url")),
        instructions=_text(system), situation=_text(first_user), tools=[], limits=limits,
        task=dict(record.get("task") or {})))
    for message in messages:
        if message is system or message is first_user:
            continue
        role = message.get("role")
        if role == "assistant":
            replay.assistant(message)
        elif role == "tool":
            replay.tool(message)
        elif role == "user":
            replay.user(message)
    replay.end()
    for seq, event in enumerate(replay.events):
        event["seq"] = seq
    return replay.events


def _turn_finished(turn: int, stop: str, record: Mapping[str, Any], *, last: bool) -> Event:
    # A record keeps only the episode's total usage; it goes on the last turn, where a live run has it too.
    usage = dict(record.get("usage") or {}) if last else {}
    return ev.turn_finished(turn, stop, {}, usage)


def _cut_off(message: Mapping[str, Any] | None) -> bool:
    """Whether an assistant turn stopped at the output limit, in any provider's words."""
    stop = str((message or {}).get("stop") or "")
    return stop in ("max_tokens", "incomplete") or stop.startswith("length")


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


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
