"""Berth charts: one plan drawn as a time-space diagram of the quay (hours across, quay sections up).

Each ship is a rectangle from its berth hour to its departure over its sections, as the grader's checker sees
it (`berth_env.check`), so a chart never disagrees with a grade: ships with problems get a red outline, the
wind-waiting tail (work finished, waiting for a wind window to end) is drawn lighter, and the quay's fixed
facts are drawn behind: closed sections (grey), ships already alongside (dark, labelled), wind windows
(vertical bands, labelled with the ships they stop) and crane outages (a strip along the hour axis).

Figures stay light for 59-ship plans: rectangles are `layout.shapes` (one dict each, no per-ship traces); one
text trace per panel puts the ship ids at the rectangle centres and carries their hover, and one invisible-marker
trace does the same for the blocks. Shape names (`ship:3`, `tail:3`, `closed:1`, `alongside:0`, `wind:0`,
`outage:0`) say what each rectangle is, for tests and for callers that restyle.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from berth_env import PlanError, parse_plan
from berth_env import check as check_entries

SHIP_FILL = "#4C78A8"
MOVED_FILL = "#F58518"
VIOLATION_LINE = "#D62728"
CLOSED_FILL = "#B8B8B8"
ALONGSIDE_FILL = "#3A3A3A"
WIND_FILL = "rgba(90, 150, 220, 0.16)"
OUTAGE_FILL = "rgba(148, 103, 189, 0.55)"
TAIL_OPACITY = 0.35
PROBLEMS_IN_HOVER = 4
_WEEKS = re.compile(r"-w\d+x(\d+)-")


@dataclass
class PlanView:
    """One plan as the checker sees it, or why it cannot be drawn."""

    result: Any = None                 # berth_env CheckResult, None when the plan could not be read
    error: str | None = None           # PlanError text, or "no plan"
    entry_problems: list[str] = field(default_factory=list)


def read_plan(task: Mapping[str, Any], plan: Any, check: Any = None) -> PlanView:
    """Parse and check a plan (any form the model may send); a precomputed `check` result is used as is."""
    if check is not None:
        return PlanView(result=check)
    if plan is None:
        return PlanView(error="no plan")
    try:
        parsed = parse_plan(task, plan)
    except PlanError as exc:
        return PlanView(error=f"{exc.category}: {exc.message}")
    return PlanView(result=check_entries(task, parsed.entries), entry_problems=list(parsed.problems))


def _entries(task: Mapping[str, Any], plan: Any) -> dict[int, tuple]:
    if plan is None:
        return {}
    try:
        return dict(parse_plan(task, plan).entries)
    except PlanError:
        return {}


def moved_ships(task: Mapping[str, Any], plan: Any, previous: Any) -> set[int]:
    """Ships placed differently in `plan` than in `previous` (berth hour, section or cranes; or only in one)."""
    now, before = _entries(task, plan), _entries(task, previous)
    return {ship for ship in now.keys() | before.keys() if now.get(ship) != before.get(ship)}


def plan_steps(events_or_record: Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every plan the model sent to check_plan / submit_plan, in order: `{turn, tool, plan, result}` dicts.

    Takes a rollout record (its `steps`) or a list of events (the `step` of each tool_result).
    """
    if isinstance(events_or_record, Mapping):
        steps = events_or_record.get("steps") or []
        if isinstance(steps, str):  # upstream's published rollouts keep steps as JSON text
            steps = json.loads(steps)
    else:
        steps = [e.get("step") for e in events_or_record if e.get("type") == "tool_result"]
    return [dict(s) for s in steps if isinstance(s, Mapping)]


# --- hours as days ---------------------------------------------------------------------------------------------

def _week_start(task: Mapping[str, Any]) -> datetime | None:
    try:
        return datetime.strptime(str(task.get("week_start_utc")), "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return None


def _when(start: datetime | None, hour: int) -> str:
    if start is None:
        return f"h{hour}"
    return f"h{hour} ({(start + timedelta(hours=hour)).strftime('%a %H:%M')})"


def _horizon(task: Mapping[str, Any]) -> int:
    match = _WEEKS.search(str(task.get("task_id", "")))
    if match:
        return 168 * int(match.group(1))
    return max([int(s.get("due") or 0) for s in task.get("ships") or []] + [168])


# --- one panel -------------------------------------------------------------------------------------------------

@dataclass
class _Panel:
    shapes: list[dict] = field(default_factory=list)
    annotations: list[dict] = field(default_factory=list)
    traces: list[go.Scatter] = field(default_factory=list)
    x_extent: list[int] = field(default_factory=list)


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=False)


def _rect(name: str, x0: float, x1: float, y0: float, y1: float, xref: str, yref: str, **style: Any) -> dict:
    return {"type": "rect", "name": name, "xref": xref, "yref": yref, "x0": x0, "x1": x1, "y0": y0, "y1": y1,
            **style}


def _quay_facts(task: Mapping[str, Any], panel: _Panel, xref: str, yref: str, start: datetime | None,
                y_span: tuple[float, float]) -> None:
    """Closures, ships already alongside, wind windows and crane outages (the same for every plan).

    Bands are drawn in data coordinates over the whole section range (`y_span`), not in axis-domain
    coordinates: plotly.js 4 stops drawing "between"-layer shapes when a domain-referenced shape shares it.
    """
    bottom, top = y_span
    hover_x, hover_y, hover_text = [], [], []
    for i, block in enumerate(task.get("blocks") or []):
        alongside = block.get("kind") == "alongside"
        label = str(block.get("label") or block.get("kind") or "")
        panel.shapes.append(_rect(
            f"{'alongside' if alongside else 'closed'}:{i}", block["start"], block["end"],
            block["first"] - 0.5, block["last"] + 0.5, xref, yref, layer="below",
            fillcolor=ALONGSIDE_FILL if alongside else CLOSED_FILL, line={"width": 0},
            label={"text": _esc(label), "font": {"size": 10, "color": "white" if alongside else "#333"},
                   # a ship alongside for a few hours is a thin block: run its name along the quay
                   "textangle": -90 if block["end"] - block["start"] < 12 else 0}))
        panel.x_extent += [block["start"], block["end"]]
        hover_x.append((block["start"] + block["end"]) / 2)
        hover_y.append((block["first"] + block["last"]) / 2)
        what = f"already alongside, {block.get('cranes', 0)} cranes" if alongside else "closed"
        hover_text.append(f"<b>{_esc(label)}</b><br>{what}<br>sections {block['first']}–{block['last']}"
                          f"<br>{_when(start, block['start'])} – {_when(start, block['end'])}")
    if hover_x:
        panel.traces.append(go.Scatter(
            x=hover_x, y=hover_y, mode="markers", marker={"opacity": 0, "size": 12}, hovertext=hover_text,
            hoverinfo="text", showlegend=False, name="blocks", xaxis=xref, yaxis=yref))

    rules = task.get("rules") or {}
    for i, window in enumerate(rules.get("no_moves") or []):
        min_length = window.get("min_length") or 0
        who = f"ships ≥ {min_length} m" if min_length else "all ships"
        panel.shapes.append(_rect(f"wind:{i}", window["start"], window["end"], bottom, top, xref, yref,
                                  layer="below", fillcolor=WIND_FILL, line={"width": 0}))
        panel.annotations.append({
            "name": f"wind:{i}", "xref": xref, "yref": f"{yref} domain", "x": window["start"], "y": 1,
            "xanchor": "left", "yanchor": "top", "yshift": -14 * i, "showarrow": False,
            "text": f"💨 no moves, {who}: h{window['start']}–{window['end']}",
            "font": {"size": 10, "color": "#1f4e8c"}, "bgcolor": "rgba(255,255,255,0.7)"})
    pool = rules.get("crane_pool")
    for i, outage in enumerate(rules.get("crane_outages") or []):
        left = f" ({pool - outage['cranes']} available)" if isinstance(pool, int) else ""
        panel.shapes.append(_rect(f"outage:{i}", outage["start"], outage["end"], bottom, bottom + 0.35, xref,
                                  yref, layer="above", fillcolor=OUTAGE_FILL, line={"width": 0}))
        panel.annotations.append({
            "name": f"outage:{i}", "xref": xref, "yref": f"{yref} domain", "x": outage["start"], "y": 0.04,
            "xanchor": "left", "yanchor": "bottom", "showarrow": False,
            "text": f"🏗️ −{outage['cranes']} cranes{left}: h{outage['start']}–{outage['end']}",
            "font": {"size": 10, "color": "#5b3a8c"}, "bgcolor": "rgba(255,255,255,0.7)"})


def _ship_hover(task: Mapping[str, Any], sr: Any, start: datetime | None, moved_label: str | None) -> str:
    ships = task.get("ships") or []
    ship = ships[sr.ship] if 0 <= sr.ship < len(ships) else {}
    lines = [f"<b>{sr.ship} {_esc(ship.get('name', ''))}</b>",
             f"berths {_when(start, sr.berth_hour)} · sections {sr.section}–{sr.last_section}",
             (f"finishes {_when(start, sr.finish)} · waits for the wind · " if sr.departure > sr.finish else "")
             + f"departs {_when(start, sr.departure)}"]
    cranes = f"cranes {sr.cranes} · " if sr.cranes is not None else ""
    lines.append(f"{cranes}delay {sr.delay_h} h · cost {sr.cost}")
    if sr.moved:
        lines.append(f"off its planned section {ship.get('planned_section')} (+5)")
    if moved_label:
        lines.append(f"<i>{moved_label}</i>")
    problems = [text for _, text in sr.problems]
    lines += [f"⚠ {_esc(p)}" for p in problems[:PROBLEMS_IN_HOVER]]
    if len(problems) > PROBLEMS_IN_HOVER:
        lines.append(f"⚠ … {len(problems) - PROBLEMS_IN_HOVER} more problems")
    return "<br>".join(lines)


def _ships(task: Mapping[str, Any], view: PlanView, panel: _Panel, xref: str, yref: str, start: datetime | None,
           highlight: set[int], moved_label: str) -> None:
    if view.result is None:
        return
    xs, ys, ids, hover, colours = [], [], [], [], []
    for sr in view.result.ships.values():
        bad = bool(sr.problems)
        fill = MOVED_FILL if sr.ship in highlight else SHIP_FILL
        line = {"color": VIOLATION_LINE, "width": 3} if bad else {"color": "white", "width": 1}
        y0, y1 = sr.section - 0.5, sr.last_section + 0.5
        work_end = max(sr.berth_hour, min(sr.finish, sr.departure))
        # "between": above the grid and the quay facts, below the id labels and their hover.
        panel.shapes.append(_rect(f"ship:{sr.ship}", sr.berth_hour, work_end, y0, y1, xref, yref,
                                  fillcolor=fill, line=line, layer="between"))
        if sr.departure > work_end:
            panel.shapes.append(_rect(f"tail:{sr.ship}", work_end, sr.departure, y0, y1, xref, yref,
                                      fillcolor=fill, opacity=TAIL_OPACITY, layer="between",
                                      line={**line, "dash": "dot"}))
        panel.x_extent += [sr.berth_hour, sr.departure]
        xs.append((sr.berth_hour + sr.departure) / 2)
        ys.append((sr.section + sr.last_section) / 2)
        ids.append(str(sr.ship))
        colours.append(VIOLATION_LINE if bad else "white")
        hover.append(_ship_hover(task, sr, start, moved_label if sr.ship in highlight else None))
    if xs:
        panel.traces.append(go.Scatter(
            x=xs, y=ys, mode="text", text=ids, textfont={"size": 10, "color": colours}, hovertext=hover,
            hoverinfo="text", showlegend=False, name="ships", xaxis=xref, yaxis=yref))


def _verdict(view: PlanView, highlight: set[int], moved_label: str) -> str:
    if view.result is None:
        return "no plan yet" if view.error == "no plan" else f"plan could not be read ({view.error})"
    result = view.result
    if result.feasible and not view.entry_problems:
        text = f"feasible · cost {result.cost}"
    else:
        flagged = {v.get("ship") for v in result.violations}
        text = f"infeasible · {len(result.violations)} violations on {len(flagged)} ships"
    if view.entry_problems:
        text += f" · {len(view.entry_problems)} entry problems"
    if highlight:
        text += f" · {len(highlight)} {moved_label}"
    return text


def _y_span(task: Mapping[str, Any], views: Iterable[PlanView]) -> tuple[float, float]:
    """The section range to show: the quay, widened to any ship placed off it (so the mistake is visible)."""
    lows, highs = [int(task.get("first_section", 0))], [int(task.get("last_section", 0))]
    for view in views:
        if view.result is not None:
            lows += [sr.section for sr in view.result.ships.values()]
            highs += [sr.last_section for sr in view.result.ships.values()]
    return min(lows) - 0.5, max(highs) + 0.5


def _panel(task: Mapping[str, Any], view: PlanView, xref: str, yref: str, highlight: set[int],
           moved_label: str, y_span: tuple[float, float]) -> _Panel:
    panel = _Panel()
    start = _week_start(task)
    _quay_facts(task, panel, xref, yref, start, y_span)
    _ships(task, view, panel, xref, yref, start, highlight, moved_label)
    return panel


def _axes(task: Mapping[str, Any], panels: Sequence[_Panel], y_span: tuple[float, float]) -> tuple[dict, dict]:
    """Shared hour axis (ticks at midnight, labelled with days) and section axis for all panels."""
    xs = [x for p in panels for x in p.x_extent]
    x_lo, x_hi = min([0, *xs]), max([_horizon(task), *xs])
    start = _week_start(task)
    ticks = list(range(0, x_hi + 1, 24))
    # A gridline every midnight; past two weeks only every other day is labelled, so labels stay level.
    every = 1 if len(ticks) <= 15 else 2
    labels = [("" if i % every else (start + timedelta(hours=h)).strftime("%a %d %b") if start else f"h{h}")
              for i, h in enumerate(ticks)]
    day0 = start.strftime("%a %d %b %Y") if start else "hour 0"
    xaxis = {"range": [x_lo - 2, x_hi + 2], "tickvals": ticks, "ticktext": labels, "tickangle": 0,
             "zeroline": False, "showgrid": True, "gridcolor": "#e6e6e6"}
    yaxis = {"range": list(y_span), "dtick": 1 if y_span[1] - y_span[0] <= 23 else 2, "zeroline": False,
             "title": {"text": "quay section"}, "showgrid": False}
    xaxis["title"] = {"text": f"hour (0 = {day0} 00:00 UTC)"}
    return xaxis, yaxis


def _legend(has_tail: bool, has_violation: bool, highlight_label: str | None) -> list[go.Scatter]:
    items = [("ship", SHIP_FILL, "white")]
    if highlight_label:
        items.append((highlight_label, MOVED_FILL, "white"))
    if has_violation:
        items.append(("has a problem", "white", VIOLATION_LINE))
    if has_tail:
        items.append(("waiting for the wind", "rgba(76,120,168,0.35)", "white"))
    items += [("closed", CLOSED_FILL, CLOSED_FILL), ("already alongside", ALONGSIDE_FILL, ALONGSIDE_FILL)]
    return [go.Scatter(x=[None], y=[None], mode="markers", name=name, hoverinfo="skip",
                       marker={"symbol": "square", "size": 12, "color": fill, "line": {"color": edge, "width": 2}})
            for name, fill, edge in items]


def _has(panels: Sequence[_Panel], prefix: str, *, red: bool = False) -> bool:
    for p in panels:
        for s in p.shapes:
            if s["name"].startswith(prefix) and (not red or s["line"].get("color") == VIOLATION_LINE):
                return True
    return False


def _layout(title: str, height: int) -> dict:
    return {"title": {"text": _esc(title), "font": {"size": 14}, "x": 0.01}, "height": height,
            "margin": {"l": 60, "r": 20, "t": 60, "b": 100}, "plot_bgcolor": "white", "hovermode": "closest",
            "legend": {"orientation": "h", "yanchor": "top", "y": -0.2 * 480 / height, "font": {"size": 10}}}


def berth_chart(task: Mapping[str, Any], plan: Any, *, check: Any = None, previous_plan: Any = None,
                title: str | None = None, height: int = 480) -> go.Figure:
    """The berth chart of one plan (any form the model may send; None for "no plan yet").

    `check`: a precomputed `berth_env.check` result for the plan. `previous_plan`: ships placed differently from
    it are filled orange. An unreadable plan gives a chart of the quay without ships, saying so in the title.
    """
    view = read_plan(task, plan, check)
    highlight = moved_ships(task, plan, previous_plan) if previous_plan is not None and view.result else set()
    moved_label = "moved since the previous plan"
    y_span = _y_span(task, [view])
    panel = _panel(task, view, "x", "y", highlight, moved_label, y_span)
    xaxis, yaxis = _axes(task, [panel], y_span)
    heading = title if title is not None else f"{task.get('task_id', '')} · {_verdict(view, highlight, 'moved')}"
    layout = {**_layout(heading, height), "xaxis": xaxis, "yaxis": yaxis, "shapes": panel.shapes,
              "annotations": panel.annotations}
    legend = _legend(_has([panel], "tail:"), _has([panel], "ship:", red=True), moved_label if highlight else None)
    return go.Figure(data=[*panel.traces, *legend], layout=layout)


def side_by_side(task: Mapping[str, Any], plan_a: Any, plan_b: Any, *, titles: tuple[str, str] = ("plan A", "plan B"),
                 check_a: Any = None, check_b: Any = None, height: int = 820) -> go.Figure:
    """Two plans of one task stacked on a shared hour axis (e.g. the model's final plan over the optimal plan).

    Ships placed differently between the two are filled orange in both.
    """
    views = (read_plan(task, plan_a, check_a), read_plan(task, plan_b, check_b))
    differ = moved_ships(task, plan_a, plan_b)
    label = "placed differently"
    y_span = _y_span(task, views)
    panels = [_panel(task, views[0], "x", "y", differ, label, y_span),
              _panel(task, views[1], "x2", "y2", differ, label, y_span)]
    subtitles = [f"{_esc(t)} · {_esc(_verdict(v, set(), label))}" for t, v in zip(titles, views, strict=True)]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1, subplot_titles=subtitles)
    xaxis, yaxis = _axes(task, panels, y_span)
    # make_subplots placed the subplot titles as annotations already; keep them and add ours.
    annotations = [*fig.layout.annotations, *panels[0].annotations, *panels[1].annotations]
    heading = f"{task.get('task_id', '')} · {len(differ)} ships placed differently"
    fig.update_layout(**_layout(heading, height), shapes=panels[0].shapes + panels[1].shapes,
                      annotations=annotations)
    fig.update_xaxes(**{k: v for k, v in xaxis.items() if k != "title"})
    fig.update_xaxes(title=xaxis["title"], row=2, col=1)
    fig.update_yaxes(**yaxis)
    fig.add_traces([*panels[0].traces, *panels[1].traces])
    fig.add_traces(_legend(_has(panels, "tail:"), _has(panels, "ship:", red=True), label if differ else None))
    return fig
