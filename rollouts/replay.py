"""A stored rollout record -> the events a live run would have produced (`Record.events()` reads a record so).

The live chat, Browse's transcript and the share page render one stream of events, so a stored rollout is turned
back into them. A record keeps less than the live stream (no timestamps, no per-turn usage, no argument errors),
so the replayed events carry what the record has: whole reasoning and text per turn instead of deltas, no `t`
stamps (so no durations), the total usage on the last turn, argument errors decided again by the loop's own rule
and words (`rollouts.events.parse_arguments`; a call after the episode's end known by the loop's own answer), and for user notes stored without their kind (upstream's records)
the kind `note_kind` reads from their words and place.

Records written without kinds (upstream's harness, PORTSIM_SPEC §9.1, stores its notes as bare `{role: user,
content}`) still hold only the three notes a harness sends the model: a nudge after a turn without a tool call,
the notes and nudge after a turn cut off by the output limit, and the last-turn reminder.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rollouts import events as ev
from rollouts.events import NOTE_KINDS, Event, NoteKind

# Words that give a note away, checked in this order: "your last turn had no tool call" is a nudge, and "your last
# turn ran out of output tokens" a cutoff, though both say "last turn".
_CUTOFF_WORDS = ("cut-off turn", "cut off", "output tokens", "output limit")
_NUDGE_WORDS = ("no tool call", "without a tool call", "did not call a tool", "didn't call a tool")
_LAST_TURN_WORDS = ("last turn", "final turn")


def note_kind(text: str, *, after_toolless_turn: bool = False, after_cut_off_turn: bool = False,
              before_last_turn: bool = False) -> NoteKind:
    """The kind of a user note stored without one.

    `after_toolless_turn`: the assistant turn before it called no tool (and `after_cut_off_turn`: it stopped at
    the output limit); `before_last_turn`: the next assistant turn is the episode's last.

    A note nothing gives away is a `nudge`: of the three notes a harness sends, `cutoff` and `last_turn` each
    claim a fact about the episode (the output limit was hit; the turns are up) that an unknown text does not
    support, while a nudge says only that the harness spoke to the model to make it act, which any such note does.
    """
    words = text.lower()
    if any(w in words for w in _CUTOFF_WORDS):
        return "cutoff"
    if any(w in words for w in _NUDGE_WORDS):
        return "nudge"
    if "submit" in words and any(w in words for w in _LAST_TURN_WORDS):
        return "last_turn"
    if after_toolless_turn:
        return "cutoff" if after_cut_off_turn else "nudge"
    return "last_turn" if before_last_turn else "nudge"


_END_NOTES = {"stopped": "stopped by the user", "wall_clock": "the time limit was reached"}


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
    over: set[str] = field(default_factory=set)  # calls the loop answered "the episode is over"

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
            call_id = str(call.get("id") or "")
            error = ev.EPISODE_OVER if call_id in self.over else ev.parse_arguments(arguments)[1]
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
    """The event list (rollouts/events.py types, each with `seq`, none with `t`) for a stored rollout record."""
    messages = [m for m in record.get("messages") or [] if isinstance(m, Mapping)]
    limits = dict(record.get("limits") or {})
    max_turns = limits.get("max_turns")
    system = next((m for m in messages if m.get("role") == "system"), None)
    first_user = next((m for m in messages if m.get("role") == "user"), None)
    replay = _Replay(record, max_turns if isinstance(max_turns, int) and not isinstance(max_turns, bool) else None,
                     [s for s in record.get("steps") or [] if isinstance(s, dict)])
    # A call after the one that ended the episode was answered by the loop, in its own words (rollouts.events).
    over = ev.local_answer(ev.EPISODE_OVER)
    replay.over = {str(m.get("tool_call_id") or "") for m in messages
                   if m.get("role") == "tool" and m.get("content") == over}
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
