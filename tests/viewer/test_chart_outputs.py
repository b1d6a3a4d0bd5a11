"""One scene, two outputs: what a berth chart's scene holds for a known task and plan, the SVG drawn from it, and
untrusted text (ship names, block labels, titles with model names) staying inert in both outputs."""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any

import pytest

from berth_env import check, load_pack, parse_plan
from viewer.chart import (
    berth_chart,
    berth_chart_svg,
    berth_scene,
    chart_svg,
    optimum_scene,
    preview_scene,
    step_scene,
)
from viewer.chart.scene import MOVED_FILL, SHIP_FILL, VIOLATION_LINE, clean, tip_text

BUSY = "dock-24B-w06x1-busy-0"
LARGEST = "dock-36A-w35x3-extreme-0"
SVG = "{http://www.w3.org/2000/svg}"
# Everything the SVG output may contain: shapes, text and tooltips; nothing that links, runs or loads.
INERT_TAGS = {"svg", "g", "rect", "path", "line", "circle", "text", "title"}
LINK = '<a href="javascript:alert(1)">x</a>'


@pytest.fixture(scope="module")
def pack():
    return load_pack()


def _optimal(task: dict) -> list[dict]:
    return [dict(e) for e in task["reference"]["optimal_plan"]]


def _perturbed(task: dict) -> list[dict]:
    """Ship 12 moved onto ship 0's berth at hour 0: it arrives too early and the two overlap."""
    plan = _optimal(task)
    plan[12].update(berth_hour=0, section=4)
    return plan


def _ship_of(tip: Any) -> int:
    return int(tip_text(tip).split(" ", 1)[0])


def _svg_root(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return root


def _ship_rects(root: ET.Element) -> dict[int, ET.Element]:
    return {int(r.find(f"{SVG}title").text.split(" ", 1)[0]): r for r in root.iter(f"{SVG}rect")
            if r.get("class") == "ship"}


def _assert_inert(root: ET.Element) -> None:
    for element in root.iter():
        assert element.tag.removeprefix(SVG) in INERT_TAGS, element.tag
        for name in element.attrib:
            assert not name.lower().startswith("on") and "href" not in name.lower(), name


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


# -- the scene -----------------------------------------------------------------------------------------------------

def test_the_scene_holds_each_ship_its_violations_and_the_changes(pack) -> None:
    task = pack.get(BUSY)
    plan = _perturbed(task)
    result = check(task, parse_plan(task, plan).entries)
    scene = berth_scene(task, plan, previous_plan=_optimal(task))
    (panel,) = scene.panels
    ships = panel.ships()
    assert len(ships) == len(task["ships"]) == 17
    red = {int(b.name.split(":")[1]) for b in ships if b.edge == VIOLATION_LINE}
    assert red == {v["ship"] for v in result.violations} == {0, 12}
    assert {int(b.name.split(":")[1]) for b in ships if b.fill == MOVED_FILL} == {12}
    assert all(b.fill == SHIP_FILL for b in ships if b.name != "ship:12")
    rules = tip_text(next(b.tip for b in ships if b.name == "ship:12"))
    assert "cannot arrive" in rules and "overlaps ship 0" in rules and "changed since the previous draft" in rules
    assert scene.title == f"{BUSY} · infeasible · 3 violations on 2 ships · 1 changed"
    labels = {lb.key: lb.text for lb in panel.labels if lb.group == "ships"}
    assert len(labels) == 17 and labels[6] == "6 ONE FREEDOM"
    legend = [item.label for item in scene.legend]
    assert "breaks a rule (hover for which)" in legend and "changed since the previous draft" in legend
    assert {n.name for n in panel.notes} == {"outage:0"} and scene.cranes is not None
    assert len(scene.cranes.use) == int(scene.x.hi)


def test_the_scene_moves_a_ship_off_its_published_place_with_an_outline_and_an_arrow(pack) -> None:
    task = copy.deepcopy(pack.get(BUSY))
    task["ships"][2]["weight"] = 3
    plan = _optimal(task)
    for entry in plan:  # every ship where the port published it, but ship 12 a day and a half later
        ship = task["ships"][entry["ship"]]
        if ship["planned_section"] is not None:
            entry.update(berth_hour=ship["planned_hour"], section=ship["planned_section"])
    ship12 = task["ships"][12]
    plan[12].update(berth_hour=ship12["planned_hour"] + 36)
    (panel,) = berth_scene(task, plan).panels
    assert [m.ship for m in panel.moves] == [12]
    move = panel.moves[0]
    assert move.ghost[0] == ship12["planned_hour"] and move.ghost[2] == ship12["planned_section"] - 0.5
    assert move.start[0] < move.end[0]
    assert {m.kind for m in panel.marks} >= {"priority"}
    assert not berth_scene(task, plan, published=False).panels[0].moves


def test_clean_drops_controls_and_overrides_and_cuts_long_text() -> None:
    assert clean("MSC\x00 ANNA\u202e\u2066 \n\t II\ufeff") == "MSC ANNA II"
    assert clean("a\u200db") == "a\u200db"  # a zero-width joiner is part of a word (or an emoji): kept
    long = clean("x" * 100_000, 60)
    assert len(long) == 60 and long.endswith("…")
    assert clean("\ud800lone surrogate") == "lone surrogate"


# -- the SVG -------------------------------------------------------------------------------------------------------

def test_the_svg_draws_every_ship_and_its_broken_rules_as_tooltips(pack) -> None:
    task = pack.get(BUSY)
    svg = berth_chart_svg(task, _perturbed(task), previous_plan=_optimal(task))
    root = _svg_root(svg)
    width, height = float(root.get("width")), float(root.get("height"))
    assert root.get("viewBox") == f"0 0 {root.get('width')} {root.get('height')}" and width > 700 and height > 400
    _assert_inert(root)
    rects = _ship_rects(root)
    assert set(rects) == set(range(17))
    assert {s for s, r in rects.items() if r.get("stroke") == VIOLATION_LINE} == {0, 12}
    assert {s for s, r in rects.items() if r.get("fill") == MOVED_FILL} == {12}
    tooltip = rects[12].find(f"{SVG}title").text
    assert "cannot arrive" in tooltip and "overlaps ship 0" in tooltip
    texts = {t.text for t in root.iter(f"{SVG}text")}
    assert {"6 ONE FREEDOM", "quay section", "cranes", "breaks a rule (hover for which)"} <= texts
    assert f"{BUSY} · infeasible · 3 violations on 2 ships · 1 changed" in texts
    assert "<script" not in svg and "<a " not in svg


def test_every_chart_the_app_draws_can_be_an_svg(pack) -> None:
    task = pack.get(BUSY)
    steps = [{"turn": 1, "tool": "check_plan", "plan": _perturbed(task)},
             {"turn": 2, "tool": "submit_plan", "plan": _optimal(task)}]
    preview = _svg_root(chart_svg(preview_scene(task)))
    assert len(_ship_rects(preview)) == 17
    draft = _svg_root(chart_svg(step_scene(task, steps, 1, cranes=False)))
    assert any(t.text and t.text.startswith("Draft 2 of 2 (submitted in turn 2)") for t in draft.iter(f"{SVG}text"))
    assert not any(t.text == "cranes" for t in draft.iter(f"{SVG}text"))
    compare = _svg_root(chart_svg(optimum_scene(task, _perturbed(task), label="the model's last plan")))
    ships = [r for r in compare.iter(f"{SVG}rect") if r.get("class") == "ship"]
    assert len(ships) == 34 and sum(r.get("fill") == MOVED_FILL for r in ships) == 2
    subtitles = [t.text for t in compare.iter(f"{SVG}text") if t.text and " · " in t.text]
    assert "the model's last plan · infeasible · 3 violations on 2 ships" in subtitles
    assert step_scene(None, steps, 0) is None and optimum_scene(task | {"reference": {}}) is None


def test_the_largest_task_svg_has_all_59_ships(pack) -> None:
    task = pack.get(LARGEST)
    root = _svg_root(berth_chart_svg(task, task["reference"]["optimal_plan"],
                                     previous_plan=task["reference"]["naive_plan"]))
    assert len(_ship_rects(root)) == 59
    assert any(r.get("class") == "tail" for r in root.iter(f"{SVG}rect"))  # wind-waiting ships on this task


# -- untrusted text, both outputs ----------------------------------------------------------------------------------

def _hostile(pack) -> dict:
    task = copy.deepcopy(pack.get(BUSY))
    task["ships"][6]["name"] = LINK                                       # ship 6's box is wide: the label shows
    task["ships"][3]["name"] = "\u202eevil\x00<script>alert(1)</script>" + "A" * 100_000
    task["blocks"][1]["label"] = "<img src=x onerror=alert(1)>"
    return task


def test_a_ship_named_like_a_link_stays_text_in_the_plotly_chart(pack) -> None:
    task = _hostile(pack)
    model = "<a href='javascript:alert(1)'>model</a>\x00\u202e" + "M" * 100_000
    fig = berth_chart(task, _optimal(task), title=f"{model} · draft 1")
    strings = list(_strings(fig.to_plotly_json()))
    for tag in ("<a", "<script", "<img"):
        assert not any(tag in s.lower() for s in strings), tag
    assert not any("\x00" in s or "\u202e" in s for s in strings)
    ships = next(t for t in fig.data if t.name == "ships")
    label = ships.text[list(ships.customdata).index(6)]
    assert label.startswith("6 &lt;a href=")   # what the ship is called, shown as written
    hover = ships.hovertext[list(ships.customdata).index(6)]
    assert "&lt;a href=&quot;" not in hover and '&lt;a href="javascript:alert(1)"&gt;x&lt;/a&gt;' in hover
    assert len(fig.layout.title.text) < 400                              # a 100 KB model name is cut
    closed = next(s for s in fig.layout.shapes if s.name == "closed:1")
    assert closed.label.text == "&lt;img src=x onerror=alert(1)&gt;"


def test_hostile_names_leave_the_svg_well_formed_and_inert(pack) -> None:
    task = _hostile(pack)
    svg = berth_chart_svg(task, _optimal(task), title="\x00<script>alert(1)</script>\u202e" + "T" * 100_000)
    root = _svg_root(svg)   # NUL or a broken escape would not parse
    _assert_inert(root)
    assert len(svg) < 60_000                                              # 100 KB names do not make a 100 KB chart
    tooltips = [t.text for t in root.iter(f"{SVG}title")]
    assert any(LINK in t for t in tooltips)                              # the name, as text
    assert any(t.startswith("3 evil<script>alert(1)</script>AAA") and len(t) < 1000 for t in tooltips)
    texts = [t.text or "" for t in root.iter(f"{SVG}text")]
    assert "<img src=x onerror=alert(1)>" in texts and any(t.startswith("<script>alert(1)</script>TTT") for t in texts)
    assert not any("\u202e" in t or "\x00" in t for t in texts + tooltips)
