"""Berth charts: one renderer for every plan the app draws (the task preview, each live draft, a stored rollout,
a compare, the optimum). A plan is a time-space diagram of the quay: hours across, quay sections up.

Each ship is drawn as the grader's checker sees it (`berth_env.check`), so a chart never disagrees with a grade:
ships with problems are outlined red with the rule they break on hover; a ship the plan moved off its published
place leaves a faint outline there with an arrow to where it is now; ships changed since the previous draft are
orange; late ships, priority and emergency ships carry a mark; the wind-waiting tail (work done, waiting for a
wind window to end) is lighter. Behind them: closed sections, ships already alongside, wind windows and crane
outages; below, on crane-rule tasks, the cranes in use against the cranes available, hour by hour.

The layers are drawn by viewer/chart_layers.py; this module reads the plan, sizes the axes and assembles figures.
On a narrow screen the chart keeps a minimum width and scrolls sideways (app CSS `.berth-chart`), never squeezed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from berth_env import PlanError, parse_plan
from berth_env import check as check_entries
from berth_env.baselines import published_plan
from berth_env.rules import is_crane_task
from viewer.chart_layers import (
    ALONGSIDE_FILL,
    CLOSED_FILL,
    MOVED_FILL,
    OUTAGE_FILL,
    PLOT_HEIGHT_PX,
    PLOT_WIDTH_PX,
    SHIP_FILL,
    VIOLATION_LINE,
    WIND_FILL,
    Panel,
    Scale,
    crane_series,
    draw_blocks,
    draw_marks,
    draw_published,
    draw_ships,
    draw_weather_and_cranes,
    esc,
    week_start,
)

__all__ = ["MOVED_FILL", "SHIP_FILL", "VIOLATION_LINE", "PlanView", "berth_chart", "moved_ships", "optimum_chart",
           "plan_steps", "preview_chart", "read_plan", "side_by_side", "step_chart"]

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
    """Every plan sent to check_plan / submit_plan, in order: `{turn, tool, plan, result}` dicts.

    Takes a rollout record (its `steps`) or a list of events (the `step` of each tool_result).
    """
    if isinstance(events_or_record, Mapping):
        steps = events_or_record.get("steps") or []
        if isinstance(steps, str):  # upstream's published rollouts keep steps as JSON text
            steps = json.loads(steps)
    else:
        steps = [e.get("step") for e in events_or_record if e.get("type") == "tool_result"]
    return [dict(s) for s in steps if isinstance(s, Mapping)]


# -- sizes -------------------------------------------------------------------------------------------------------

def _horizon(task: Mapping[str, Any]) -> int:
    match = _WEEKS.search(str(task.get("task_id", "")))
    if match:
        return 168 * int(match.group(1))
    return max([int(s.get("due") or 0) for s in task.get("ships") or []] + [168])


def _y_span(task: Mapping[str, Any], views: Iterable[PlanView]) -> tuple[float, float]:
    """The section range to show: the quay, widened to any ship placed off it (so the mistake is visible)."""
    lows, highs = [int(task.get("first_section", 0))], [int(task.get("last_section", 0))]
    for view in views:
        if view.result is not None:
            lows += [sr.section for sr in view.result.ships.values()]
            highs += [sr.last_section for sr in view.result.ships.values()]
    return min(lows) - 0.5, max(highs) + 0.5


def _scale(task: Mapping[str, Any], y_span: tuple[float, float]) -> Scale:
    return Scale(PLOT_WIDTH_PX / max(1, _horizon(task) + 4), PLOT_HEIGHT_PX / max(1.0, y_span[1] - y_span[0]))


def _axes(task: Mapping[str, Any], panels: Sequence[Panel], y_span: tuple[float, float]) -> tuple[dict, dict]:
    """The hour axis (a gridline every midnight, labelled with days) and the section axis, shared by all panels."""
    xs = [x for p in panels for x in p.x_extent]
    x_lo, x_hi = min([0, *xs]), max([_horizon(task), *xs])
    start = week_start(task)
    ticks = list(range(0, x_hi + 1, 24))
    # A day label takes about 80 px; on longer tasks only every other (or third) midnight is labelled.
    every = max(1, -(-len(ticks) * 80 // PLOT_WIDTH_PX))
    labels = [("" if i % every else (start + timedelta(hours=h)).strftime("%a %d %b") if start else f"h{h}")
              for i, h in enumerate(ticks)]
    day0 = start.strftime("%a %d %b %Y") if start else "hour 0"
    xaxis = {"range": [x_lo - 2, x_hi + 2], "tickvals": ticks, "ticktext": labels, "tickangle": 0,
             "zeroline": False, "showgrid": True, "gridcolor": "#e6e6e6",
             "title": {"text": f"hour (0 = {day0} 00:00 UTC)", "font": {"size": 11}}}
    yaxis = {"range": list(y_span), "dtick": 1 if y_span[1] - y_span[0] <= 23 else 2, "zeroline": False,
             "title": {"text": "quay section", "font": {"size": 11}}, "showgrid": False, "fixedrange": True}
    return xaxis, yaxis


# -- panels and figures ------------------------------------------------------------------------------------------

def _panel(task: Mapping[str, Any], view: PlanView, xref: str, yref: str, highlight: set[int], changed_label: str,
           y_span: tuple[float, float], *, published: bool) -> Panel:
    panel = Panel(xref, yref)
    draw_weather_and_cranes(task, panel, y_span)
    draw_blocks(task, panel)
    if view.result is not None:
        draw_ships(task, view.result, panel, _scale(task, y_span), highlight, changed_label)
        if published:
            draw_published(task, view.result, panel)
        draw_marks(task, view.result, panel)
    return panel


def _verdict(view: PlanView, highlight: set[int], changed_label: str) -> str:
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
        text += f" · {len(highlight)} {changed_label}"
    return text


_LEGEND = {  # entry -> (label, fill, edge)
    "ship": ("ship", SHIP_FILL, "white"),
    "changed": (None, MOVED_FILL, "white"),
    "problem": ("breaks a rule (hover for which)", "white", VIOLATION_LINE),
    "tail": ("waiting for the wind", "rgba(76,120,168,0.35)", "white"),
    "closed": ("closed", CLOSED_FILL, CLOSED_FILL),
    "alongside": ("already alongside", ALONGSIDE_FILL, ALONGSIDE_FILL),
    "wind": ("no moves (wind)", WIND_FILL, "rgba(90,150,220,0.5)"),
    "outage": ("cranes out of service", OUTAGE_FILL, OUTAGE_FILL),
}


def _legend(panels: Sequence[Panel], changed_label: str) -> list[go.Scatter]:
    wanted = set().union(*(p.legend for p in panels))
    wanted.add("ship")
    items = []
    for key, (label, fill, edge) in _LEGEND.items():
        if key in wanted:
            items.append(go.Scatter(
                x=[None], y=[None], mode="markers", name=label or changed_label, hoverinfo="skip",
                marker={"symbol": "square", "size": 12, "color": fill, "line": {"color": edge, "width": 2}}))
    return items


def _layout(title: str, height: int) -> dict:
    return {"title": {"text": esc(title), "font": {"size": 13}, "x": 0.01}, "height": height,
            "margin": {"l": 56, "r": 16, "t": 48, "b": 96}, "plot_bgcolor": "white", "hovermode": "closest",
            "dragmode": "pan", "legend": {"orientation": "h", "yanchor": "top", "y": -0.12 * 480 / height,
                                          "x": 0, "font": {"size": 10}}}


def _crane_traces(task: Mapping[str, Any], view: PlanView, x_hi: int) -> list[go.Scatter]:
    use, available = crane_series(task, view.result, x_hi)
    hours = list(range(x_hi))
    over = [h for h in hours if use[h] > available[h]]
    traces = [
        go.Scatter(x=hours, y=available, mode="lines", line={"shape": "hv", "color": "#5b3a8c", "dash": "dot"},
                   name="cranes available", xaxis="x2", yaxis="y2", hovertemplate="h%{x}: %{y} available<extra></extra>"),
        go.Scatter(x=hours, y=use, mode="lines", line={"shape": "hv", "color": SHIP_FILL, "width": 1.5},
                   fill="tozeroy", fillcolor="rgba(76,120,168,0.15)", name="cranes in use", xaxis="x2", yaxis="y2",
                   hovertemplate="h%{x}: %{y} in use<extra></extra>")]
    if over:
        traces.append(go.Scatter(
            x=over, y=[use[h] for h in over], mode="markers", marker={"color": VIOLATION_LINE, "size": 5},
            name="more cranes than available", xaxis="x2", yaxis="y2",
            hovertemplate="h%{x}: %{y} in use, over the limit<extra></extra>"))
    return traces


def berth_chart(task: Mapping[str, Any], plan: Any, *, check: Any = None, previous_plan: Any = None,
                title: str | None = None, height: int | None = None, published: bool = True,
                cranes: bool = True, highlight: set[int] | None = None,
                highlight_label: str = "changed since the previous draft") -> go.Figure:
    """The berth chart of one plan (any form the model may send; None for "no plan yet").

    `check`: a precomputed `berth_env.check` result for the plan. `previous_plan`: ships placed differently from
    it are filled orange (or give the ships to fill as `highlight`, named `highlight_label` in the legend).
    `published`: outline and arrow where the published plan had each moved ship. `cranes`: the crane panel under
    the quay (crane-rule tasks). An unreadable plan gives the quay without ships, saying so.
    """
    view = read_plan(task, plan, check)
    if highlight is None:
        highlight = moved_ships(task, plan, previous_plan) if previous_plan is not None and view.result else set()
    changed_label = highlight_label
    y_span = _y_span(task, [view])
    panel = _panel(task, view, "x", "y", highlight, changed_label, y_span, published=published)
    xaxis, yaxis = _axes(task, [panel], y_span)
    heading = title if title is not None else f"{task.get('task_id', '')} · {_verdict(view, highlight, 'changed')}"
    with_cranes = cranes and is_crane_task(task)
    height = height or (540 if with_cranes else 460)
    legend = _legend([panel], changed_label)
    if not with_cranes:
        layout = {**_layout(heading, height), "xaxis": xaxis, "yaxis": yaxis, "shapes": panel.shapes,
                  "annotations": panel.annotations}
        return go.Figure(data=[*panel.traces, *legend], layout=layout)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.8, 0.2], vertical_spacing=0.05)
    fig.update_layout(**_layout(heading, height), shapes=panel.shapes, annotations=panel.annotations)
    fig.update_xaxes(**{k: v for k, v in xaxis.items() if k != "title"}, row=1, col=1)
    fig.update_xaxes(**xaxis, row=2, col=1)
    fig.update_yaxes(**yaxis, row=1, col=1)
    fig.update_yaxes(title={"text": "cranes", "font": {"size": 11}}, fixedrange=True, rangemode="tozero",
                     showgrid=True, gridcolor="#eeeeee", row=2, col=1)
    fig.add_traces([*panel.traces, *_crane_traces(task, view, int(xaxis["range"][1])), *legend])
    return fig


def side_by_side(task: Mapping[str, Any], plan_a: Any, plan_b: Any, *, titles: tuple[str, str] = ("plan A", "plan B"),
                 check_a: Any = None, check_b: Any = None, height: int = 820) -> go.Figure:
    """Two plans of one task stacked on a shared hour axis (two rollouts, or a plan over the optimum).

    Only the ships placed differently between the two are highlighted (orange in both); the rest stay blue.
    """
    views = (read_plan(task, plan_a, check_a), read_plan(task, plan_b, check_b))
    differ = moved_ships(task, plan_a, plan_b)
    label = "placed differently"
    y_span = _y_span(task, views)
    panels = [_panel(task, views[0], "x", "y", differ, label, y_span, published=False),
              _panel(task, views[1], "x2", "y2", differ, label, y_span, published=False)]
    subtitles = [f"{esc(t)} · {esc(_verdict(v, set(), label))}" for t, v in zip(titles, views, strict=True)]
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
    for trace in panels[1].traces:  # the lower panel's marks share the upper one's legend entries
        trace.showlegend = False
    fig.add_traces([*panels[0].traces, *panels[1].traces])
    fig.add_traces(_legend(panels, label))
    return fig


# -- the charts the screens ask for ------------------------------------------------------------------------------

def preview_chart(task: Mapping[str, Any]) -> go.Figure:
    """The task as published: every ship where the port planned it, with what the disruptions broke in red."""
    return berth_chart(task, published_plan(task), published=False,
                       title=f"The published plan, before any fix · {_verdict(read_plan(task, published_plan(task)), set(), '')}")


def step_chart(task: Mapping[str, Any] | None, steps: Sequence[Mapping[str, Any]], index: int,
               **options: Any) -> go.Figure | None:
    """Draft `index` of a rollout's checked and submitted plans, with the changes since the draft before it.

    `options` go to `berth_chart` (e.g. a smaller `height`, no crane panel)."""
    if task is None or not steps:
        return None
    index = max(0, min(index, len(steps) - 1))
    step = steps[index]
    previous = steps[index - 1].get("plan") if index > 0 else None
    verdict = "submitted" if step.get("tool") == "submit_plan" else "checked"
    turn = f" in turn {step.get('turn')}" if step.get("turn") is not None else ""
    view = read_plan(task, step.get("plan"))
    summary = _verdict(view, moved_ships(task, step.get("plan"), previous) if previous is not None else set(),
                       "changed")
    return berth_chart(task, step.get("plan"), previous_plan=previous,
                       title=f"Draft {index + 1} of {len(steps)} ({verdict}{turn}) · {summary}", **options)


def optimum_chart(task: Mapping[str, Any] | None, last_plan: Any = None, *, label: str = "the last plan") -> Any:
    """The last plan over the task's proven optimum (ships placed differently highlighted), or the optimum alone."""
    reference = (task or {}).get("reference") or {}
    if task is None or not reference.get("optimal_plan"):
        return None
    optimum = f"proven optimum (cost {reference.get('optimal_cost')})"
    if last_plan is None:
        return berth_chart(task, reference["optimal_plan"], published=False, title=optimum)
    return side_by_side(task, last_plan, reference["optimal_plan"], titles=(label, optimum))

