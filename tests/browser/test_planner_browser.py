"""Play's berth chart as the editor, in Debian's chromium: on `dock-24B-w06x1-busy-0` every ship is moved from
the published plan to its place in the proven optimum using only the chart (the mouse and the keyboard on a
laptop, taps and the nudge buttons on a phone), the problems the chart shows agree with the checker's after every
draft, and the submitted plan is graded feasible and saved as a `human` rollout that says which aids were used.

Screenshots of each step go to docs/screens/play-planner-*.png.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from berth_env import load_pack
from berth_env.baselines import published_plan
from rollouts.filters import Filters
from testkit.app import launched_app
from testkit.records import make_record
from testkit.tasks import TASK_ID
from tests.browser.conftest import DESKTOP, PHONE
from tests.browser.planner_page import (
    EDITOR,
    assert_overlay_agrees,
    drag,
    editor_button,
    geometry,
    nudge,
    placed,
    reachable,
    settled,
    shown,
)

pytestmark = pytest.mark.browser

SCREENS = Path(__file__).resolve().parents[2] / "docs" / "screens"
WAIT = 20000


MODEL = "openai:gpt-test"
MODEL_ROLLOUT = "0123456789ab"


def model_rollout() -> dict:
    """A model's submitted rollout of the task whose last plan is the naive re-plan (feasible, far from optimal)."""
    naive = load_pack().get(TASK_ID)["reference"]["naive_plan"]
    step = {"turn": 1, "tool": "submit_plan", "plan": naive, "result": {"feasible": True, "reward": 0.2}}
    return make_record(seed=29, task_id=TASK_ID, model=MODEL, end_reason="submitted", episode_id=MODEL_ROLLOUT,
                       steps=[step])


@pytest.fixture(scope="module")
def play_app(tmp_path_factory):
    with launched_app(tmp_path_factory.mktemp("planner"), records=[model_rollout()]) as app:
        yield app


def shot(page: Page, name: str) -> None:
    page.wait_for_function("() => !document.querySelector('.pending, .generating')")
    page.screenshot(path=str(SCREENS / f"play-planner-{name}.png"))


def open_task(page: Page, url: str) -> dict:
    page.goto(f"{url}?tab=play")
    expect(page.locator(f"{EDITOR} .pl-chart svg")).to_be_visible(timeout=30000)
    page.locator("#play-task input").fill(TASK_ID)
    page.get_by_role("option").filter(has_text=TASK_ID).first.click()
    expect(page.locator(f"{EDITOR} .pl-chart svg")).to_contain_text("The published plan, unchanged", timeout=WAIT)
    settled(page)
    return load_pack().get(TASK_ID)


def changes(task: dict) -> list[tuple[int, int, int, int]]:
    """(ship, hours, sections, cranes) taking each ship from the published plan to the optimum."""
    published = {e["ship"]: e for e in published_plan(task)}
    out = []
    for goal in task["reference"]["optimal_plan"]:
        was = published[goal["ship"]]
        delta = (goal["berth_hour"] - was["berth_hour"], goal["section"] - was["section"], goal["cranes"] - was["cranes"])
        if any(delta):
            out.append((goal["ship"], *delta))
    return out


def in_reach(page: Page, pending: list[tuple[int, int, int, int]]):
    """The changes in an order a person could do them: next, the first ship not covered by others."""
    pending = list(pending)
    while pending:
        index = next((i for i, change in enumerate(pending) if reachable(page, change[0]) is not None), None)
        assert index is not None, f"ships {[c[0] for c in pending]} are all covered"
        yield pending.pop(index)


def table_plan(page: Page, expected: list[dict] | None = None) -> list[dict]:
    """The plan the table (the second view of the draft) holds, read through its JSON box; with `expected`, once
    it shows that plan (the table follows the chart a moment after the problems are drawn)."""
    box = page.locator("#play-json textarea")
    if not box.is_visible():
        page.get_by_text("Plan as JSON").click()
    deadline = time.monotonic() + WAIT / 1000
    while expected is not None and json.loads(box.input_value() or "[]") != expected and time.monotonic() < deadline:
        page.wait_for_timeout(100)
    return json.loads(box.input_value())


def submit_and_read(page: Page, app) -> dict:
    page.locator("#play-submit").click()
    verdict = page.locator("#play-verdict")
    expect(verdict).to_contain_text("Submitted · reward 1", timeout=30000)
    episode_id = re.search(r"rollout `?([0-9a-f]{12})", verdict.inner_text()).group(1)
    return app.ctx.store.load(episode_id)


def test_a_laptop_drags_every_ship_to_the_optimum_with_mouse_and_keys(play_app, new_page):
    page = new_page(DESKTOP)
    task = open_task(page, play_app.url)
    shot(page, "1-start-1440x900")
    draft = [dict(e) for e in published_plan(task)]
    assert_overlay_agrees(page, task, draft)
    for number, (ship, hours, sections, cranes) in enumerate(in_reach(page, changes(task))):
        entry = placed(draft, ship)
        if number % 4 == 3:  # every fourth ship by the keyboard alone: a click selects, arrows nudge
            page.mouse.click(**{k: v for k, v in geometry(page, ship).items() if k in "xy"})
            for key in ["Shift+ArrowRight"] * (abs(hours) // 6) + ["ArrowRight"] * (abs(hours) % 6):
                page.keyboard.press(key if hours > 0 else key.replace("Right", "Left"))
            for _ in range(abs(sections)):
                page.keyboard.press("ArrowUp" if sections > 0 else "ArrowDown")
        else:
            drag(page, ship, hours, sections)
            page.mouse.click(**{k: v for k, v in geometry(page, ship).items() if k in "xy"})
        for _ in range(abs(cranes)):
            page.keyboard.press("+" if cranes > 0 else "-")
        settled(page)
        entry.update(berth_hour=entry["berth_hour"] + hours, section=entry["section"] + sections,
                     cranes=entry["cranes"] + cranes)
        expect(page.locator(f"{EDITOR} .pl-status")).to_contain_text(
            f"ship {ship} {task['ships'][ship]['name']}, hour {entry['berth_hour']}, section {entry['section']}")
        assert_overlay_agrees(page, task, draft)
        if number == 1:
            shot(page, "2-dragging-1440x900")
    optimum = sorted(task["reference"]["optimal_plan"], key=lambda e: e["ship"])
    assert table_plan(page, optimum) == optimum
    assert shown(page)["red"] == []
    expect(page.locator(f"{EDITOR} .pl-chart svg")).to_contain_text("no rule broken")
    # Only check_plan tells the cost: neither the chart nor its hovers show a number for it.
    assert not re.search(r"cost\s*\d", page.locator(f"{EDITOR}").evaluate("e => e.innerHTML"))
    shot(page, "3-feasible-1440x900")
    page.locator("#play-check").click()
    expect(page.locator("#play-verdict")).to_contain_text("feasible · cost", timeout=WAIT)
    record = submit_and_read(page, play_app)
    assert record["model"] == "human"
    assert record["player"]["aids"] == ["chart_editor", "live_rule_problems"]
    assert record["final"]["grade"]["feasible"] is True
    shot(page, "4-submitted-1440x900")


def test_undo_redo_reset_lock_and_a_ship_off_the_quay_snaps_back(play_app, new_page):
    page = new_page(DESKTOP)
    task = open_task(page, play_app.url)
    first = task["first_section"]
    drag(page, 5, 20, 0)
    status = page.locator(f"{EDITOR} .pl-status")
    expect(status).to_contain_text("hour 74")
    page.keyboard.press("Control+z")
    settled(page)
    expect(status).to_contain_text("hour 54")
    page.keyboard.press("Control+Shift+z")
    settled(page)
    expect(status).to_contain_text("hour 74")
    # Off the quay: the ship is back where it was, and the page says why.
    drag(page, 5, 0, -(placed(published_plan(task), 5)["section"] - first) - 3)
    expect(page.locator(f"{EDITOR} .pl-msg")).to_contain_text("would leave the quay")
    expect(status).to_contain_text("hour 74, section 3")
    editor_button(page, "lock").click()
    drag(page, 5, 6, 0)
    expect(page.locator(f"{EDITOR} .pl-msg")).to_contain_text("locked")
    expect(status).to_contain_text("hour 74")
    editor_button(page, "reset").click()
    settled(page)
    assert placed(table_plan(page, published_plan(task)), 5)["berth_hour"] == 54
    # The server gone (restarted, the connection dropped): the page says so and the draft stays on the chart.
    page.route(re.compile(r"/component_server"), lambda route: route.abort())
    drag(page, 3, 4, 0)
    expect(page.locator(f"{EDITOR} .pl-msg")).to_contain_text("The server did not answer")
    expect(status).to_contain_text("ship 3 STEEN, hour 40")
    expect(status).to_contain_text("not redrawn")


def test_a_phone_taps_and_nudges_every_ship_to_the_optimum(play_app, browser_context):
    context = browser_context.browser.new_context(viewport=PHONE, has_touch=True, is_mobile=True)
    try:
        page = context.new_page()
        task = open_task(page, play_app.url)
        shot(page, "1-start-390x844")
        draft = [dict(e) for e in published_plan(task)]
        for number, (ship, hours, sections, cranes) in enumerate(in_reach(page, changes(task))):
            at = geometry(page, ship)
            page.touchscreen.tap(at["x"], at["y"])
            expect(page.locator(f"{EDITOR} .pl-status")).to_contain_text(f"Selected: ship {ship} ")
            nudge(page, hours, sections, cranes, tap=True)
            entry = placed(draft, ship)
            entry.update(berth_hour=entry["berth_hour"] + hours, section=entry["section"] + sections,
                         cranes=entry["cranes"] + cranes)
            assert_overlay_agrees(page, task, draft)
            if number == 0:
                shot(page, "2-selected-390x844")
        optimum = sorted(task["reference"]["optimal_plan"], key=lambda e: e["ship"])
        assert table_plan(page, optimum) == optimum
        shot(page, "3-feasible-390x844")
        record = submit_and_read(page, play_app)
        assert record["model"] == "human" and record["final"]["grade"]["feasible"] is True
        shot(page, "4-submitted-390x844")
    finally:
        context.close()


def test_try_to_beat_a_models_rollout_from_its_share_page_is_saved_as_the_centaur(play_app, new_page):
    page = new_page(DESKTOP)
    page.goto(f"{play_app.url}r/{MODEL_ROLLOUT}")
    page.locator("#try-to-beat").click()
    verdict = page.locator("#play-verdict")
    expect(verdict).to_contain_text(f"saved as human+{MODEL}", timeout=30000)
    editor = page.locator(f"{EDITOR} .pl-chart svg")
    expect(editor).to_contain_text(f"{MODEL}'s plan ({MODEL_ROLLOUT}), unchanged", timeout=WAIT)
    settled(page)
    task = load_pack().get(TASK_ID)
    naive = sorted(task["reference"]["naive_plan"], key=lambda e: e["ship"])
    assert table_plan(page, naive) == naive
    shot(page, "5-try-to-beat-1440x900")
    # One ship moved on the chart (ship 0 an hour later), the rest as the model left them; then submitted.
    drag(page, 0, 1, 0)
    draft = [dict(e, berth_hour=e["berth_hour"] + 1) if e["ship"] == 0 else dict(e) for e in naive]
    assert_overlay_agrees(page, task, draft)
    assert table_plan(page, draft) == draft
    page.locator("#play-submit").click()
    expect(verdict).to_contain_text("Submitted · reward", timeout=30000)
    episode_id = re.search(r"rollout `?([0-9a-f]{12})", verdict.inner_text()).group(1)
    record = play_app.ctx.store.load(episode_id)
    assert record["model"] == f"human+{MODEL}"
    assert record["player"]["start"] == {"from": MODEL_ROLLOUT, "model": MODEL}
    assert record["final"]["plan"] == draft
    play_app.ctx.store.flush()
    play_app.ctx.archive.refresh_local(force=True)
    models = {line["model"] for line in play_app.ctx.archive.board(Filters())}
    assert {f"human+{MODEL}", MODEL} <= models, models


def test_a_phone_zooms_the_week_and_scrolls_it_sideways_and_a_ship_still_moves(play_app, browser_context):
    context = browser_context.browser.new_context(viewport=PHONE, has_touch=True, is_mobile=True)
    try:
        page = context.new_page()
        open_task(page, play_app.url)
        chart = page.locator(f"{EDITOR} .pl-chart")
        widths = "(el) => [el.scrollWidth, el.clientWidth]"
        scroll, box = chart.evaluate(widths)
        assert scroll <= box + 1  # the whole week fits the phone
        page.locator(f"{EDITOR} [data-act='zoom+']").tap()
        page.locator(f"{EDITOR} [data-act='zoom+']").tap()
        expect(page.locator(f"{EDITOR} .pl-msg")).to_contain_text("3x")
        scroll, box = chart.evaluate(widths)
        assert scroll >= 2.5 * box  # three weeks' widths: the rest is a sideways scroll away
        chart.evaluate("(el) => { el.scrollLeft = el.scrollWidth / 3; }")
        at = geometry(page, 5)
        page.touchscreen.tap(at["x"], at["y"])
        expect(page.locator(f"{EDITOR} .pl-status")).to_contain_text("Selected: ship 5 ")
        nudge(page, 1, 0, 0, tap=True)
        expect(page.locator(f"{EDITOR} .pl-status")).to_contain_text("hour 55")
        shot(page, "6-zoomed-390x844")
        page.locator(f"{EDITOR} [data-act='zoom-']").tap()
        page.locator(f"{EDITOR} [data-act='zoom-']").tap()
        expect(page.locator(f"{EDITOR} .pl-msg")).to_contain_text("The whole week")
        scroll, box = chart.evaluate(widths)
        assert scroll <= box + 1
    finally:
        context.close()

