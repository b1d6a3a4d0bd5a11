"""The share image: a 1200 x 630 PNG of the final berth chart with the model, the task, the reward and the cost,
drawn in this process from the chart's SVG with the bundled font; hostile facts stay text; the raster helper
process the server draws in, started again whenever it dies."""

from __future__ import annotations

import io
import os
import signal
import sys
import xml.etree.ElementTree as ET

import pytest

from berth_env import load_pack
from viewer.chart.card import CARD_H, CARD_W, FONT_DIR, share_png, share_svg
from viewer.chart.raster import HELPER, Rasteriser, svg_png
from viewer.chart.scene import SHIP_FILL, VIOLATION_LINE

LARGEST = "dock-36A-w35x3-extreme-0"
BUSY = "dock-24B-w06x1-busy-0"
SVG = "{http://www.w3.org/2000/svg}"
# Pillow comes with gradio; it only reads the PNG back here, so the card needs no declared dependency on it.
Image = pytest.importorskip("PIL.Image")


@pytest.fixture(scope="module")
def pack():
    return load_pack()


def _rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))


def _texts(svg: str) -> list[str]:
    return [t.text or "" for t in ET.fromstring(svg).iter(f"{SVG}text")]


def test_the_share_image_is_a_1200x630_png_of_the_chart(pack) -> None:
    task = pack.get(LARGEST)
    png = share_png(task, task["reference"]["optimal_plan"], model="anthropic:claude-sonnet-5-5@high",
                    reward=0.91, feasible=True)
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG" and image.size == (CARD_W, CARD_H)
    colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert len(colours) > 200                                           # text, ships, grid: not a blank card
    counts = {rgb: n for n, rgb in colours}
    assert counts.get(_rgb(SHIP_FILL), 0) > 20_000                      # the ships are drawn, and large
    assert counts.get(_rgb(VIOLATION_LINE), 0) < 50                     # the optimum breaks no rule


def test_an_infeasible_plan_shows_red_outlines_and_says_so(pack) -> None:
    task = pack.get(BUSY)
    plan = [dict(e) for e in task["reference"]["optimal_plan"]]
    plan[12].update(berth_hour=0, section=4)
    svg = share_svg(task, plan, model="baseline:hasty", reward=0.0)
    texts = _texts(svg)
    assert "infeasible" in texts and "reward 0.0" in texts
    assert any(r.get("stroke") == VIOLATION_LINE for r in ET.fromstring(svg).iter(f"{SVG}rect"))
    image = Image.open(io.BytesIO(share_png(task, plan, model="baseline:hasty", reward=0.0))).convert("RGB")
    assert {n for n, rgb in image.getcolors(maxcolors=1 << 20) if rgb == _rgb(VIOLATION_LINE)} != set()


def test_the_card_names_the_model_the_task_its_tier_the_reward_and_the_cost(pack) -> None:
    task = pack.get(LARGEST)
    svg = share_svg(task, task["reference"]["naive_plan"], model="openai:gpt-6.1-sol@high", reward=0.2005)
    texts = _texts(svg)
    assert texts[:3] == ["BERTH-PLANNING AGENT ARENA", "openai:gpt-6.1-sol@high",
                         f"{LARGEST} · tier extreme · 59 ships"]
    assert "reward 0.2005" in texts and "feasible" in texts            # feasibility from the plan's own check
    optimum = task["reference"]["optimal_cost"]
    assert f"cost 5,403 · optimum {optimum:,} (+{(5403 - optimum) / optimum * 100:.1f} %)" in texts
    given = _texts(share_svg(task, None, model="m", reward=1.0, feasible=True, cost=953, optimal_cost=953))
    assert "cost 953 · optimum 953 (optimal)" in given and "reward 1.0" in given


def test_hostile_facts_stay_text_are_cut_and_still_draw(pack) -> None:
    task = pack.get(BUSY)
    model = "<script>alert(1)</script>\u202e\x00<a href='javascript:alert(1)'>x</a>" + "M" * 100_000
    svg = share_svg(task, task["reference"]["optimal_plan"], model=model, reward=0.5,
                    task_id="javascript:alert(1)\x00", tier="<b>hard</b>")
    root = ET.fromstring(svg)                                          # well-formed: NUL dropped, markup escaped
    assert {e.tag.removeprefix(SVG) for e in root.iter()} <= {"svg", "g", "rect", "path", "line", "circle",
                                                              "text", "title"}
    texts = _texts(svg)
    assert texts[1].startswith("<script>alert(1)</script><a href=") and len(texts[1]) <= 60
    assert texts[2] == "javascript:alert(1) · tier <b>hard</b> · 17 ships"
    assert len(svg) < 80_000 and "\u202e" not in svg
    png = share_png(task, task["reference"]["optimal_plan"], model=model, reward=0.5)
    assert Image.open(io.BytesIO(png)).size == (CARD_W, CARD_H)


def test_a_task_the_space_lacks_still_gets_a_card() -> None:
    svg = share_svg(None, [{"ship": 0, "berth_hour": 1, "section": 2}], model="hf:org/model",
                    task_id="dock-99Z-w01x1-busy-0", tier="busy", reward=0.3, feasible=False)
    texts = _texts(svg)
    assert "dock-99Z-w01x1-busy-0 · tier busy" in texts and "infeasible" in texts
    assert any("no chart" in t for t in texts)


def test_the_font_is_bundled_with_its_licence() -> None:
    assert {p.name for p in FONT_DIR.glob("*.ttf")} == {"LiberationSans-Regular.ttf", "LiberationSans-Bold.ttf"}
    assert "SIL OPEN FONT LICENSE Version 1.1" in (FONT_DIR / "LICENSE").read_text()


def test_the_raster_helper_is_started_again_however_often_it_dies() -> None:
    """Issue 27.5: a helper killed twice within one picture costs that picture only (drawn here); every later one
    is drawn by a new helper again, however many times helpers die."""
    svg = share_svg(None, None, model="m", task_id="dock-99Z-w01x1-busy-0", reward=0.5)
    expected = svg_png(svg)
    dies_on_first_svg = [sys.executable, "-c", "import sys; sys.stdin.buffer.read(8); sys.exit(9)"]
    raster = Rasteriser(timeout_s=20, command=dies_on_first_svg)
    try:
        assert raster.png(svg) == expected  # both helpers died on it: drawn in this process, this once
        assert not raster.in_process
        raster.command = HELPER
        helpers = set()
        for _ in range(4):  # kill -9 after every picture: the next one starts a new helper
            assert raster.png(svg) == expected
            helper = raster._process
            assert helper is not None and helper.poll() is None and not raster.in_process
            helpers.add(helper.pid)
            os.kill(helper.pid, signal.SIGKILL)
            helper.wait(timeout=10)
        assert len(helpers) == 4
        assert raster.png(svg) == expected and raster._process.poll() is None
    finally:
        raster.close()


def test_a_helper_that_cannot_start_is_tried_again_later(tmp_path) -> None:
    svg = share_svg(None, None, model="m", task_id="dock-99Z-w01x1-busy-0")
    raster = Rasteriser(command=[str(tmp_path / "no-such-program")])
    try:
        assert raster.png(svg) == svg_png(svg) and raster.in_process and raster._process is None
        raster.command, raster._start_again_at = HELPER, 0.0  # START_AGAIN_S later
        assert raster.png(svg) == svg_png(svg) and not raster.in_process and raster._process is not None
    finally:
        raster.close()
