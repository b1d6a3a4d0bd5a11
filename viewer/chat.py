"""Episode events -> Gradio chat messages.

`ChatBuilder` takes the loop's events (rollouts/events.py) one at a time and keeps a list of `gr.ChatMessage`s up to
date, mutating the last messages in place while text streams, so the live Run tab can call `.add(event)` and
yield `.messages` after every token. The Browse tab replays a stored record as events (viewer/replay.py) and
goes through the same builder, so a stored rollout looks exactly like a live one.

Layout: Rules and Situation collapsed at the top; per turn a collapsible Thinking message (pending while it
streams, with its duration), the assistant's text, one collapsible message per tool call with its result nested
under it (and the raw JSON one more click away); notes and errors as small titled messages.

Every untrusted string (model text, tool arguments and results, server texts, provider errors) is either
HTML-escaped (`escape_md`) or put in a fence it cannot break (`code_block`); titles are Markdown too and get the
same treatment. `log` is rendered as plain text by the Chatbot, so it is left as is.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from gradio import ChatMessage

from rollouts.record import Record
from viewer.markdown import StreamEscaper, code_block, compact_json, escape_cell, escape_md, fmt_num, shorten
from viewer.summary import failure, grade_lines, grade_words, violation_lines

Event = Mapping[str, Any]

ARGS_CHAR_LIMIT = 12_000     # arguments shown in a tool call (a 59-ship plan is about 3,500)
PLAN_ENTRY_LIMIT = 80        # plan entries shown, one per line
ENTRY_CHAR_LIMIT = 300       # one plan entry's line
STREAM_TAIL = 3_000          # while arguments stream, the newest characters only
RAW_CHAR_LIMIT = 20_000      # the raw JSON child of a tool result
VIOLATIONS_SHOWN = 5         # ships listed under a check result

# Notes the loop sends to the model show on the user's side; notes for the watcher on the assistant's.
NOTE_TITLES = {
    "nudge": ("user", "🔔 Nudge: the turn had no tool call"),
    "cutoff": ("user", "✂️ Cut off at the output limit"),
    "last_turn": ("user", "⏳ Last turn: submit now"),
    "retry": ("assistant", "🔁 Provider asked to wait; retrying"),
    "provider_switch": ("assistant", "🔀 Provider switch"),
    "stopped": ("assistant", "⏹️ Stopped by the user"),
    "wall_clock": ("assistant", "⏱️ Time limit reached"),
}
TOOL_ICON = "🛠️"


@dataclass
class _Segment:
    """A streaming stretch of one kind (thinking or text) inside a turn."""

    kind: str
    turn: int | None
    start: float | None
    message: ChatMessage | None = None
    escaper: StreamEscaper = field(default_factory=StreamEscaper)


@dataclass
class _Call:
    message: ChatMessage
    turn: int | None
    name: str
    call_id: str | None
    start: float | None
    streamed: int = 0         # characters of arguments received so far
    tail: str = ""            # the newest of them, shown while they stream
    called: bool = False
    answered: bool = False
    rejected: bool = False    # the loop did not send it (bad arguments); the title already says so


class ChatBuilder:
    """Builds the chat incrementally: `add(event)` per event, `messages` is always the current list."""

    def __init__(self, task: Mapping[str, Any] | None = None) -> None:
        self.messages: list[ChatMessage] = []
        self.names: dict[int, str] = {}
        self.turn: int | None = None
        self.max_turns: int | None = None
        self._ids = itertools.count(1)
        self._segment: _Segment | None = None
        self._calls: list[_Call] = []
        self._calls_by_slot: dict[tuple[Any, Any], _Call] = {}
        # The turn each message was made in (by the message's id()), None before the first: how a share page groups
        # its transcript into turns a link can point at.
        self.turn_of: dict[int, int | None] = {}
        if task:
            self._learn_names(task)

    # --- public ----------------------------------------------------------------------------------------------

    def add(self, event: Event) -> list[ChatMessage]:
        kind = event.get("type")
        if kind in ("reasoning_delta", "text_delta"):
            self._stream(event, "thinking" if kind == "reasoning_delta" else "text")
            return self.messages
        self._close_segment(event)
        handler = getattr(self, f"_on_{kind}", None)
        if handler is not None:
            handler(event)
        return self.messages

    def extend(self, events: Iterable[Event]) -> list[ChatMessage]:
        for event in events:
            self.add(event)
        return self.messages

    # --- helpers ---------------------------------------------------------------------------------------------

    def _new_id(self) -> str:
        return f"m{next(self._ids)}"

    def _append(self, content: str, *, role: str = "assistant", **metadata: Any) -> ChatMessage:
        meta = {k: v for k, v in metadata.items() if v is not None}
        message = ChatMessage(role=role, content=content, metadata=meta)  # type: ignore[arg-type]
        self.messages.append(message)
        self.turn_of[id(message)] = self.turn
        return message

    def _learn_names(self, task: Mapping[str, Any]) -> None:
        ships = task.get("ships")
        if isinstance(ships, list):
            self.names = {s["id"]: str(s.get("name", "")) for s in ships if isinstance(s, Mapping) and "id" in s}

    @staticmethod
    def _t(event: Event) -> float | None:
        t = event.get("t")
        return float(t) if isinstance(t, int | float) else None

    # --- streaming thinking and text -------------------------------------------------------------------------

    def _stream(self, event: Event, kind: str) -> None:
        turn = event.get("turn")
        seg = self._segment
        if seg is None or seg.kind != kind or seg.turn != turn:
            self._close_segment(event)
            seg = self._segment = _Segment(kind=kind, turn=turn, start=self._t(event))
        text = str(event.get("text") or "")
        if seg.message is None:
            # A bubble that would only hold whitespace waits for the first visible character.
            text = text.lstrip()
            if not text:
                return
            if kind == "thinking":
                seg.message = self._append("", title="🧠 Thinking", id=self._new_id(), status="pending",
                                           log=f"turn {turn}" if turn is not None else None)
            else:
                seg.message = self._append("")
        seg.message.content += seg.escaper.feed(text)  # type: ignore[operator]
        if kind == "thinking":
            self._set_duration(seg.message, seg.start, self._t(event))

    def _close_segment(self, event: Event) -> None:
        seg, self._segment = self._segment, None
        if seg is not None and seg.message is not None:
            seg.message.content += seg.escaper.flush()  # type: ignore[operator]
        if seg is None or seg.message is None or seg.kind != "thinking":
            return
        seg.message.metadata["status"] = "done"
        self._set_duration(seg.message, seg.start, self._t(event))

    @staticmethod
    def _set_duration(message: ChatMessage, start: float | None, end: float | None) -> None:
        if start is not None and end is not None:
            message.metadata["duration"] = round(max(0.0, end - start), 1)

    # --- episode frame ---------------------------------------------------------------------------------------

    def _on_episode_started(self, event: Event) -> None:
        if isinstance(event.get("task"), Mapping):
            self._learn_names(event["task"])
        limits = event.get("limits") or {}
        self.max_turns = limits.get("max_turns", self.max_turns)
        model = str(event.get("model") or "")
        self._append(escape_md(event.get("instructions") or ""), role="user", title="📜 Rules",
                     id=self._new_id(), status="done", log="system prompt")
        self._append(escape_md(event.get("situation") or ""), role="user", title="🗺️ Situation",
                     id=self._new_id(), status="done",
                     log=" · ".join(x for x in (str(event.get("task_id") or ""), model) if x) or None)

    def _on_turn_started(self, event: Event) -> None:
        self.turn = event.get("turn")
        self.max_turns = event.get("max_turns", self.max_turns)

    def _on_note(self, event: Event) -> None:
        kind = str(event.get("kind") or "")
        role, title = NOTE_TITLES.get(kind, ("user", "💬 Message to the model"))
        text = str(event.get("text") or "")
        self._append(escape_md(shorten(text, ARGS_CHAR_LIMIT)) or "*(empty)*", role=role, title=title,
                     id=self._new_id(), status="done", log=_one_line(text, 80) or None)

    def _on_error(self, event: Event) -> None:
        party, message = failure(str(event.get("message") or "unknown error"))
        title = "❌ Berth server error" if party == "berth server" else "❌ Provider error"
        self._append(code_block(shorten(message, 4_000)), title=title, id=self._new_id(),
                     log=f"turn {event.get('turn')}" if event.get("turn") is not None else None)

    def _on_episode_finished(self, event: Event) -> None:
        finished = Record(event.get("record") or {})
        for message in self.messages:
            if message.metadata.get("status") == "pending":
                message.metadata["status"] = "done"
                message.metadata["log"] = (message.metadata.get("log", "") + " · no result").lstrip(" ·")
        parts = [f"🏁 **Episode ended: {escape_cell(finished.end_reason or 'ended')}**",
                 f"reward **{fmt_num(finished.reward)}**"]
        if finished.turns is not None:
            parts.append(f"{fmt_num(finished.turns)} turns")
        if finished.seconds is not None:
            parts.append(f"{finished.seconds:.0f} s")
        # A plain line, not a collapsed box: the outcome should be readable without a click.
        self._append(" · ".join(parts))

    # --- tool calls and results ------------------------------------------------------------------------------

    def _open_call(self, event: Event, name: str, call_id: str | None) -> _Call:
        turn = event.get("turn")
        message = self._append("", title=f"{TOOL_ICON} {escape_cell(name)}", id=self._new_id(), status="pending",
                               log=f"turn {turn}" if turn is not None else None)
        call = _Call(message=message, turn=turn, name=name, call_id=call_id, start=self._t(event))
        self._calls.append(call)
        return call

    def _on_tool_args_delta(self, event: Event) -> None:
        slot = (event.get("turn"), event.get("index"))
        call = self._calls_by_slot.get(slot)
        if call is None:
            call = self._open_call(event, str(event.get("name") or "tool"), event.get("call_id") or None)
            self._calls_by_slot[slot] = call
        if call.called:
            return
        text = str(event.get("text") or "")
        call.streamed += len(text)
        # Only a bounded tail is kept, so a huge argument stream stays linear in its length.
        call.tail = (call.tail + text)[-STREAM_TAIL:]
        shown = call.tail if call.streamed <= STREAM_TAIL else "…" + call.tail
        call.message.content = code_block(shown, "json")
        call.message.metadata["log"] = f"turn {call.turn} · receiving {call.streamed:,} characters"

    def _find_call(self, event: Event, *, answered: bool) -> _Call | None:
        """The call an event belongs to: by call id, else the first open call of the same turn and name."""
        turn, name, call_id = event.get("turn"), event.get("name"), event.get("call_id")
        open_calls = [c for c in self._calls if not (c.answered if answered else c.called)]
        if call_id:
            for call in open_calls:
                if call.call_id == call_id:
                    return call
        for call in open_calls:
            if call.turn == turn and call.name == name and (not call_id or not call.call_id):
                return call
        return None

    def _on_tool_call(self, event: Event) -> None:
        name = str(event.get("name") or "tool")
        call = self._find_call(event, answered=False) or self._open_call(event, name, event.get("call_id") or None)
        call.called = True
        call.call_id = call.call_id or event.get("call_id") or None
        body, log = format_arguments(str(event.get("arguments") or ""))
        error = event.get("error")
        if error:
            call.rejected = True
            call.message.metadata["title"] = f"{TOOL_ICON} {escape_cell(name)} · ⚠️ not sent"
            body += f"\n\n**⚠️ Not sent to the server:** {escape_cell(shorten(str(error), 1_000))}"
        call.message.content = body
        call.message.metadata["log"] = " · ".join(x for x in (f"turn {call.turn}", log) if x)

    def _on_tool_result(self, event: Event) -> None:
        name = str(event.get("name") or "tool")
        call = self._find_call(event, answered=True)
        if call is None:
            call = self._open_call(event, name, event.get("call_id") or None)
            call.called = True
            call.message.content = "*(arguments not recorded)*"
        call.answered = True
        call.message.metadata["status"] = "done"
        self._set_duration(call.message, call.start, self._t(event))
        result = format_result(event, self.names)
        if result.verdict and not call.rejected:
            # The verdict stays visible on the collapsed call.
            call.message.metadata["title"] = f"{TOOL_ICON} {escape_cell(name)} · {result.verdict}"
        result_id = self._new_id()
        self._append(result.body, title=result.title, id=result_id, parent_id=call.message.metadata.get("id"),
                     status="done")
        if result.raw is not None:
            self._append(result.raw, title="Raw result", id=self._new_id(), parent_id=result_id, status="done")


def chat_messages(events: Iterable[Event], task: Mapping[str, Any] | None = None) -> list[ChatMessage]:
    """All chat messages for a list of events (a thin wrapper around `ChatBuilder`)."""
    return ChatBuilder(task).extend(events)


def chat_by_turn(events: Iterable[Event], task: Mapping[str, Any] | None = None) -> list[tuple[ChatMessage, int | None]]:
    """The chat messages of `events`, each with the turn it was made in (None before the first turn)."""
    builder = ChatBuilder(task)
    builder.extend(events)
    return [(m, builder.turn_of.get(id(m))) for m in builder.messages]


# --- formatting tool calls and results -----------------------------------------------------------------------

def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _decode_plan_string(plan: str) -> Any:
    """A plan sent as a string, decoded for display when it is JSON (optionally in a ``` fence)."""
    text = plan.strip()
    if "```" in text:
        inner = text.split("```", 2)[1] if text.count("```") >= 2 else text
        text = inner[4:] if inner.startswith("json") else inner
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return plan


def _entry_line(entry: Any) -> str:
    return shorten(json.dumps(entry, ensure_ascii=False), ENTRY_CHAR_LIMIT).replace("\n", " ")


def format_plan(plan: Any) -> tuple[str, int | None]:
    """A plan as JSON text with one entry per line (long plans cut) and the number of ships it names."""
    if isinstance(plan, Mapping) and set(plan) == {"plan"}:
        plan = plan["plan"]
    if isinstance(plan, list):
        items = [_entry_line(e) for e in plan[:PLAN_ENTRY_LIMIT]]
        ships = {_ship_ref(e) for e in plan}
        count = len(ships - {None}) if all(isinstance(e, Mapping) for e in plan) else None
    elif isinstance(plan, Mapping):
        items = [f"{_entry_line(str(k))}: {_entry_line(v)}" for k, v in list(plan.items())[:PLAN_ENTRY_LIMIT]]
        count = len(plan)
    else:
        return shorten(json.dumps(plan, ensure_ascii=False), ARGS_CHAR_LIMIT), None
    more = len(plan) - len(items)
    if more > 0:
        items.append(f"… {more} more entries")
    open_, close = ("[", "]") if isinstance(plan, list) else ("{", "}")
    body = open_ + ("\n  " + ",\n  ".join(items) + "\n" if items else "") + close
    return shorten(body, ARGS_CHAR_LIMIT), count


def _ship_ref(entry: Any) -> Any:
    if not isinstance(entry, Mapping):
        return None
    ref = entry.get("ship", entry.get("id", entry.get("name")))
    return ref if isinstance(ref, int | str) else None


def format_arguments(raw: str) -> tuple[str, str]:
    """A tool call's raw JSON arguments as Markdown (a fenced block) and a short log (`17 ships`)."""
    if not raw.strip():
        return "*(no arguments)*", ""
    try:
        args = json.loads(raw)
    except (ValueError, RecursionError):
        return code_block(shorten(raw, ARGS_CHAR_LIMIT)), "arguments are not valid JSON"
    if not isinstance(args, dict):
        return code_block(shorten(json.dumps(args, ensure_ascii=False), ARGS_CHAR_LIMIT), "json"), ""
    if not args:
        return "*(no arguments)*", ""
    if "plan" not in args:
        return code_block(shorten(json.dumps(args, indent=2, ensure_ascii=False), ARGS_CHAR_LIMIT), "json"), ""
    plan, note = args["plan"], ""
    if isinstance(plan, str):
        decoded = _decode_plan_string(plan)
        if decoded is not plan and isinstance(decoded, list | dict):
            plan, note = decoded, "plan sent as a JSON string"
    body, count = format_plan(plan)
    others = "".join(f',\n"{k}": {shorten(json.dumps(v, ensure_ascii=False), 500)}'
                     for k, v in args.items() if k != "plan")
    log = ", ".join(x for x in (f"{count} ships" if count is not None else "", note) if x)
    return code_block('{"plan": ' + body + others + "}", "json"), log


def _result_error(event: Event) -> str | None:
    data = event.get("data")
    if isinstance(data, Mapping) and data.get("error"):
        return str(data["error"])
    step = event.get("step")
    if isinstance(step, Mapping) and isinstance(step.get("result"), Mapping) and step["result"].get("error"):
        return str(step["result"]["error"])
    return None


class ResultView(NamedTuple):
    """How one tool result shows: a title, a Markdown summary, the raw JSON (a fenced block or None) and a
    short verdict for the call's own title (empty when there is nothing to judge)."""

    title: str
    body: str
    raw: str | None
    verdict: str = ""


def format_result(event: Event, names: Mapping[int, str] | None = None) -> ResultView:
    """A tool result, summarised for its tool: check verdicts, the grade of a submit, errors marked."""
    name = event.get("name")
    data = event.get("data")
    text = str(event.get("text") or "")
    if isinstance(data, Mapping | list):
        raw = code_block(shorten(compact_json(data), RAW_CHAR_LIMIT), "json")
    else:
        raw = code_block(shorten(text, RAW_CHAR_LIMIT)) if text else None
    error = _result_error(event)
    if error is not None:
        body = f"**⚠️ Error:** {escape_cell(shorten(error, 2_000))}"
        if isinstance(data, Mapping) and data.get("checks_left") is not None:
            body += f"\n\nchecks left: {fmt_num(data['checks_left'])}"
        where = "answered by the loop" if event.get("local") else "from the server"
        return ResultView(f"⚠️ Error {where}", body, raw, "⚠️")
    if name == "check_plan" and isinstance(data, Mapping):
        return _check_summary(data, names, raw)
    if name == "submit_plan" and (isinstance(data, Mapping) or (event.get("metadata") or {}).get("grade")):
        return _submit_summary(event, data if isinstance(data, Mapping) else {}, names, raw)
    if name == "get_situation":
        body = escape_md(shorten(text, RAW_CHAR_LIMIT))
        return ResultView(f"🗺️ Situation text ({len(text):,} characters)", body, None)
    if data is None and text:
        return ResultView("Result", code_block(shorten(text, RAW_CHAR_LIMIT)), None)
    return ResultView("Result", raw or "*(empty)*", None)


def _check_summary(data: Mapping[str, Any], names: Mapping[int, str] | None, raw: str | None) -> ResultView:
    violations = list(data.get("violations") or [])
    ships = {v.get("ship") for v in violations}
    feasible = bool(data.get("feasible"))
    checks_left = data.get("checks_left")
    left = f" · {fmt_num(checks_left)} checks left" if checks_left is not None else ""
    if feasible:
        title = f"✅ Feasible · cost {fmt_num(data.get('cost'))}{left}"
    else:
        title = f"❌ Infeasible · {len(violations)} violations on {len(ships)} ships{left}"
    lines = [f"**{'Feasible' if feasible else 'Infeasible'}** · {len(violations)} violations"]
    if data.get("cost") is not None:
        lines.append(f"- cost {fmt_num(data.get('cost'))} (delay {fmt_num(data.get('delay_cost'))}, "
                     f"{fmt_num(data.get('moves'))} moved ships)")
    lines += violation_lines(violations, limit=VIOLATIONS_SHOWN, names=names)
    for problem in list(data.get("entry_problems") or [])[:VIOLATIONS_SHOWN]:
        lines.append(f"- entry problem: {escape_cell(problem)}")
    if checks_left is not None:
        lines.append(f"- checks left: {fmt_num(checks_left)}")
    return ResultView(title, "\n".join(lines), raw, "✅" if feasible else "❌")


def _submit_summary(event: Event, data: Mapping[str, Any], names: Mapping[int, str] | None,
                    raw: str | None) -> ResultView:
    metadata = event.get("metadata") or {}
    grade = metadata.get("grade") if isinstance(metadata.get("grade"), Mapping) else None
    reward = grade.get("reward") if grade else data.get("reward", event.get("reward"))
    feasible = bool((grade or data).get("feasible"))
    title = f"🏁 Graded · {grade_words(feasible, reward)}"
    if grade:
        lines = grade_lines(grade, rubric=metadata.get("rubric"), ships=len(names) if names else None)
    else:
        lines = [f"**{'✅' if feasible else '❌'} {grade_words(feasible, reward)}**"]
        if data.get("cost") is not None:
            lines.append(f"- cost {fmt_num(data.get('cost'))}")
        lines += violation_lines(list(data.get("violations") or []), limit=VIOLATIONS_SHOWN, names=names)
    return ResultView(title, "\n".join(lines), raw, f"🏁 reward {fmt_num(reward)}")


__all__ = ["ChatBuilder", "ResultView", "chat_messages", "format_arguments", "format_plan", "format_result"]
