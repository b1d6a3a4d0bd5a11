"""Short Markdown summaries of an episode: the live status line, the grade panel and the token usage."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agent.session import EnvError
from rollouts.record import Record
from viewer.markdown import escape_cell, fmt_num, shorten

# The loop records a failure as `<exception class>: <message>` (agent/loop.py): the class says whose it was.
_FAILURE = re.compile(r"^([A-Za-z_][\w.]*): ")

# --- the live status line ------------------------------------------------------------------------------------

def status_line(events: Sequence[Mapping[str, Any]], *, tokens: bool = True) -> str:
    """One line for the top of the Run tab: turn k of N, tokens, elapsed seconds, state.

    Scans from the newest event backwards and stops once it knows everything, so calling it after every event
    of a long run stays cheap.
    """
    turn = max_turns = None
    usage: Mapping[str, Any] | None = None
    elapsed: float | None = None
    finished: Record | None = None
    failed = stopping = started = False
    for event in reversed(events):
        kind = event.get("type")
        if elapsed is None and isinstance(event.get("t"), int | float):
            elapsed = float(event["t"])
        if kind == "episode_finished" and finished is None:
            finished = Record(event.get("record") or {})
        elif kind == "error":
            failed = True
        elif kind == "note" and event.get("kind") == "stopped":
            stopping = True
        elif kind == "turn_finished" and usage is None:
            usage = event.get("usage_total") or {}
        elif kind == "turn_started" and turn is None:
            turn, max_turns = event.get("turn"), event.get("max_turns")
        elif kind == "episode_started":
            started = True
            max_turns = max_turns or (event.get("limits") or {}).get("max_turns")
            break
    if finished is not None:
        usage = finished.usage
        elapsed = finished.seconds if finished.seconds is not None else elapsed
        turn = finished.turns if finished.turns is not None else turn
        max_turns = max_turns or finished.max_turns

    parts = []
    if turn is not None:
        parts.append(f"turn {turn} of {max_turns}" if max_turns else f"turn {turn}")
    if usage and tokens:
        parts.append(f"{int(usage.get('input_tokens') or 0):,} in / {int(usage.get('output_tokens') or 0):,} out tokens")
    if elapsed is not None:
        parts.append(f"{elapsed:.0f} s")
    parts.append(_state(finished, failed=failed, stopping=stopping, started=started))
    return " · ".join(parts)


def _state(finished: Record | None, *, failed: bool, stopping: bool, started: bool) -> str:
    if finished is not None:
        reason = finished.end_reason or "ended"
        if reason == "submitted":
            return f"**submitted** (reward {finished.reward:.4f})"
        if reason in ("stopped", "error"):
            return f"**{reason}**"
        return f"**ended** ({escape_cell(reason)})"
    if failed:
        return "**error**"
    if stopping:
        return "**stopping**"
    return "**running**" if started else "**starting**"


# --- the grade panel -----------------------------------------------------------------------------------------

def _is_record(value: Mapping[str, Any]) -> bool:
    return "final" in value or "messages" in value or "steps" in value


def grade_panel(rollout_or_grade: Record | Mapping[str, Any] | None, task: Mapping[str, Any] | None = None) -> str:
    """The grade of a rollout (a Record, or its JSON) or of a bare §5.4 grade dict, as Markdown.

    `task` (a full task, reference included) fills in the optimum and the naive cost when the grade lacks them.
    """
    if not isinstance(rollout_or_grade, Record) and not rollout_or_grade:
        return "### Grade\nNo grade yet."
    rubric: Mapping[str, Any] | None = None
    ships: int | None = _ship_count(task)
    if isinstance(rollout_or_grade, Record) or _is_record(rollout_or_grade):
        view = Record.of(rollout_or_grade)
        grade, rubric, summary = view.grade, view.rubric, view.task
        ships = ships or _int_or_none(summary.get("ships"))
        if not grade:
            reason = escape_cell(view.end_reason or "not submitted")
            return f"### Grade\n**Not submitted** · reward {fmt_num(view.reward)} · ended: {reason}"
        reference = {**summary, **_reference(task)}
    else:
        grade = rollout_or_grade
        reference = _reference(task)
    return "### Grade\n" + "\n".join(grade_lines(grade, rubric=rubric, ships=ships, reference=reference))


def grade_lines(grade: Mapping[str, Any], *, rubric: Mapping[str, Any] | None = None, ships: int | None = None,
                reference: Mapping[str, Any] | None = None, max_violations: int = 5) -> list[str]:
    """The grade as Markdown lines (shared by the grade panel and the chat's submit result)."""
    reference = reference or {}
    feasible = bool(grade.get("feasible"))
    cost = grade.get("cost")
    optimal = _first_int(grade.get("optimal_cost"), reference.get("optimal_cost"))
    naive = _first_int(grade.get("naive_cost"), reference.get("naive_cost"))
    standing = standing_words(cost, optimal, naive) if feasible else None
    lines = [f"**{'✅' if feasible else '❌'} {grade_words(feasible, grade.get('reward'))}**"
             + (f" · {standing}" if standing else "")]
    if feasible and cost is not None:
        detail = f"delay {fmt_num(grade.get('delay_cost'))}, {fmt_num(grade.get('moves'))} moved ships"
        lines.append(f"- cost **{fmt_num(cost)}** ({detail})")
        if optimal is not None:
            above = cost - optimal
            if above <= 0:
                lines.append(f"- optimum {fmt_num(optimal)}: at the optimum")
            else:
                pct = f" ({100 * above / optimal:+.1f} %)" if optimal else ""
                lines.append(f"- optimum {fmt_num(optimal)}: {above:,} above{pct}")
        if naive is not None:
            lines.append(f"- naive re-plan {fmt_num(naive)}{_against_naive(cost, optimal, naive)}")
    elif optimal is not None or naive is not None:
        lines.append(f"- optimum {fmt_num(optimal)} · naive re-plan {fmt_num(naive)}")
    clean = grade.get("clean_fraction")
    problems = list(grade.get("parse_problems") or [])
    if clean is not None:
        # The fraction's denominator counts each parse problem as one more (never clean) ship.
        count = f"{round(clean * (ships + len(problems)))}/{ships} ships, " if ships else ""
        lines.append(f"- ships clean: {count}{fmt_num(clean)}")
    parts = dict(rubric or {})
    parts.setdefault("ships_clean", grade.get("clean_fraction"))
    parts.setdefault("cost_quality", grade.get("quality"))
    lines.append("- rubric: " + " · ".join(f"{escape_cell(k)} {fmt_num(v)}" for k, v in parts.items()))
    violations = list(grade.get("violations") or [])
    lines.append(f"- violations: {len(violations)}" + (f" · parse problems: {len(problems)}" if problems else ""))
    lines += [f"  - {escape_cell(p)}" for p in problems[:max_violations]]
    lines += violation_lines(violations, limit=max_violations, indent="  ")
    return lines


def violation_lines(violations: Iterable[Mapping[str, Any]], *, limit: int = 5, indent: str = "",
                    names: Mapping[int, str] | None = None) -> list[str]:
    """The first violations grouped by ship, one bullet per ship: `ship 3 STEEN: problem; problem`."""
    by_ship: dict[Any, list[str]] = {}
    for v in violations:
        by_ship.setdefault(v.get("ship"), []).append(str(v.get("problem", "")))
    lines = []
    for ship, problems in list(by_ship.items())[:limit]:
        name = f" {escape_cell(names[ship])}" if names and ship in names else ""
        lines.append(f"{indent}- ship {escape_cell(ship)}{name}: "
                     + "; ".join(escape_cell(p) for p in problems))
    if len(by_ship) > limit:
        lines.append(f"{indent}- … and {len(by_ship) - limit} more ships")
    return lines


def grade_words(feasible: bool, reward: Any) -> str:
    """A grade's badge: feasible or not, always with its reward ("feasible, reward 0.2"), since a plan that keeps
    every rule may still score little. The app's grade, the chat's and the share page's badge all say this."""
    return f"{'feasible' if feasible else 'infeasible'}, reward {fmt_num(reward)}"


def standing_words(cost: int | None, optimal: int | None, naive: int | None) -> str | None:
    """Where a feasible plan's cost stands, in the words a visitor reads at a glance: at the optimum, or better
    than, no better than or worse than the naive re-plan (None when the costs are not known)."""
    if cost is None:
        return None
    if optimal is not None and cost <= optimal:
        return "at the optimum"
    if naive is None:
        return None
    return ("better than the naive re-plan" if cost < naive else
            "no better than the naive re-plan" if cost == naive else "worse than the naive re-plan")


def _against_naive(cost: int, optimal: int | None, naive: int) -> str:
    """The naive re-plan's line after its cost: how much of its gap to the optimum the plan closed, or how much
    dearer the plan is (never a negative share)."""
    if cost > naive:
        return f": {cost - naive:,} cheaper than this plan"
    closed = gap_closed(cost, optimal, naive)
    return f": this plan closed {closed:.1f} % of its gap to the optimum" if closed is not None else ""


def gap_closed(cost: int | None, optimal: int | None, naive: int | None) -> float | None:
    """Percent of the way from the naive plan's cost to the optimum (100 at the optimum, 0 at naive, <0 worse)."""
    if cost is None or optimal is None or naive is None or naive == optimal:
        return None
    return 100.0 * (naive - cost) / (naive - optimal)


def _reference(task: Mapping[str, Any] | None) -> dict[str, Any]:
    ref = (task or {}).get("reference") or {}
    return {k: ref[k] for k in ("optimal_cost", "naive_cost") if ref.get(k) is not None}


def _ship_count(task: Mapping[str, Any] | None) -> int | None:
    ships = (task or {}).get("ships")
    return len(ships) if isinstance(ships, list) else _int_or_none(ships)


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _first_int(*values: Any) -> int | None:
    for value in values:
        if (number := _int_or_none(value)) is not None:
            return number
    return None


# --- failures ----------------------------------------------------------------------------------------------

def failure(message: str) -> tuple[str, str]:
    """Whose a recorded failure was and what it says, in a visitor's words: the berth server's (its session's
    EnvError: unreachable, refusing, answering nonsense) or else the model provider's, and the message without the
    exception's class name, which tells a visitor nothing (the record keeps it whole)."""
    message = str(message)
    match = _FAILURE.match(message)
    if match is None:
        return "provider", message
    name = match.group(1).rsplit(".", 1)[-1]
    return ("berth server" if name == EnvError.__name__ else "provider"), message[match.end():] or message


# --- usage ---------------------------------------------------------------------------------------------------

def usage_summary(rollout: Record | Mapping[str, Any], *, heading: bool = True) -> str:
    """Model, turns, tokens, time and checks of a rollout, plus its errors and provider switches.
    `heading`: the first line names the model and the task (a page whose header does so already leaves it out)."""
    view = Record.of(rollout)
    turns = view.turns
    in_tokens, out_tokens = view.usage["input_tokens"], view.usage["output_tokens"]
    lines = [
        f"**{escape_cell(view.model or 'unknown model')}** on {escape_cell(view.task_id or '?')}",
        f"- {fmt_num(turns)} turns · {view.checks_sent} checks · {fmt_num(view.seconds, 1)} s"
        f" · ended: {escape_cell(view.end_reason or '?')}",
    ]
    if in_tokens or out_tokens:  # a baseline or a person spends none: "0 in / 0 out" would only puzzle
        lines.append(f"- tokens: {in_tokens:,} in / {out_tokens:,} out"
                     + (f" ({out_tokens // turns:,} out per turn)" if isinstance(turns, int) and turns > 0 else ""))
    for switch in view.provider_switches:
        lines.append(f"- provider switch: {escape_cell(shorten(str(switch), 300))}")
    for err in view.errors:
        party, text = failure(str(err))
        lines.append(f"- ❌ {party} error: {escape_cell(shorten(text, 300))}")
    return "\n".join(lines if heading else lines[1:])
