"""The layers of a berth chart, each drawn onto a scene `Panel` (viewer/chart/scene.py) as plain data: the quay's
fixed facts, the ships, where each ship was published, the marks for late and priority ships, and the crane count
over the week. What the chart shows, and in which colours, is decided here once for every output.

Box names say what each rectangle is (`ship:3`, `tail:3`, `closed:1`, `alongside:0`, `wind:0`, `outage:0`), for
tests and for callers that restyle. Texts from the task or the plan (ship names, block labels, the checker's
words) are `clean`ed on the way in and stay plain text; the outputs escape them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from berth_env.rules import is_crane_task, work_hours
from viewer.chart.scene import (
    ALONGSIDE_FILL,
    CLOSED_FILL,
    CRANE_LINE,
    MOVED_FILL,
    NAME_CHARS,
    OUTAGE_FILL,
    SHIP_FILL,
    TIP_CHARS,
    VIOLATION_LINE,
    WIND_FILL,
    MarkSet,
    Move,
    Panel,
    Tip,
    clean,
    tip,
)

LATE_MARK = "#B22222"
PRIORITY_MARK = "#E0A100"
EMERGENCY_MARK = "#C2185B"
TAIL_OPACITY = 0.35
PROBLEMS_IN_HOVER = 4
# The chart is drawn for a plot area about this wide; a label is only written where it fits (no overlapping text).
PLOT_WIDTH_PX = 700
PLOT_HEIGHT_PX = 330
CHAR_PX = 6.2                # width of one character of the 10 px label font
# The marks' legend names and symbols, by kind, in the order they are drawn.
MARKS = {"late": ("late", "triangle-left", LATE_MARK), "priority": ("priority ship", "star", PRIORITY_MARK),
         "emergency": ("emergency ship", "diamond", EMERGENCY_MARK)}


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
    for i, block in enumerate(task.get("blocks") or []):
        alongside = block.get("kind") == "alongside"
        label = clean(block.get("label") or block.get("kind") or "")
        what = f"already alongside, {block.get('cranes', 0)} cranes" if alongside else "closed"
        hover = tip((("b", label),), what, f"sections {block['first']}–{block['last']}",
                    f"{when(start, block['start'])} – {when(start, block['end'])}")
        panel.rect(f"{'alongside' if alongside else 'closed'}:{i}", block["start"], block["end"],
                   block["first"] - 0.5, block["last"] + 0.5, layer="below",
                   fill=ALONGSIDE_FILL if alongside else CLOSED_FILL, label=label,
                   label_colour="white" if alongside else "#333", tip=hover,
                   # a ship alongside for a few hours is a thin block: run its name along the quay
                   label_vertical=block["end"] - block["start"] < 12)
        panel.x_extent += [block["start"], block["end"]]
        panel.legend.add("alongside" if alongside else "closed")
        panel.add_label("blocks", i, (block["start"] + block["end"]) / 2, (block["first"] + block["last"]) / 2,
                        "", hover)


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
        panel.rect(f"wind:{i}", window["start"], window["end"], bottom, top, layer="below", fill=WIND_FILL)
        panel.note(f"wind:{i}", window["start"], f"no moves, {who}: h{window['start']}–{window['end']}", "💨",
                   "#1f4e8c", "top", i)
        panel.legend.add("wind")
    pool = rules.get("crane_pool")
    for i, outage in enumerate(rules.get("crane_outages") or []):
        left = f" ({pool - outage['cranes']} available)" if isinstance(pool, int) else ""
        panel.rect(f"outage:{i}", outage["start"], outage["end"], bottom, bottom + 0.35, layer="above",
                   fill=OUTAGE_FILL)
        panel.note(f"outage:{i}", outage["start"], f"−{outage['cranes']} cranes{left}", "🏗️", CRANE_LINE, "bottom")
        panel.legend.add("outage")


# -- the ships -----------------------------------------------------------------------------------------------------

def ship_label(ship: Mapping[str, Any], hours: float, sections: int, px_per_hour: float,
               px_per_section: float) -> str:
    """What fits inside the ship's box: `12 MSC ANNA`, or `12`, or nothing (the hover still has everything)."""
    width, height = hours * px_per_hour, sections * px_per_section
    if height < 11:
        return ""
    ident = clean(ship.get("id", ""), 12)
    room = int((width - 6) / CHAR_PX)
    name = clean(ship.get("name") or "")
    if room >= len(ident) + 5 and name:
        short = name if len(ident) + 1 + len(name) <= room else name[: room - len(ident) - 2] + "…"
        return f"{ident} {short}"
    return ident if room >= len(ident) else ""


def ship_tip(task: Mapping[str, Any], sr: Any, changed_label: str | None) -> Tip:
    """Everything about one planned ship, for its hover: where and when, cost, its published place, its problems."""
    ships = task.get("ships") or []
    ship = ships[sr.ship] if 0 <= sr.ship < len(ships) else {}
    start = week_start(task)
    lines: list[Any] = [
        (("b", f"{sr.ship} {clean(ship.get('name', ''))}"), ("", _tags(ship))),
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
        lines.append((("i", clean(changed_label)),))
    problems = [text for _, text in sr.problems]
    lines += [f"⚠ {clean(p, TIP_CHARS)}" for p in problems[:PROBLEMS_IN_HOVER]]
    if len(problems) > PROBLEMS_IN_HOVER:
        lines.append(f"⚠ … {len(problems) - PROBLEMS_IN_HOVER} more problems")
    return tip(*lines)


def _tags(ship: Mapping[str, Any]) -> str:
    tags = []
    if ship.get("berth_deadline") is not None:
        tags.append(f"emergency: berth by h{ship['berth_deadline']}")
    if (ship.get("weight") or 1) > 1:
        tags.append(f"priority (delay ×{ship['weight']})")
    return f" · {clean(', '.join(tags), NAME_CHARS)}" if tags else ""


@dataclass
class Scale:
    """Pixels per hour and per section, for deciding which labels fit."""

    px_per_hour: float
    px_per_section: float


def draw_ships(task: Mapping[str, Any], result: Any, panel: Panel, scale: Scale, highlight: set[int],
               changed_label: str) -> None:
    """Each planned ship as a rectangle from berth to departure over its sections, labelled where it fits;
    outlined red when it breaks a rule, orange when highlighted, the wind-waiting tail lighter."""
    ships = task.get("ships") or []
    for sr in result.ships.values():
        bad = bool(sr.problems)
        fill = MOVED_FILL if sr.ship in highlight else SHIP_FILL
        edge, width = (VIOLATION_LINE, 3) if bad else ("white", 1)
        y0, y1 = sr.section - 0.5, sr.last_section + 0.5
        work_end = max(sr.berth_hour, min(sr.finish, sr.departure))
        hover = ship_tip(task, sr, changed_label if sr.ship in highlight else None)
        # "between": above the grid and the quay facts, below the labels and their hover.
        panel.rect(f"ship:{sr.ship}", sr.berth_hour, work_end, y0, y1, fill=fill, edge=edge, edge_width=width,
                   layer="between", tip=hover)
        if sr.departure > work_end:
            panel.rect(f"tail:{sr.ship}", work_end, sr.departure, y0, y1, fill=fill, opacity=TAIL_OPACITY,
                       layer="between", edge=edge, edge_width=width, dash="dot", tip=hover)
            panel.legend.add("tail")
        panel.legend.add("problem" if bad else "ship")
        panel.x_extent += [sr.berth_hour, sr.departure]
        ship = ships[sr.ship] if 0 <= sr.ship < len(ships) else {"id": sr.ship}
        text = ship_label(ship, sr.departure - sr.berth_hour, sr.last_section - sr.section + 1,
                          scale.px_per_hour, scale.px_per_section)
        # White on the ship's fill; a broken rule shows as the red outline and on hover.
        panel.add_label("ships", sr.ship, (sr.berth_hour + sr.departure) / 2, (sr.section + sr.last_section) / 2,
                        text, hover)
    if highlight:
        panel.legend.add("changed")


def draw_published(task: Mapping[str, Any], result: Any, panel: Panel) -> None:
    """A faint outline where the published plan had each ship the plan moved, and an arrow to where it is now."""
    ships = task.get("ships") or []
    crane_rule = is_crane_task(task)
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
        panel.moves.append(Move(sr.ship, (hour, end, y0, y1), ((hour + end) / 2, (y0 + y1) / 2),
                                ((sr.berth_hour + sr.finish) / 2, (sr.section + sr.last_section) / 2)))
        panel.x_extent += [hour, end]


def draw_marks(task: Mapping[str, Any], result: Any, panel: Panel) -> None:
    """Small symbols on ships worth a second look: late (departs after its due hour), priority, emergency."""
    ships = task.get("ships") or []
    marks = {kind: MarkSet(kind, name, symbol, colour) for kind, (name, symbol, colour) in MARKS.items()}
    for sr in result.ships.values():
        ship = ships[sr.ship] if 0 <= sr.ship < len(ships) else {}
        top = sr.last_section + 0.5
        due = ship.get("due")
        if isinstance(due, int) and sr.departure > due:
            marks["late"].points.append(
                (sr.departure, top, tip(f"ship {sr.ship} departs {sr.departure - due} h after h{due}")))
        if ship.get("berth_deadline") is not None:
            over = sr.berth_hour - int(ship["berth_deadline"])
            text = f"ship {sr.ship}: emergency, berth by h{ship['berth_deadline']}" + (
                f" ({over} h over)" if over > 0 else "")
            marks["emergency"].points.append((sr.berth_hour, top, tip(text)))
        elif (ship.get("weight") or 1) > 1:
            marks["priority"].points.append(
                (sr.berth_hour, top, tip(f"ship {sr.ship}: priority, delay costs ×{ship['weight']}")))
    panel.marks += [m for m in marks.values() if m.points]


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
