"""Berth charts drawn from real eval tasks and the real checker."""

from __future__ import annotations

import copy
import math

import plotly.graph_objects as go
import pytest

from berth_env import check, load_pack, parse_plan
from viewer.chart import (
    MOVED_FILL,
    SHIP_FILL,
    VIOLATION_LINE,
    berth_chart,
    moved_ships,
    paired_charts,
    side_by_side,
)

BUSY = "dock-24B-w06x1-busy-0"
STORM = "dock-24B-w16x2-storm-0"
LARGEST = "dock-36A-w35x3-extreme-0"  # 59 ships, three weeks


@pytest.fixture(scope="module")
def pack():
    return load_pack()


def _shapes(fig: go.Figure, prefix: str, xref: str = "x") -> dict[str, dict]:
    return {s.name: s.to_plotly_json() for s in fig.layout.shapes if s.name.startswith(prefix) and s.xref == xref}


def _optimal(task: dict) -> list[dict]:
    return [dict(e) for e in task["reference"]["optimal_plan"]]


def _perturbed(task: dict) -> list[dict]:
    """Ship 12 moved onto ship 0's berth at hour 0: it arrives too early and the two overlap."""
    plan = _optimal(task)
    plan[12].update(berth_hour=0, section=4)
    return plan


def test_a_ship_spans_its_berth_hour_to_departure_over_its_sections(pack) -> None:
    task = pack.get(BUSY)
    ship = task["ships"][0]
    assert (ship["sections"], ship["workload"]) == (4, 7)
    plan = _optimal(task)
    plan[0].update(berth_hour=10, section=4, cranes=1)
    fig = berth_chart(task, plan)
    rect = _shapes(fig, "ship:0")["ship:0"]
    # 7 crane-hours with 1 crane: 7 hours alongside, no wind on this task.
    assert (rect["x0"], rect["x1"]) == (10, 10 + math.ceil(7 / 1))
    assert (rect["y0"], rect["y1"]) == (3.5, 7.5)  # sections 4..7, each drawn as a band of height 1
    assert "tail:0" not in _shapes(fig, "tail:")
    assert len(_shapes(fig, "ship:")) == len(task["ships"])
    hover = next(t for t in fig.data if t.name == "ships")
    i = list(hover.customdata).index(0)
    assert (hover.x[i], hover.y[i]) == (13.5, 5.5)
    assert "<b>0 PERSEUS</b>" in hover.hovertext[i] and "sections 4–7" in hover.hovertext[i]


def test_violation_marks_exactly_the_ships_the_checker_flags(pack) -> None:
    task = pack.get(BUSY)
    plan = _perturbed(task)
    result = check(task, parse_plan(task, plan).entries)
    flagged = {v["ship"] for v in result.violations}
    assert flagged == {0, 12}
    fig = berth_chart(task, plan)
    red = {int(name.split(":")[1]) for name, s in _shapes(fig, "ship:").items() if s["line"]["color"] == VIOLATION_LINE}
    assert red == flagged
    assert fig.layout.title.text == f"{BUSY} · infeasible · 3 violations on 2 ships"
    hover = next(t for t in fig.data if t.name == "ships")
    text12 = hover.hovertext[list(hover.customdata).index(12)]
    assert "cannot arrive" in text12 and "overlaps ship 0" in text12
    assert "breaks a rule (hover for which)" in {t.name for t in fig.data}  # legend entry only when something is flagged
    clean = berth_chart(task, _optimal(task))
    assert not any(s["line"]["color"] == VIOLATION_LINE for s in _shapes(clean, "ship:").values())
    assert clean.layout.title.text == f"{BUSY} · feasible · cost {task['reference']['optimal_cost']}"


def test_ships_moved_since_the_previous_plan_are_highlighted(pack) -> None:
    task = pack.get(BUSY)
    fig = berth_chart(task, _perturbed(task), previous_plan=_optimal(task))
    fills = {int(n.split(":")[1]): s["fillcolor"] for n, s in _shapes(fig, "ship:").items()}
    assert {s for s, c in fills.items() if c == MOVED_FILL} == {12}
    assert all(c == SHIP_FILL for s, c in fills.items() if s != 12)
    assert fig.layout.title.text.endswith("· 1 changed")
    assert moved_ships(task, _perturbed(task), _optimal(task)) == {12}
    # A change of crane count alone changes the rectangle, so it counts; a ship dropped from the plan too.
    fewer = _optimal(task)[1:]
    fewer[0]["cranes"] = 2
    assert moved_ships(task, fewer, _optimal(task)) == {0, 1}
    assert moved_ships(task, "not json", _optimal(task)) == set(range(17))


def test_storm_task_draws_closures_alongside_wind_and_outages(pack) -> None:
    task = pack.get(STORM)
    fig = berth_chart(task, task["reference"]["naive_plan"])
    closed = _shapes(fig, "closed:")
    alongside = _shapes(fig, "alongside:")
    wind = _shapes(fig, "wind:")
    outage = _shapes(fig, "outage:")
    assert set(alongside) == {"alongside:0"} and set(closed) == {"closed:1", "closed:2"}
    assert (closed["closed:1"]["x0"], closed["closed:1"]["x1"]) == (88, 116)
    assert (closed["closed:1"]["y0"], closed["closed:1"]["y1"]) == (10.5, 19.5)
    assert closed["closed:1"]["label"]["text"] == "STS crane maintenance"
    assert alongside["alongside:0"]["label"]["text"] == "HYUNDAI COLOMBO"
    assert (alongside["alongside:0"]["x0"], alongside["alongside:0"]["x1"]) == (0, 4)
    assert [(w["x0"], w["x1"]) for w in wind.values()] == [(159, 182), (161, 169)]
    assert all((w["y0"], w["y1"]) == (1.5, 22.5) for w in wind.values())  # the whole quay
    labels = [a.text for a in fig.layout.annotations if a.name and a.name.startswith("wind:")]
    assert labels == ["💨 no moves, ships ≥ 300 m: h159–182", "💨 no moves, all ships: h161–169"]
    assert [(o["x0"], o["x1"]) for o in outage.values()] == [(187, 216)]
    assert any(a.text == "🏗️ −2 cranes (7 available)" for a in fig.layout.annotations)


def test_wind_waiting_tail_is_drawn_lighter(pack) -> None:
    task = pack.get(STORM)
    plan = task["reference"]["naive_plan"]
    result = check(task, parse_plan(task, plan).entries)
    waiting = {sr.ship: sr for sr in result.ships.values() if sr.departure > sr.finish}
    assert set(waiting) == {11, 13}
    fig = berth_chart(task, plan)
    tails = _shapes(fig, "tail:")
    assert set(tails) == {"tail:11", "tail:13"}
    for ship, sr in waiting.items():
        body, tail = _shapes(fig, f"ship:{ship}")[f"ship:{ship}"], tails[f"tail:{ship}"]
        assert (body["x0"], body["x1"], tail["x0"], tail["x1"]) == (sr.berth_hour, sr.finish, sr.finish, sr.departure)
        assert tail["opacity"] < 1 and tail["line"]["dash"] == "dot"
    assert "waiting for the wind" in {t.name for t in fig.data}


def test_unreadable_and_missing_plans_give_an_empty_quay(pack) -> None:
    task = pack.get(STORM)
    fig = berth_chart(task, "this is not a plan")
    assert not _shapes(fig, "ship:")
    assert fig.layout.title.text.startswith(f"{STORM} · plan could not be read (INVALID_JSON: ")
    assert _shapes(fig, "closed:")  # the quay's fixed facts are still there
    assert berth_chart(task, None).layout.title.text == f"{STORM} · no plan yet"
    assert berth_chart(task, None, title="Model <b>x</b>").layout.title.text == "Model &lt;b&gt;x&lt;/b&gt;"


def test_ships_off_the_quay_widen_the_section_axis_and_entry_problems_show(pack) -> None:
    task = pack.get(BUSY)
    plan = _optimal(task)
    plan[2].update(section=20)  # 8 sections from 20: up to 27, the quay ends at 22
    plan.append({"ship": "NOBODY", "berth_hour": 1, "section": 2})
    fig = berth_chart(task, plan)
    assert tuple(fig.layout.yaxis.range) == (1.5, 27.5)
    assert _shapes(fig, "ship:2")["ship:2"]["line"]["color"] == VIOLATION_LINE
    assert "1 entry problems" in fig.layout.title.text


def test_hover_text_is_escaped(pack) -> None:
    task = copy.deepcopy(pack.get(BUSY))
    task["ships"][3]["name"] = "<img src=x onerror=alert(1)>"
    fig = berth_chart(task, _optimal(task))
    hover = next(t for t in fig.data if t.name == "ships")
    text = hover.hovertext[list(hover.customdata).index(3)]
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text


def test_side_by_side_highlights_ships_placed_differently(pack) -> None:
    task = pack.get(BUSY)
    fig = side_by_side(task, _perturbed(task), _optimal(task), titles=("model", "optimal"))
    top, bottom = _shapes(fig, "ship:", "x"), _shapes(fig, "ship:", "x2")
    assert len(top) == len(bottom) == 17
    for panel in (top, bottom):
        assert {n for n, s in panel.items() if s["fillcolor"] == MOVED_FILL} == {"ship:12"}
    assert top["ship:12"]["x0"] == 0 and bottom["ship:12"]["x0"] == 142
    assert {n for n, s in top.items() if s["line"]["color"] == VIOLATION_LINE} == {"ship:0", "ship:12"}
    assert not any(s["line"]["color"] == VIOLATION_LINE for s in bottom.values())
    subtitles = [a.text for a in fig.layout.annotations if a.text.startswith(("model", "optimal"))]
    assert subtitles == ["model · infeasible · 3 violations on 2 ships", "optimal · feasible · cost 87"]
    assert fig.layout.title.text == f"{BUSY} · 1 ships placed differently"
    assert {t.yaxis for t in fig.data if t.name == "ships"} == {"y", "y2"}


def test_paired_charts_share_one_time_axis_and_highlight_what_differs(pack) -> None:
    """Compare's two charts, side by side: a plan that ends a day later stretches both (each alone would end at its
    own last ship), and only the ships placed differently are highlighted, in both."""
    task = pack.get(BUSY)
    late = _optimal(task)
    late[12].update(berth_hour=260)  # well past the week's end: its chart alone runs on
    alone = [berth_chart(task, plan).layout.xaxis.range for plan in (late, _optimal(task))]
    assert alone[0] != alone[1]
    fig_a, fig_b = paired_charts(task, late, _optimal(task), titles=("A: model", "B: other"))
    assert fig_a.layout.xaxis.range == fig_b.layout.xaxis.range == alone[0]
    assert fig_a.layout.yaxis.range == fig_b.layout.yaxis.range
    for fig in (fig_a, fig_b):
        assert {n for n, s in _shapes(fig, "ship:").items() if s["fillcolor"] == MOVED_FILL} == {"ship:12"}
    assert fig_a.layout.title.text.startswith("A: model · ") and fig_b.layout.title.text == "B: other · feasible · cost 87"


def test_the_largest_task_draws_in_layers_not_per_ship(pack) -> None:
    task = pack.get(LARGEST)
    assert len(task["ships"]) == 59
    optimal, naive = task["reference"]["optimal_plan"], task["reference"]["naive_plan"]
    fig = berth_chart(task, optimal, previous_plan=naive)
    assert len(_shapes(fig, "ship:")) == 59
    # One trace per layer plus the legend, never one trace per ship: that is what keeps the chart fast
    # (its build time is measured by bench/, not asserted here).
    assert len(fig.data) <= 20


def _trace(fig: go.Figure, name: str) -> go.Scatter | None:
    return next((t for t in fig.data if t.name == name), None)


def test_a_moved_ship_leaves_an_outline_where_it_was_published_and_an_arrow(pack) -> None:
    task = pack.get(BUSY)
    ship = task["ships"][12]
    plan = _optimal(task)
    plan[12].update(berth_hour=ship["planned_hour"] + 30, section=ship["planned_section"])
    for entry in plan:  # every other ship exactly where it was published
        other = task["ships"][entry["ship"]]
        if entry["ship"] != 12 and other["planned_section"] is not None:
            entry.update(berth_hour=other["planned_hour"], section=other["planned_section"])
    fig = berth_chart(task, plan)
    outlines, arrows = _trace(fig, "published position"), _trace(fig, "moved from it")
    moved = {e["ship"] for e in plan if task["ships"][e["ship"]]["planned_section"] is not None
             and (e["berth_hour"], e["section"]) != (task["ships"][e["ship"]]["planned_hour"],
                                                      task["ships"][e["ship"]]["planned_section"])}
    assert 12 in moved
    assert list(outlines.x).count(None) == len(moved)  # one closed outline per moved ship
    assert outlines.x[0] == ship["planned_hour"] and outlines.y[0] == ship["planned_section"] - 0.5
    assert arrows.marker.symbol == "arrow" and list(arrows.x).count(None) == len(moved)
    assert arrows.x[0] < arrows.x[1]  # from the published place to the later one
    assert berth_chart(task, plan, published=False) and _trace(berth_chart(task, plan, published=False),
                                                                "published position") is None


def test_late_priority_and_emergency_ships_carry_a_mark(pack) -> None:
    task = copy.deepcopy(pack.get(BUSY))
    task["ships"][2]["weight"] = 3
    task["ships"][4]["berth_deadline"] = 10
    plan = _optimal(task)
    plan[5].update(berth_hour=plan[5]["berth_hour"] + 200)  # far past its due hour
    fig = berth_chart(task, plan)
    late, priority, emergency = _trace(fig, "late"), _trace(fig, "priority ship"), _trace(fig, "emergency ship")
    assert any("ship 5 departs" in text for text in late.hovertext)
    assert [text.startswith("ship 2: priority") for text in priority.hovertext] == [True]
    assert "ship 4: emergency, berth by h10" in emergency.hovertext[0]
    clean = berth_chart(pack.get(BUSY), _optimal(pack.get(BUSY)))
    assert _trace(clean, "emergency ship") is None


def test_the_crane_panel_counts_cranes_in_use_and_flags_the_hours_over_the_limit(pack) -> None:
    task = pack.get(BUSY)
    plan = _optimal(task)
    fig = berth_chart(task, plan)
    result = check(task, parse_plan(task, plan).entries)
    use = list(_trace(fig, "cranes in use").y)
    hour = result.ships[0].berth_hour
    expected = sum(sr.cranes for sr in result.ships.values() if sr.berth_hour <= hour < sr.finish) + sum(
        b.get("cranes", 0) for b in task["blocks"] if b["kind"] == "alongside" and b["start"] <= hour < b["end"])
    assert use[hour] == expected
    assert _trace(fig, "more cranes than available") is None
    crowded = [dict(e, berth_hour=40, cranes=task["ships"][e["ship"]]["max_cranes"]) for e in plan]
    over = _trace(berth_chart(task, crowded), "more cranes than available")
    assert over is not None and 40 in list(over.x)
    assert len(berth_chart(task, plan, cranes=False).data) < len(fig.data)


def test_labels_fit_their_boxes() -> None:
    from viewer.chart.layers import ship_label

    ship = {"id": 12, "name": "CMA CGM ALEXANDER VON HUMBOLDT"}
    wide = ship_label(ship, 40, 6, 5.0, 16.0)                           # 200 px: as much of the name as fits
    assert wide.startswith("12 CMA CGM ALEX") and wide.endswith("…") and len(wide) * 6.2 <= 200
    assert ship_label({"id": 3, "name": "STEEN"}, 40, 6, 5.0, 16.0) == "3 STEEN"
    assert ship_label(ship, 4, 6, 5.0, 16.0) == "12"                      # 20 px: the id alone
    assert ship_label(ship, 2, 6, 5.0, 16.0) == ""                        # 10 px: hover only
    assert ship_label(ship, 40, 0.5, 5.0, 16.0) == ""                     # too thin for a line of text
    for hours in range(1, 80):
        label = ship_label(ship, hours, 4, 5.0, 16.0)
        assert len(label) * 6.2 <= hours * 5.0 or label == ""


def test_the_preview_draws_the_published_plan_with_what_the_disruptions_broke(pack) -> None:
    from berth_env.baselines import published_plan
    from viewer.chart import preview_chart

    task = pack.get(STORM)
    result = check(task, parse_plan(task, published_plan(task)).entries)
    fig = preview_chart(task)
    red = {int(n.split(":")[1]) for n, s in _shapes(fig, "ship:").items() if s["line"]["color"] == VIOLATION_LINE}
    assert red == {v["ship"] for v in result.violations} and red
    assert fig.layout.title.text.startswith("The published plan, before any fix · infeasible")
