"""Berth charts: one renderer for every plan the app draws (the task preview, each live draft, a stored rollout,
a compare, the optimum, the share page and its image). A plan is a time-space diagram of the quay: hours across,
quay sections up.

Each ship is drawn as the grader's checker sees it (`berth_env.check`), so a chart never disagrees with a grade:
ships with problems are outlined red with the rule they break on hover; a ship the plan moved off its published
place leaves a faint outline there with an arrow to where it is now; ships changed since the previous draft are
orange; late ships, priority and emergency ships carry a mark; the wind-waiting tail (work done, waiting for a
wind window to end) is lighter. Behind them: closed sections, ships already alongside, wind windows and crane
outages; below, on crane-rule tasks, the cranes in use against the cranes available, hour by hour.

One scene, two outputs: this module reads the plan, sizes the axes and assembles a scene (plain data,
viewer/chart/scene.py) from the layers (viewer/chart/layers.py); `*_scene` functions return it, the plotly
functions (`berth_chart`, `side_by_side`, `preview_chart`, `step_chart`, `optimum_chart`) draw it as the figure
the app shows (viewer/chart/figure.py), and `berth_chart_svg` / `chart_svg` draw it as an SVG document
(viewer/chart/svg.py). A chart is never squeezed or cut off: the SVG has a viewBox and scales to its box, and the
app's chart is drawn at a minimum width and scaled down the same way on a narrower box (`rollout_panel.FIT_CHARTS`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import plotly.graph_objects as go

from berth_env import PlanError, parse_plan
from berth_env import check as check_entries
from berth_env.baselines import published_plan
from berth_env.rules import is_crane_task
from viewer.chart.figure import to_figure
from viewer.chart.layers import (
    MARKS,
    PLOT_HEIGHT_PX,
    PLOT_WIDTH_PX,
    TAIL_OPACITY,
    Scale,
    crane_series,
    draw_blocks,
    draw_marks,
    draw_published,
    draw_ships,
    draw_weather_and_cranes,
    week_start,
)
from viewer.chart.scene import (
    ALONGSIDE_FILL,
    AVAILABLE_NAME,
    CLOSED_FILL,
    CRANE_LINE,
    IN_USE_NAME,
    MOVED_FILL,
    MOVED_NAME,
    OUTAGE_FILL,
    OVER_NAME,
    PUBLISHED_NAME,
    SHIP_FILL,
    TITLE_CHARS,
    VIOLATION_LINE,
    WIND_FILL,
    Axis,
    Cranes,
    LegendItem,
    Panel,
    Scene,
    clean,
)
from viewer.chart.svg import to_svg

__all__ = ["MOVED_FILL", "SHIP_FILL", "VIOLATION_LINE", "PlanView", "berth_chart", "berth_chart_svg", "berth_scene",
           "chart_svg", "compare_scene", "moved_ships", "optimum_chart", "optimum_scene",
           "preview_chart", "preview_scene", "read_plan", "side_by_side", "step_chart", "step_scene"]

_WEEKS = re.compile(r"-w\d+x(\d+)-")
CHANGED = "changed since the previous draft"
chart_svg = to_svg   # a scene as an SVG document: `chart_svg(step_scene(...))`


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


def _scale(task: Mapping[str, Any], y_span: tuple[float, float], size: tuple[int, int]) -> Scale:
    return Scale(size[0] / max(1, _horizon(task) + 4), size[1] / max(1.0, y_span[1] - y_span[0]))


def _axes(task: Mapping[str, Any], panels: Sequence[Panel], y_span: tuple[float, float],
          width: int) -> tuple[Axis, Axis]:
    """The hour axis (a gridline every midnight, labelled with days) and the section axis, shared by all panels."""
    xs = [x for p in panels for x in p.x_extent]
    x_lo, x_hi = min([0, *xs]), max([_horizon(task), *xs])
    start = week_start(task)
    ticks = list(range(0, x_hi + 1, 24))
    # A day label takes about 80 px; on longer tasks only every other (or third) midnight is labelled.
    every = max(1, -(-len(ticks) * 80 // width))
    labels = [("" if i % every else (start + timedelta(hours=h)).strftime("%a %d %b") if start else f"h{h}")
              for i, h in enumerate(ticks)]
    day0 = start.strftime("%a %d %b %Y") if start else "hour 0"
    x = Axis(x_lo - 2, x_hi + 2, f"hour (0 = {day0} 00:00 UTC)", ticks, labels)
    y = Axis(y_span[0], y_span[1], "quay section", dtick=1 if y_span[1] - y_span[0] <= 23 else 2)
    return x, y


# -- panels and scenes -------------------------------------------------------------------------------------------

def _panel(task: Mapping[str, Any], view: PlanView, highlight: set[int], changed_label: str,
           y_span: tuple[float, float], scale: Scale, *, published: bool) -> Panel:
    panel = Panel()
    draw_weather_and_cranes(task, panel, y_span)
    draw_blocks(task, panel)
    if view.result is not None:
        draw_ships(task, view.result, panel, scale, highlight, changed_label)
        if published:
            draw_published(task, view.result, panel)
        draw_marks(task, view.result, panel)
    return panel


def _verdict(view: PlanView, highlight: set[int], changed_label: str) -> str:
    if view.result is None:
        return "no plan yet" if view.error == "no plan" else f"plan could not be read ({clean(view.error, 100)})"
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


_BOXES = {  # legend entry -> (label, fill, edge)
    "ship": ("ship", SHIP_FILL, "white"),
    "changed": (None, MOVED_FILL, "white"),
    "problem": ("breaks a rule (hover for which)", "white", VIOLATION_LINE),
    "tail": ("waiting for the wind", f"rgba(76,120,168,{TAIL_OPACITY})", "white"),
    "closed": ("closed", CLOSED_FILL, CLOSED_FILL),
    "alongside": ("already alongside", ALONGSIDE_FILL, ALONGSIDE_FILL),
    "wind": ("no moves (wind)", WIND_FILL, "rgba(90,150,220,0.5)"),
    "outage": ("cranes out of service", OUTAGE_FILL, OUTAGE_FILL),
}


def _legend(panels: Sequence[Panel], changed_label: str, cranes: Cranes | None) -> list[LegendItem]:
    """Every legend entry, in the order plotly lists them: the traces' own entries, then the boxes."""
    items = []
    if any(p.moves for p in panels):
        items += [LegendItem(PUBLISHED_NAME, "ghost", "none", "#3c3c3c"), LegendItem(MOVED_NAME, "arrow", "#3c3c3c")]
    kinds = {m.kind for p in panels for m in p.marks}
    items += [LegendItem(name, "mark", colour, symbol=symbol) for kind, (name, symbol, colour) in MARKS.items()
              if kind in kinds]
    if cranes is not None:
        items += [LegendItem(AVAILABLE_NAME, "line", CRANE_LINE, dash="dot"), LegendItem(IN_USE_NAME, "line", SHIP_FILL)]
        if cranes.over:
            items.append(LegendItem(OVER_NAME, "dot", VIOLATION_LINE))
    wanted = {"ship"}.union(*(p.legend for p in panels))
    items += [LegendItem(label or changed_label, "box", fill, edge) for key, (label, fill, edge) in _BOXES.items()
              if key in wanted]
    return items


def berth_scene(task: Mapping[str, Any], plan: Any, *, check: Any = None, previous_plan: Any = None,
                title: str | None = None, height: int | None = None, published: bool = True,
                cranes: bool = True, highlight: set[int] | None = None, highlight_label: str = CHANGED,
                size: tuple[int, int] = (PLOT_WIDTH_PX, PLOT_HEIGHT_PX)) -> Scene:
    """The scene of one plan; see `berth_chart` for the options. `size`: the plot area (px) labels must fit."""
    view = read_plan(task, plan, check)
    if highlight is None:
        highlight = moved_ships(task, plan, previous_plan) if previous_plan is not None and view.result else set()
    changed_label = clean(highlight_label)
    y_span = _y_span(task, [view])
    panel = _panel(task, view, highlight, changed_label, y_span, _scale(task, y_span, size), published=published)
    x, y = _axes(task, [panel], y_span, size[0])
    heading = (clean(title, TITLE_CHARS) if title is not None
               else f"{clean(task.get('task_id', ''))} · {_verdict(view, highlight, 'changed')}")
    crane = Cranes(*crane_series(task, view.result, int(x.hi))) if cranes and is_crane_task(task) else None
    return Scene(title=heading, x=x, y=y, panels=[panel], legend=_legend([panel], changed_label, crane), cranes=crane,
                 height=height or (540 if crane else 460), plot_width=size[0], plot_height=size[1])


def _two_panels(task: Mapping[str, Any], plans: tuple[Any, Any], checks: tuple[Any, Any], titles: tuple[str, str],
                size: tuple[int, int], label: str) -> tuple[list[Panel], Axis, Axis, set[int]]:
    """Two plans of one task as two panels over one hour span and one section range (so that they read alike),
    the ships placed differently highlighted in both; each panel's subtitle is its title and verdict."""
    views = tuple(read_plan(task, plan, check) for plan, check in zip(plans, checks, strict=True))
    differ = moved_ships(task, *plans)
    y_span = _y_span(task, views)
    scale = _scale(task, y_span, size)
    panels = [_panel(task, view, differ, label, y_span, scale, published=False) for view in views]
    for panel, title, view in zip(panels, titles, views, strict=True):
        panel.subtitle = f"{clean(title, TITLE_CHARS)} · {_verdict(view, set(), label)}"
    x, y = _axes(task, panels, y_span, size[0])
    return panels, x, y, differ


def compare_scene(task: Mapping[str, Any], plan_a: Any, plan_b: Any, *, titles: tuple[str, str] = ("plan A", "plan B"),
                  check_a: Any = None, check_b: Any = None, height: int = 820,
                  size: tuple[int, int] = (PLOT_WIDTH_PX, PLOT_HEIGHT_PX)) -> Scene:
    """Two plans of one task stacked on a shared hour axis; the ships placed differently highlighted in both."""
    label = "placed differently"
    panels, x, y, differ = _two_panels(task, (plan_a, plan_b), (check_a, check_b), titles, size, label)
    heading = f"{clean(task.get('task_id', ''))} · {len(differ)} ships placed differently"
    return Scene(title=heading, x=x, y=y, panels=panels, legend=_legend(panels, label, None), height=height,
                 plot_width=size[0], plot_height=size[1])


def paired_scenes(task: Mapping[str, Any], plan_a: Any, plan_b: Any, *, titles: tuple[str, str] = ("plan A", "plan B"),
                  height: int = 460, size: tuple[int, int] = (PLOT_WIDTH_PX, PLOT_HEIGHT_PX)) -> tuple[Scene, Scene]:
    """The two panels of `compare_scene` as two charts, for two columns side by side: one hour axis and one section
    range for both (a plan that ends later does not stretch its own chart alone), each titled with its verdict."""
    label = "placed differently by A and B"
    panels, x, y, _ = _two_panels(task, (plan_a, plan_b), (None, None), titles, size, label)
    scenes = []
    for panel in panels:
        title, panel.subtitle = panel.subtitle, ""
        scenes.append(Scene(title=title, x=x, y=y, panels=[panel], legend=_legend([panel], label, None),
                            height=height, plot_width=size[0], plot_height=size[1]))
    return scenes[0], scenes[1]


def preview_scene(task: Mapping[str, Any]) -> Scene:
    """The task as published: every ship where the port planned it, with what the disruptions broke in red."""
    plan = published_plan(task)
    return berth_scene(task, plan, published=False,
                       title=f"The published plan, before any fix · {_verdict(read_plan(task, plan), set(), '')}")


def step_scene(task: Mapping[str, Any] | None, steps: Sequence[Mapping[str, Any]], index: int,
               **options: Any) -> Scene | None:
    """Draft `index` of a rollout's checked and submitted plans, with the changes since the draft before it.

    `options` go to `berth_scene` (e.g. a smaller `height`, no crane panel)."""
    if task is None or not steps:
        return None
    index = max(0, min(index, len(steps) - 1))
    step = steps[index]
    previous = steps[index - 1].get("plan") if index > 0 else None
    verdict = "submitted" if step.get("tool") == "submit_plan" else "checked"
    turn = f" in turn {clean(step.get('turn'), 8)}" if step.get("turn") is not None else ""
    view = read_plan(task, step.get("plan"))
    marked = options.get("highlight")  # ships the caller outlines instead of the changes (the gap's top ships)
    if marked is None:
        marked = moved_ships(task, step.get("plan"), previous) if previous is not None else set()
    summary = _verdict(view, marked, clean(options.get("highlight_label", "changed")))
    return berth_scene(task, step.get("plan"), previous_plan=previous,
                       title=f"Draft {index + 1} of {len(steps)} ({verdict}{turn}) · {summary}", **options)


def optimum_scene(task: Mapping[str, Any] | None, last_plan: Any = None, *, label: str = "the last plan") -> Scene | None:
    """The last plan over the task's proven optimum (ships placed differently highlighted), or the optimum alone."""
    reference = (task or {}).get("reference") or {}
    if task is None or not reference.get("optimal_plan"):
        return None
    optimum = f"proven optimum (cost {reference.get('optimal_cost')})"
    if last_plan is None:
        return berth_scene(task, reference["optimal_plan"], published=False, title=optimum)
    return compare_scene(task, last_plan, reference["optimal_plan"], titles=(label, optimum))


# -- the charts the screens ask for ------------------------------------------------------------------------------

def berth_chart(task: Mapping[str, Any], plan: Any, *, check: Any = None, previous_plan: Any = None,
                title: str | None = None, height: int | None = None, published: bool = True,
                cranes: bool = True, highlight: set[int] | None = None,
                highlight_label: str = CHANGED) -> go.Figure:
    """The berth chart of one plan (any form the model may send; None for "no plan yet").

    `check`: a precomputed `berth_env.check` result for the plan. `previous_plan`: ships placed differently from
    it are filled orange (or give the ships to fill as `highlight`, named `highlight_label` in the legend).
    `published`: outline and arrow where the published plan had each moved ship. `cranes`: the crane panel under
    the quay (crane-rule tasks). An unreadable plan gives the quay without ships, saying so. `title` is plain text.
    """
    return to_figure(berth_scene(task, plan, check=check, previous_plan=previous_plan, title=title, height=height,
                                 published=published, cranes=cranes, highlight=highlight,
                                 highlight_label=highlight_label))


def berth_chart_svg(task: Mapping[str, Any], plan: Any, *, published: bool = True, cranes: bool = True,
                    highlight: set[int] | None = None, title: str | None = None, **options: Any) -> str:
    """The same chart as `berth_chart`, as an SVG document (no script, texts escaped, a viewBox so it scales).

    `options` are `berth_scene`'s others (`check`, `previous_plan`, `highlight_label`, `size`)."""
    return to_svg(berth_scene(task, plan, published=published, cranes=cranes, highlight=highlight, title=title,
                              **options))


def side_by_side(task: Mapping[str, Any], plan_a: Any, plan_b: Any, *, titles: tuple[str, str] = ("plan A", "plan B"),
                 check_a: Any = None, check_b: Any = None, height: int = 820) -> go.Figure:
    """Two plans of one task stacked on a shared hour axis (two rollouts, or a plan over the optimum).

    Only the ships placed differently between the two are highlighted (orange in both); the rest stay blue.
    """
    return to_figure(compare_scene(task, plan_a, plan_b, titles=titles, check_a=check_a, check_b=check_b,
                                   height=height))


def paired_charts(task: Mapping[str, Any], plan_a: Any, plan_b: Any, **options: Any) -> tuple[go.Figure, go.Figure]:
    """Two plans of one task as two figures on one time axis (see `paired_scenes` for the options)."""
    scene_a, scene_b = paired_scenes(task, plan_a, plan_b, **options)
    return to_figure(scene_a), to_figure(scene_b)


def preview_chart(task: Mapping[str, Any]) -> go.Figure:
    """The task as published: every ship where the port planned it, with what the disruptions broke in red."""
    return to_figure(preview_scene(task))


def step_chart(task: Mapping[str, Any] | None, steps: Sequence[Mapping[str, Any]], index: int,
               **options: Any) -> go.Figure | None:
    """Draft `index` of a rollout's plans as a figure (see `step_scene`)."""
    scene = step_scene(task, steps, index, **options)
    return None if scene is None else to_figure(scene)


def optimum_chart(task: Mapping[str, Any] | None, last_plan: Any = None, *, label: str = "the last plan") -> Any:
    """The last plan over the task's proven optimum as a figure (see `optimum_scene`), or None without one."""
    scene = optimum_scene(task, last_plan, label=label)
    return None if scene is None else to_figure(scene)
