"""The layers of a berth chart, each drawn onto a `Panel`: the quay's fixed facts, the ships, where each ship was
published, the marks for late and priority ships, and the crane count over the week.

Ships are `layout.shapes` (one dict each, cheap for 59 ships); everything a person may want to switch off or hover
is a trace (one per layer, never one per ship): ship labels and hovers, published positions with arrows, marks.
Shape names say what each rectangle is (`ship:3`, `tail:3`, `closed:1`, `alongside:0`, `wind:0`, `outage:0`),
for tests and for callers that restyle. Every text that comes from the task or the plan is HTML-escaped: plotly
renders a subset of HTML in hover text and titles.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import plotly.graph_objects as go

from berth_env.rules import is_crane_task, work_hours

SHIP_FILL = "#4C78A8"
MOVED_FILL = "#F58518"       # changed since the previous draft (or differs from the other plan in a compare)
VIOLATION_LINE = "#D62728"
CLOSED_FILL = "#B8B8B8"
ALONGSIDE_FILL = "#3A3A3A"
GHOST_LINE = "rgba(60, 60, 60, 0.55)"
WIND_FILL = "rgba(90, 150, 220, 0.16)"
OUTAGE_FILL = "rgba(148, 103, 189, 0.55)"
LATE_MARK = "#B22222"
PRIORITY_MARK = "#E0A100"
EMERGENCY_MARK = "#C2185B"
TAIL_OPACITY = 0.35
PROBLEMS_IN_HOVER = 4
# The chart is drawn for a plot area about this wide; a label is only written where it fits (no overlapping text).
PLOT_WIDTH_PX = 700
PLOT_HEIGHT_PX = 330
CHAR_PX = 6.2                # width of one character of the 10 px label font


@dataclass
class Panel:
    """What one quay panel draws; the figure assembler places it on its axes."""

    xref: str
    yref: str
    shapes: list[dict] = field(default_factory=list)
    annotations: list[dict] = field(default_factory=list)
    traces: list[go.Scatter] = field(default_factory=list)
    x_extent: list[int] = field(default_factory=list)
    legend: set[str] = field(default_factory=set)  # legend entries this panel needs

    def rect(self, name: str, x0: float, x1: float, y0: float, y1: float, **style: Any) -> None:
        self.shapes.append({"type": "rect", "name": name, "xref": self.xref, "yref": self.yref,
                            "x0": x0, "x1": x1, "y0": y0, "y1": y1, **style})


def esc(text: Any) -> str:
    return html.escape(str(text), quote=False)


def week_start(task: Mapping[str, Any]) -> datetime | None:
    try:
        return datetime.strptime(str(task.get("week_start_utc")), "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return None


def when(start: datetime | None, hour: int) -> str:
    if start is None:
        return f"h{hour}"
    return f"h{hour} ({(start + timedelta(hours=hour)).strftime('%a %H:%M')})"


# -- the quay's fixed facts --------------------------------------------------------------------------------------

def draw_blocks(task: Mapping[str, Any], panel: Panel) -> None:
    """Closed sections (grey) and ships already alongside (dark), labelled, with a hover each."""
    start = week_start(task)
    xs, ys, texts = [], [], []
    for i, block in enumerate(task.get("blocks") or []):
        alongside = block.get("kind") == "alongside"
        label = str(block.get("label") or block.get("kind") or "")
        panel.rect(f"{'alongside' if alongside else 'closed'}:{i}", block["start"], block["end"],
                   block["first"] - 0.5, block["last"] + 0.5, layer="below",
                   fillcolor=ALONGSIDE_FILL if alongside else CLOSED_FILL, line={"width": 0},
                   label={"text": esc(label), "font": {"size": 10, "color": "white" if alongside else "#333"},
                          # a ship alongside for a few hours is a thin block: run its name along the quay
                          "textangle": -90 if block["end"] - block["start"] < 12 else 0})
        panel.x_extent += [block["start"], block["end"]]
        panel.legend.add("alongside" if alongside else "closed")
        xs.append((block["start"] + block["end"]) / 2)
        ys.append((block["first"] + block["last"]) / 2)
        what = f"already alongside, {block.get('cranes', 0)} cranes" if alongside else "closed"
        texts.append(f"<b>{esc(label)}</b><br>{what}<br>sections {block['first']}–{block['last']}"
                     f"<br>{when(start, block['start'])} – {when(start, block['end'])}")
    if xs:
        panel.traces.append(go.Scatter(
            x=xs, y=ys, mode="markers", marker={"opacity": 0, "size": 12}, hovertext=texts, hoverinfo="text",
            showlegend=False, name="blocks", xaxis=panel.xref, yaxis=panel.yref))


def draw_weather_and_cranes(task: Mapping[str, Any], panel: Panel, y_span: tuple[float, float]) -> None:
    """Wind windows as bands over the whole quay and crane outages as a strip along the hour axis, each labelled.

    Bands are drawn in data coordinates over the whole section range, not in axis-domain coordinates: plotly.js
    stops drawing "between"-layer shapes when a domain-referenced shape shares the layer.
    """
    bottom, top = y_span
    rules = task.get("rules") or {}
    for i, window in enumerate(rules.get("no_moves") or []):
        min_length = window.get("min_length") or 0
        who = f"ships ≥ {min_length} m" if min_length else "all ships"
        panel.rect(f"wind:{i}", window["start"], window["end"], bottom, top, layer="below", fillcolor=WIND_FILL,
                   line={"width": 0})
        panel.annotations.append({
            "name": f"wind:{i}", "xref": panel.xref, "yref": f"{panel.yref} domain", "x": window["start"], "y": 1,
            "xanchor": "left", "yanchor": "top", "yshift": -14 * i, "showarrow": False,
            "text": f"💨 no moves, {who}: h{window['start']}–{window['end']}",
            "font": {"size": 10, "color": "#1f4e8c"}, "bgcolor": "rgba(255,255,255,0.7)"})
        panel.legend.add("wind")
    pool = rules.get("crane_pool")
    for i, outage in enumerate(rules.get("crane_outages") or []):
        left = f" ({pool - outage['cranes']} available)" if isinstance(pool, int) else ""
        panel.rect(f"outage:{i}", outage["start"], outage["end"], bottom, bottom + 0.35, layer="above",
                   fillcolor=OUTAGE_FILL, line={"width": 0})
        panel.annotations.append({
            "name": f"outage:{i}", "xref": panel.xref, "yref": f"{panel.yref} domain", "x": outage["start"],
            "y": 0.04, "xanchor": "left", "yanchor": "bottom", "showarrow": False,
            "text": f"🏗️ −{outage['cranes']} cranes{left}",
            "font": {"size": 10, "color": "#5b3a8c"}, "bgcolor": "rgba(255,255,255,0.7)"})
        panel.legend.add("outage")


# -- the ships -----------------------------------------------------------------------------------------------------

def ship_label(ship: Mapping[str, Any], hours: float, sections: int, px_per_hour: float,
               px_per_section: float) -> str:
    """What fits inside the ship's box: `12 MSC ANNA`, or `12`, or nothing (the hover still has everything)."""
    width, height = hours * px_per_hour, sections * px_per_section
    if height < 11:
        return ""
    ident = str(ship.get("id", ""))
    room = int((width - 6) / CHAR_PX)
    name = str(ship.get("name") or "")
    if room >= len(ident) + 5 and name:
        short = name if len(ident) + 1 + len(name) <= room else name[: room - len(ident) - 2] + "…"
        return f"{ident} {short}"
    return ident if room >= len(ident) else ""


def ship_hover(task: Mapping[str, Any], sr: Any, changed_label: str | None) -> str:
    ships = task.get("ships") or []
    ship = ships[sr.ship] if 0 <= sr.ship < len(ships) else {}
    start = week_start(task)
    lines = [f"<b>{sr.ship} {esc(ship.get('name', ''))}</b>" + _tags(ship),
             f"berths {when(start, sr.berth_hour)} · sections {sr.section}–{sr.last_section}",
             (f"finishes {when(start, sr.finish)} · waits for the wind · " if sr.departure > sr.finish else "")
             + f"departs {when(start, sr.departure)}"]
    due = ship.get("due")
    late = f" · {sr.departure - due} h late" if isinstance(due, int) and sr.departure > due else ""
    cranes = f"cranes {sr.cranes} · " if sr.cranes is not None else ""
    lines.append(f"{cranes}delay {sr.delay_h} h{late} · cost {sr.cost}")
    if ship.get("planned_section") is not None:
        lines.append(f"published: {when(start, ship.get('planned_hour'))}, section {ship.get('planned_section')}"
                     + (" · moved off it (+5)" if sr.moved else ""))
    if changed_label:
        lines.append(f"<i>{esc(changed_label)}</i>")
    problems = [text for _, text in sr.problems]
    lines += [f"⚠ {esc(p)}" for p in problems[:PROBLEMS_IN_HOVER]]
    if len(problems) > PROBLEMS_IN_HOVER:
        lines.append(f"⚠ … {len(problems) - PROBLEMS_IN_HOVER} more problems")
    return "<br>".join(lines)


def _tags(ship: Mapping[str, Any]) -> str:
    tags = []
    if ship.get("berth_deadline") is not None:
        tags.append(f"emergency: berth by h{ship['berth_deadline']}")
    if (ship.get("weight") or 1) > 1:
        tags.append(f"priority (delay ×{ship['weight']})")
    return f" · {esc(', '.join(tags))}" if tags else ""


@dataclass
class Scale:
    """Pixels per hour and per section, for deciding which labels fit."""

    px_per_hour: float
    px_per_section: float


def draw_ships(task: Mapping[str, Any], result: Any, panel: Panel, scale: Scale, highlight: set[int],
               changed_label: str) -> None:
    """Each planned ship as a rectangle from berth to departure over its sections, labelled where it fits."""
    ships = task.get("ships") or []
    xs, ys, labels, hovers, colours, ids = [], [], [], [], [], []
    for sr in result.ships.values():
        bad = bool(sr.problems)
        fill = MOVED_FILL if sr.ship in highlight else SHIP_FILL
        line = {"color": VIOLATION_LINE, "width": 3} if bad else {"color": "white", "width": 1}
        y0, y1 = sr.section - 0.5, sr.last_section + 0.5
        work_end = max(sr.berth_hour, min(sr.finish, sr.departure))
        # "between": above the grid and the quay facts, below the labels and their hover.
        panel.rect(f"ship:{sr.ship}", sr.berth_hour, work_end, y0, y1, fillcolor=fill, line=line,
                   layer="between")
        if sr.departure > work_end:
            panel.rect(f"tail:{sr.ship}", work_end, sr.departure, y0, y1, fillcolor=fill, opacity=TAIL_OPACITY,
                       layer="between", line={**line, "dash": "dot"})
            panel.legend.add("tail")
        panel.legend.add("problem" if bad else "ship")
        panel.x_extent += [sr.berth_hour, sr.departure]
        ship = ships[sr.ship] if 0 <= sr.ship < len(ships) else {"id": sr.ship}
        xs.append((sr.berth_hour + sr.departure) / 2)
        ys.append((sr.section + sr.last_section) / 2)
        labels.append(ship_label(ship, sr.departure - sr.berth_hour, sr.last_section - sr.section + 1,
                                 scale.px_per_hour, scale.px_per_section))
        colours.append("white")  # on the ship's fill; a broken rule shows as the red outline and on hover
        hovers.append(ship_hover(task, sr, changed_label if sr.ship in highlight else None))
        ids.append(sr.ship)
    if highlight:
        panel.legend.add("changed")
    if xs:
        # Invisible markers carry the hover, so a ship too small for a label can still be hovered.
        panel.traces.append(go.Scatter(
            x=xs, y=ys, mode="markers+text", text=labels, customdata=ids, textposition="middle center",
            textfont={"size": 10, "color": colours}, marker={"opacity": 0, "size": 16}, hovertext=hovers,
            hoverinfo="text", showlegend=False, name="ships", xaxis=panel.xref, yaxis=panel.yref, cliponaxis=True))


def draw_published(task: Mapping[str, Any], result: Any, panel: Panel) -> None:
    """A faint outline where the published plan had each ship the plan moved, and an arrow to where it is now.

    One trace for the outlines and one for the arrows, both in the legend, so a click on the legend hides them.
    """
    ships = task.get("ships") or []
    crane_rule = is_crane_task(task)
    box_x: list[float | None] = []
    box_y: list[float | None] = []
    arrow_x: list[float | None] = []
    arrow_y: list[float | None] = []
    for sr in result.ships.values():
        ship = ships[sr.ship] if 0 <= sr.ship < len(ships) else None
        if ship is None or ship.get("planned_section") is None or ship.get("planned_hour") is None:
            continue
        hour, section = int(ship["planned_hour"]), int(ship["planned_section"])
        if (hour, section) == (sr.berth_hour, sr.section):
            continue
        cranes = ship.get("std_cranes") or 1
        end = hour + work_hours(ship, cranes, crane_rule)
        y0, y1 = section - 0.5, section + int(ship.get("sections") or 1) - 0.5
        box_x += [hour, end, end, hour, hour, None]
        box_y += [y0, y0, y1, y1, y0, None]
        arrow_x += [(hour + end) / 2, (sr.berth_hour + sr.finish) / 2, None]
        arrow_y += [(y0 + y1) / 2, (sr.section + sr.last_section) / 2, None]
        panel.x_extent += [hour, end]
    if not box_x:
        return
    panel.traces.append(go.Scatter(
        x=box_x, y=box_y, mode="lines", line={"color": GHOST_LINE, "width": 1, "dash": "dash"},
        hoverinfo="skip", name="published position", legendgroup="published", showlegend=True,
        xaxis=panel.xref, yaxis=panel.yref))
    panel.traces.append(go.Scatter(
        x=arrow_x, y=arrow_y, mode="lines+markers", line={"color": GHOST_LINE, "width": 1},
        marker={"symbol": "arrow", "size": 9, "angleref": "previous", "color": GHOST_LINE,
                "opacity": [0, 1, 0] * (len(arrow_x) // 3)},
        hoverinfo="skip", name="moved from it", legendgroup="published", showlegend=True,
        xaxis=panel.xref, yaxis=panel.yref))


def draw_marks(task: Mapping[str, Any], result: Any, panel: Panel) -> None:
    """Small symbols on ships worth a second look: late (departs after its due hour), priority, emergency."""
    ships = task.get("ships") or []
    marks: dict[str, tuple[list, list, list]] = {"late": ([], [], []), "priority": ([], [], []),
                                                   "emergency": ([], [], [])}
    for sr in result.ships.values():
        ship = ships[sr.ship] if 0 <= sr.ship < len(ships) else {}
        top = sr.last_section + 0.5
        due = ship.get("due")
        if isinstance(due, int) and sr.departure > due:
            _mark(marks["late"], sr.departure, top, f"ship {sr.ship} departs {sr.departure - due} h after h{due}")
        if ship.get("berth_deadline") is not None:
            over = sr.berth_hour - int(ship["berth_deadline"])
            text = f"ship {sr.ship}: emergency, berth by h{ship['berth_deadline']}" + (
                f" ({over} h over)" if over > 0 else "")
            _mark(marks["emergency"], sr.berth_hour, top, text)
        elif (ship.get("weight") or 1) > 1:
            _mark(marks["priority"], sr.berth_hour, top, f"ship {sr.ship}: priority, delay costs ×{ship['weight']}")
    style = {"late": ("triangle-left", LATE_MARK, "late"), "priority": ("star", PRIORITY_MARK, "priority ship"),
             "emergency": ("diamond", EMERGENCY_MARK, "emergency ship")}
    for kind, (xs, ys, texts) in marks.items():
        if not xs:
            continue
        symbol, colour, name = style[kind]
        panel.traces.append(go.Scatter(
            x=xs, y=ys, mode="markers", marker={"symbol": symbol, "size": 10, "color": colour,
                                                "line": {"color": "white", "width": 1}},
            hovertext=texts, hoverinfo="text", name=name, legendgroup=kind, xaxis=panel.xref, yaxis=panel.yref))


def _mark(into: tuple[list, list, list], x: float, y: float, text: str) -> None:
    into[0].append(x)
    into[1].append(y)
    into[2].append(esc(text))


# -- cranes ----------------------------------------------------------------------------------------------------

def crane_series(task: Mapping[str, Any], result: Any | None, hours: int) -> tuple[list[int], list[int]]:
    """Cranes in use and cranes available, hour by hour over `[0, hours)` (crane-rule tasks)."""
    use = [0] * hours
    spans = [(b["start"], b["end"], int(b.get("cranes") or 0)) for b in task.get("blocks") or []
             if b.get("kind") == "alongside"]
    if result is not None:
        spans += [(sr.berth_hour, sr.finish, sr.cranes or 0) for sr in result.ships.values()]
    for start, end, cranes in spans:
        for hour in range(max(0, start), min(hours, end)):
            use[hour] += cranes
    rules = task.get("rules") or {}
    pool = int(rules.get("crane_pool") or 0)
    available = [pool] * hours
    for outage in rules.get("crane_outages") or []:
        for hour in range(max(0, outage["start"]), min(hours, outage["end"])):
            available[hour] -= outage["cranes"]
    return use, available
