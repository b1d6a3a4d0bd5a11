"""A task in a few lines, for someone who has never seen the environment: where, how hard, what broke this week,
what the best and the do-nothing-clever plans cost. Markdown out; every text from the task is escaped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from viewer.markdown import escape_cell, fmt_num

# One line per disruption kind (PORTSIM_SPEC §1.7), in our own words; `ship(i)` names a ship.
_LINES: dict[str, Callable[[Mapping[str, Any], Callable[[Any], str]], str]] = {
    "closure": lambda d, ship: f"🚧 Sections {d['first']}–{d['last']} closed, h{d['start']}–{d['end']}"
                               + (f" ({escape_cell(d['reason'])})" if d.get("reason") else ""),
    "late": lambda d, ship: f"⏰ {ship(d['ship'])} arrives {d['hours']} h late",
    "bunching": lambda d, ship: f"🚢 {', '.join(ship(s) for s in d['ships'])} arrive together, "
                                f"h{d['start']}–{d['end']}",
    "crane_outage": lambda d, ship: f"🏗️ {d['cranes']} cranes out of service, h{d['start']}–{d['end']}",
    "gale": lambda d, ship: f"💨 Gale h{d['start']}–{d['end']}: long ships may not move; "
                            f"no ship may, h{d['core_start']}–{d['core_end']}",
    "divert": lambda d, ship: f"↪️ {len(d.get('ships') or [])} calls diverted here from quay "
                              f"{escape_cell(d.get('from_quay', '?'))}, h{d['start']}–{d['end']}",
    "extra": lambda d, ship: f"➕ {ship(d['ship'])}: an unscheduled call to fit in",
    "emergency": lambda d, ship: f"🚨 {ship(d['ship'])} must berth by h{d['deadline']}",
    "priority": lambda d, ship: f"⭐ {ship(d['ship'])} is priority: each hour late costs three times as much",
}

EXPLAINER = ("The port's published plan no longer works. The model must give every ship a berth hour, a quay "
             "section and a crane count so that no rule is broken, at the lowest cost (hours late plus ships "
             "moved off their planned section). It may test up to 10 drafts with `check_plan`; `submit_plan` is "
             "graded once against the proven optimum (reward 1.0).")


def disruption_lines(task: Mapping[str, Any]) -> list[str]:
    """What broke this week, one line each."""
    ships = task.get("ships") or []

    def ship(index: Any) -> str:
        name = ships[index].get("name", "") if isinstance(index, int) and 0 <= index < len(ships) else ""
        return f"ship {index} {escape_cell(name)}".rstrip()

    lines = []
    for item in task.get("disruptions") or []:
        render = _LINES.get(str(item.get("type")))
        try:
            lines.append(render(item, ship) if render else f"• {escape_cell(item.get('type'))}")
        except (KeyError, TypeError):
            lines.append(f"• {escape_cell(item.get('type'))} (details missing)")
    return lines


def task_brief(task: Mapping[str, Any] | None, task_id: str = "", *, broken: tuple[int, int] | None = None,
               explain: bool = True) -> str:
    """The task preview's text. `broken`: (violations, ships) of the published plan, when known. `explain`: with
    the paragraph on what the model must do (a page that says it another way leaves it out)."""
    if not task:
        return f"**{escape_cell(task_id)}**: this server does not publish the task, so there is no preview."
    reference = task.get("reference") or {}
    head = (f"**{escape_cell(task.get('task_id', task_id))}** · quay {escape_cell(task.get('quay', '?'))}"
            f" ({escape_cell(task.get('terminal', ''))}) · tier **{escape_cell(task.get('difficulty', '?'))}**"
            f" · {len(task.get('ships') or [])} ships · week of {escape_cell(str(task.get('week_start_utc', ''))[:10])}")
    lines = [head, *(["", EXPLAINER] if explain else []), "", "**What changed this week**"]
    lines += [f"- {line}" for line in disruption_lines(task)] or ["- nothing: the published plan may already work"]
    costs = []
    if reference.get("optimal_cost") is not None:
        costs.append(f"proven optimum **{fmt_num(reference['optimal_cost'])}**")
    if reference.get("naive_cost") is not None:
        costs.append(f"naive re-plan {fmt_num(reference['naive_cost'])}")
    if broken is not None and broken[0]:
        costs.append(f"the published plan breaks {broken[0]} rules on {broken[1]} ships (red below)")
    if costs:
        lines += ["", "Cost: " + " · ".join(costs)]
    return "\n".join(lines)
