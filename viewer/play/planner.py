"""The Play tab's plan editor: the berth chart itself, where a person drags a ship along the hours and the quay,
changes its cranes, locks it, and undoes; the plan table (plan_table.py) is a second view of the same draft.

The chart is the one chart scene's SVG output (viewer/chart/svg.py, its ships tagged `data-ship`, its plot area
`data-plot`); the page only moves the dragged ship's shapes while the pointer moves (planner.js). On each drop
the page asks `draft_problems` (a `server_functions` call) for the draft's rule problems, found by berth_env's one
checker, and the chart drawn again with them: overlapping and rule-breaking ships outlined red, the ships before
their arrival marked, the moved-ship count. The cost is left out (title and hovers): `check_plan` stays the only
source of cost and reward, with its budget, as for a model.

The component's value is JSON text: what the server drew (`svg`, `problems`, `summary`, the task's `ships` and
quay) and the draft (`plan`, `start`, `locked`). The page sends back `{task_id, plan, locked}` with its `edit`
event; `edited_plan` reads that like any plan a visitor sends (the one size limit, the plan parser).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import gradio as gr

from agent.limits import InputTooLarge, check_input
from berth_env import PlanError, canonical_plan, parse_plan
from berth_env import check as check_entries
from berth_env.baselines import published_plan
from berth_env.rules import is_crane_task, move_cap
from viewer.chart import berth_scene, moved_ships
from viewer.chart.scene import clean, tip
from viewer.chart.svg import to_svg

JS = Path(__file__).with_name("planner.js").read_text(encoding="utf-8")
# What a person had while playing, written into the rollout (record["player"]["aids"]): the board can tell a plan
# made with the live rule problems from one made with the table alone.
AIDS = ("chart_editor", "live_rule_problems")
PROBLEMS_LISTED = 8

TEMPLATE = """<div class="pl">
<div class="pl-bar" role="toolbar" aria-label="Plan editor">
<button type="button" data-act="undo" title="Undo (Ctrl+Z)">↶ Undo</button>
<button type="button" data-act="redo" title="Redo (Ctrl+Shift+Z)">↷ Redo</button>
<button type="button" data-act="reset" title="Back to the plan you started from">⟲ Reset</button>
<button type="button" data-act="zoom-" title="See more of the week" aria-label="zoom out on the week">− zoom</button>
<button type="button" data-act="zoom+" title="Zoom in on the week (then scroll it sideways)"
 aria-label="zoom in on the week">+ zoom</button>
<span class="pl-gap"></span>
<button type="button" data-act="lock" title="Lock the selected ship (L): it will not move">🔒 Lock</button>
<button type="button" data-act="cranes-" title="One crane less (-)" aria-label="one crane less">− crane</button>
<button type="button" data-act="cranes+" title="One crane more (+)" aria-label="one crane more">+ crane</button>
</div>
<div class="pl-nudge" role="group" aria-label="Move the selected ship">
<button type="button" data-act="h-6" aria-label="6 hours earlier">«6h</button>
<button type="button" data-act="h-1" aria-label="1 hour earlier">‹1h</button>
<button type="button" data-act="h+1" aria-label="1 hour later">1h›</button>
<button type="button" data-act="h+6" aria-label="6 hours later">6h»</button>
<button type="button" data-act="s+1" aria-label="one section up the quay">▲ sect.</button>
<button type="button" data-act="s-1" aria-label="one section down the quay">▼ sect.</button>
</div>
<div class="pl-status" role="status" aria-live="polite"></div>
<div class="pl-msg" aria-live="assertive"></div>
<div class="pl-chart"></div>
<div class="pl-float" aria-hidden="true"></div>
<ul class="pl-problems" aria-label="What breaks in the draft"></ul>
</div>"""

CSS = """
#play-planner .pl {position: relative; font-size: 13px}
#play-planner .pl-bar, #play-planner .pl-nudge {display: flex; flex-wrap: wrap; gap: 4px; margin: 2px 0 4px}
#play-planner .pl-gap {flex: 1}
#play-planner button {border: 1px solid #c8ccd4; border-radius: 6px; background: #fff; padding: 4px 9px;
  min-height: 34px; cursor: pointer}
#play-planner button:disabled {opacity: .45; cursor: default}
#play-planner button[aria-pressed=true] {background: #fde7c8}
#play-planner .pl-chart {touch-action: pan-x pan-y; user-select: none; -webkit-user-select: none; overflow-x: auto}
/* --pl-zoom: the week's width over the box's (the zoom buttons); the chart scrolls sideways past 1 */
#play-planner .pl-chart svg {width: calc(100% * var(--pl-zoom, 1)); height: auto; display: block}
#play-planner .pl-chart rect[data-ship] {cursor: grab; touch-action: none}  /* a finger on a ship drags it */
/* What is drawn over the ships (crane outages, arrows, marks, labels) lets a press through to the ship below. */
#play-planner .pl-chart svg path, #play-planner .pl-chart svg text, #play-planner .pl-chart rect.outage {
  pointer-events: none}
#play-planner .pl-chart rect.pl-sel {stroke: #111; stroke-width: 3; stroke-dasharray: none}
#play-planner .pl-chart rect.pl-locked {stroke: #555; stroke-dasharray: 5,2; stroke-width: 2}
#play-planner .pl-chart .pl-dragging rect {cursor: grabbing; opacity: .85}
#play-planner .pl-float {position: absolute; display: none; pointer-events: none; background: #222; color: #fff;
  padding: 2px 6px; border-radius: 4px; font-size: 12px; white-space: nowrap; z-index: 5}
#play-planner .pl-status {margin-top: 4px}
#play-planner .pl-msg {color: #b3261e; min-height: 1em}
#play-planner .pl-problems {margin: 2px 0 0 18px; padding: 0; color: #8a1c14}
#play-planner .pl-problems li {cursor: pointer}
@media (max-width: 640px) {
  /* On a phone the nudge buttons sit under the chart, in reach of the thumb that tapped the ship. */
  #play-planner .pl {display: flex; flex-direction: column}
  #play-planner .pl-nudge {order: 5; margin-top: 6px}
  #play-planner .pl-problems {order: 6}
  #play-planner .pl-nudge button {flex: 1 1 30%; min-height: 42px}
}
"""


def draft_problems(task: Mapping[str, Any] | None, plan: Any, start: Any = None,
                   start_name: str = "the published plan") -> dict:
    """What the chart shows of a draft: its SVG (the one chart scene, costs left out), its rule problems as the
    checker finds them (`[{ship, rule, problem}]`) and a summary; `{"error"}` for a plan that cannot be read."""
    if task is None:
        return {"error": "This task is not served here any more: reload the page."}
    try:
        check_input(plan, "the plan")
        parsed = parse_plan(task, plan)
    except (InputTooLarge, PlanError) as exc:
        return {"error": str(getattr(exc, "message", exc))}
    result = check_entries(task, parsed.entries)
    problems = [{"ship": sr.ship, "rule": rule, "problem": text} for sr in result.ships.values()
                for rule, text in sr.problems]
    problems += [{"ship": ship, "rule": "MISSING", "problem": f"ship {ship} is missing from the plan"}
                 for ship in result.missing]
    flagged = sorted({p["ship"] for p in problems})
    moved = sum(1 for sr in result.ships.values() if sr.moved)
    changed = moved_ships(task, plan, start) if start is not None else set()
    head = "Your draft" if changed or start is None else f"{_first_upper(clean(start_name, 80))}, unchanged"
    title = (f"{head} · no rule broken: Check it for its cost" if not problems else
             f"{head} · {len(problems)} rule problems on {len(flagged)} ships · not checked")
    scene = berth_scene(task, plan, check=result, previous_plan=start, title=title,
                        highlight_label="changed from your start plan")
    _hide_costs(scene, task)
    summary = {"problems": len(problems), "ships_flagged": flagged, "moved": moved,
               "move_cap": move_cap(task), "entry_problems": list(parsed.problems)}
    return {"svg": to_svg(scene), "problems": problems, "summary": summary}


def _first_upper(text: str) -> str:
    """"The published plan" at the head of a title; a model's name keeps its own case."""
    return "The" + text[3:] if text.startswith("the ") else text


def _hide_costs(scene: Any, task: Mapping[str, Any]) -> None:
    """Each ship's hover cut to its name, place and problems: the scene's hover tells the ship's cost, which
    only check_plan may say."""
    ships = task.get("ships") or []
    for panel in scene.panels:
        for box in panel.boxes:
            kind, _, key = box.name.partition(":")
            if kind in ("ship", "tail") and key.isdigit() and int(key) < len(ships):
                kept = [line for line in box.tip if "cost" not in "".join(t for _, t in line)]
                box.tip = tuple(kept) or tip(f"ship {key}")
        for label in panel.labels:
            if label.group == "ships":
                label.tip = tip(f"ship {label.key}")


def planner_value(task: Mapping[str, Any] | None, plan: Any, *, start: Any, start_name: str,
                  locked: list[int] | None = None, note: str = "") -> str:
    """The editor's value for a draft: the drawn chart with its problems, and what the page needs to edit it."""
    if task is None:
        return ""
    drawn = draft_problems(task, plan, start, start_name)
    ships = [{"id": s["id"], "name": str(s.get("name", ""))[:40], "sections": int(s.get("sections") or 1),
              "arrival": s.get("arrival"), "min_cranes": s.get("min_cranes"), "max_cranes": s.get("max_cranes"),
              "std_cranes": s.get("std_cranes")} for s in task.get("ships") or []]
    state = {"task_id": task.get("task_id"), "plan": _plain(task, plan), "start": _plain(task, start),
             "start_name": start_name, "locked": sorted(set(locked or [])), "ships": ships,
             "quay": [int(task.get("first_section", 0)), int(task.get("last_section", 0))],
             "crane_rule": is_crane_task(task), "note": note, **drawn}
    return json.dumps(state, ensure_ascii=False)


def _plain(task: Mapping[str, Any], plan: Any) -> list[dict]:
    try:
        return canonical_plan(parse_plan(task, plan).entries)
    except PlanError:
        return []


def edited_plan(value: Any) -> tuple[str, list, list[int]]:
    """The task id, plan and locked ships the page sent with an `edit`; ValueError (plain text) when it is not
    one; the plan itself is read by the caller's parser, like any plan a visitor sends."""
    check_input(value, "the edited plan")
    try:
        data = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        raise ValueError("the editor sent something that is not JSON") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("plan"), list):
        raise ValueError("the editor sent no plan")
    locked = [s for s in data.get("locked") or [] if isinstance(s, int) and not isinstance(s, bool)]
    return str(data.get("task_id") or ""), data["plan"], locked


def build_planner(task_for: Callable[[str], Mapping[str, Any] | None], default_task: str) -> gr.HTML:
    """The editor component, opening on `default_task`; `task_for(task_id)` finds a served task (None if not)."""

    def draft(asked: Any) -> dict:
        """The page's call on every drop, `{task_id, plan, start}` (Gradio passes a server function's arguments
        as one value): the draft's rule problems and its chart (no cost)."""
        if not isinstance(asked, Mapping):
            return {"error": "the editor sent no draft"}
        task_id, plan, start = asked.get("task_id"), asked.get("plan"), asked.get("start")
        start_name = str(asked.get("start_name") or "the plan you started from")
        task = task_for(task_id.strip()) if isinstance(task_id, str) else None
        if isinstance(plan, str):
            try:
                check_input(plan, "the plan")
                plan = json.loads(plan)
            except (InputTooLarge, ValueError) as exc:
                return {"error": f"the plan cannot be read: {exc}"}
        if start is not None:
            try:
                check_input(start, "the start plan")
            except InputTooLarge as exc:
                return {"error": str(exc)}
        return draft_problems(task, plan, start, start_name)

    def opening(task_id: str) -> str:
        """The page's first call, once Play is opened: the task's published plan on the chart."""
        task = task_for(str(task_id or "").strip()) if isinstance(task_id, str) else None
        return _opening(task)

    # The value starts empty and the chart is drawn by `opening` when Play is first shown (gr.HTML runs
    # js_on_load as the tab mounts): the app's first paint carries no chart.
    return gr.HTML("", html_template=TEMPLATE, js_on_load=JS, server_functions=[draft, opening],
                   elem_id="play-planner", apply_default_css=False, task_id=default_task)


def _opening(task: Mapping[str, Any] | None) -> str:
    if task is None:
        return ""
    return planner_value(task, published_plan(task), start=published_plan(task), start_name="the published plan")


__all__ = ["AIDS", "CSS", "build_planner", "draft_problems", "edited_plan", "planner_value"]
