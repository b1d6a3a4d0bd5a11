"""The Play tab and the 1,100-task picker in a real browser (Debian's chromium through Playwright), with the tasks
dataset served by testkit/fakehub.py: a train task played by hand to a graded, saved `human` rollout; the picker's
filters; the form still in reach on a laptop and a phone; the offline note.

Screenshots go to test-artifacts/ (docs/screens/ comes from scripts/screenshots.py).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter

import pytest
from playwright.sync_api import Page, expect

from berth_env import load_pack
from catalog.task_dataset import TaskDataset, tasks_status, uninstall
from testkit.fakehub import running_fakehub
from testkit.task_hub import REPO, TRAIN_COUNT, TRAIN_TASK, published_dataset
from tests.app_fixtures import launched_app
from tests.browser.conftest import ARTIFACTS, PHONE
from tests.browser.conftest import DESKTOP as LAPTOP

pytestmark = pytest.mark.browser

WAIT = 15000  # ms: every step waits on a server round trip, and the test machine is shared


@pytest.fixture(scope="module")
def dataset_arena(tmp_path_factory):
    """The app with TASKS_DATASET served by a fake Hub (50 eval + 20 train tasks, 2 broken rows)."""
    root = tmp_path_factory.mktemp("play")
    with running_fakehub() as hub:
        published = published_dataset(hub)
        previous = os.environ.get("HF_ENDPOINT")
        os.environ["HF_ENDPOINT"] = hub.url  # read when the app's loader is made
        try:
            launched = launched_app(root, tasks_dataset=REPO, tasks_cache=root / "tasks-cache")
            app = launched.__enter__()
        finally:
            os.environ.pop("HF_ENDPOINT") if previous is None else os.environ.update(HF_ENDPOINT=previous)
        try:
            assert app.ctx.tasks.wait(timeout=60).state == "ready"
            app.hub, app.published, app.cache = hub, published, root / "tasks-cache"
            yield app
        finally:
            launched.__exit__(None, None, None)
            uninstall()


@pytest.fixture(autouse=True)
def dataset_served(request):
    """Another test of this worker may have switched the served tasks: serve the dataset again (from the cache)."""
    if "dataset_arena" in request.fixturenames:
        app = request.getfixturevalue("dataset_arena")
        if tasks_status().state != "ready":
            TaskDataset(REPO, cache_dir=app.cache, endpoint=app.hub.url).load()
    yield


def choose(page: Page, box: str, option: str) -> None:
    """Pick `option` (its label) in the Gradio dropdown `#box`."""
    page.locator(f"#{box} input").click()
    page.get_by_role("option", name=option, exact=True).click()


def pick_task(page: Page, box: str, task_id: str) -> None:
    field = page.locator(f"#{box} input")
    field.fill(task_id)
    page.get_by_role("option").filter(has_text=task_id).first.click()


def snap(page: Page, name: str) -> None:
    # Gradio fades the outputs of a running event; the picture is of the page at rest.
    page.wait_for_function("() => !document.querySelector('.pending, .generating')")
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def test_a_train_task_played_by_hand_checks_submits_and_lands_in_browse(dataset_arena, new_page):
    page = new_page(LAPTOP)
    page.goto(f"{dataset_arena.url}?tab=play")
    expect(page.locator("#play-check")).to_be_visible(timeout=30000)
    expect(page.locator("#play")).to_be_visible(timeout=WAIT)
    # The page was built while the dataset loaded; the picker catches up at once.
    expect(page.locator("#play-task")).to_contain_text(f"{50 + TRAIN_COUNT} tasks (50 eval · {TRAIN_COUNT} train)",
                                                       timeout=30000)
    choose(page, "play-split", f"train · {TRAIN_COUNT}")
    pick_task(page, "play-task", TRAIN_TASK)
    task = load_pack().get(TRAIN_TASK)
    expect(page.locator("#play-brief")).to_contain_text(TRAIN_TASK, timeout=WAIT)
    table = page.locator("#play-table")
    rows = table.locator(".virtual-row")  # the grid draws the rows in view (no <tbody>)
    expect(rows.nth(5).locator("[role=gridcell]").first).to_have_text(f"5 · {task['ships'][5]['name']}", timeout=WAIT)
    expect(page.locator("#play-planner")).to_contain_text("The published plan, unchanged", timeout=WAIT)
    expect(page.locator("#play-check")).to_have_text("Check (10 left)", timeout=WAIT)
    snap(page, "play-1440x900-idle")
    page.set_viewport_size(PHONE)
    snap(page, "play-390x844-idle")
    page.set_viewport_size(LAPTOP)

    # Move ship 5 (it arrives 20 h late in this task) by editing its berth hour: the chart follows, unjudged.
    cell = rows.nth(5).locator("[role=gridcell]").nth(2)
    cell.dblclick()
    editor = cell.locator("textarea")
    editor.fill("80")
    editor.press("Enter")
    expect(cell).to_contain_text("80", timeout=WAIT)
    expect(page.locator("#play-planner")).to_contain_text("Your draft", timeout=WAIT)

    page.locator("#play-check").click()
    verdict = page.locator("#play-verdict")
    expect(verdict).to_contain_text("check 1 of 10, 9 left", timeout=WAIT)
    expect(verdict).to_contain_text("infeasible", timeout=WAIT)
    expect(verdict.locator("li").first).to_contain_text("ship", timeout=WAIT)
    expect(page.locator("#play-check")).to_have_text("Check (9 left)", timeout=WAIT)
    snap(page, "play-1440x900-checked")

    page.get_by_text("Plan as JSON").click()  # the box holds the table's plan, the edit included, to copy
    shown = json.loads(page.locator("#play-json textarea").input_value())
    assert len(shown) == len(task["ships"]) and shown[5]["ship"] == 5 and shown[5]["berth_hour"] == 80
    page.locator("#play-json textarea").fill(json.dumps(task["reference"]["optimal_plan"]))
    page.locator("#play-load-json").click()
    expect(verdict).to_contain_text("The pasted plan is on the chart and in the table", timeout=WAIT)
    # Submit sends what the table holds: wait until the grid has drawn the pasted plan (ship 5 back from hour 80).
    pasted = next(p for p in task["reference"]["optimal_plan"] if p["ship"] == 5)
    expect(cell).to_have_text(str(pasted["berth_hour"]), timeout=WAIT)
    page.locator("#play-submit").click()
    expect(verdict).to_contain_text("Submitted · reward 1", timeout=30000)
    expect(page.locator("#play-grade")).to_contain_text("feasible, reward 1", timeout=WAIT)
    expect(page.locator("#play-optimal .js-plotly-plot")).to_be_visible(timeout=WAIT)
    expect(page.locator("#play-check")).to_be_disabled(timeout=WAIT)
    episode_id = re.search(r"rollout ([0-9a-f]{12})", verdict.inner_text()).group(1)
    snap(page, "play-1440x900-submitted")
    page.set_viewport_size(PHONE)
    snap(page, "play-390x844-submitted")

    record = dataset_arena.ctx.store.load(episode_id)
    assert record["model"] == "human" and record["task_id"] == TRAIN_TASK and record["reward"] == 1.0
    assert [s["tool"] for s in record["steps"]] == ["check_plan", "submit_plan"]
    assert record["steps"][0]["plan"][5]["berth_hour"] == 80

    page.set_viewport_size(LAPTOP)
    page.get_by_role("tab", name="Browse").click()  # the played rollout is in the list, newest first
    first_row = page.locator("#rollouts [role=row].virtual-row").first
    expect(first_row).to_contain_text("human", timeout=30000)
    expect(first_row).to_contain_text(TRAIN_TASK)


def test_the_picker_filters_1100_style_lists_and_keeps_run_in_reach(dataset_arena, new_page):
    page = new_page(LAPTOP)
    page.goto(dataset_arena.url)
    expect(page.locator("#task")).to_contain_text(f"50 eval · {TRAIN_COUNT} train", timeout=30000)
    for viewport in (PHONE, LAPTOP):  # Run in reach on a phone and on a laptop, with 1,100-style lists
        page.set_viewport_size(viewport)
        for element in ("#model", "#task", "#run"):
            box = page.locator(element).bounding_box()
            assert box and box["y"] + box["height"] <= viewport["height"], (element, viewport, box)
        page.screenshot(path=str(ARTIFACTS / f"run-picker-{viewport['width']}.png"))
    # The dropdown holds the filtered tasks only: 50 eval, then the train ones, then one tier of them.
    page.locator("#task input").click()
    expect(page.get_by_role("option")).to_have_count(50, timeout=WAIT)
    page.keyboard.press("Escape")
    choose(page, "split", f"train · {TRAIN_COUNT}")
    page.locator("#task input").click()
    expect(page.get_by_role("option")).to_have_count(TRAIN_COUNT, timeout=WAIT)
    page.keyboard.press("Escape")
    tiers = Counter(t["difficulty"] for t in load_pack().split("train"))
    tier = min(tiers, key=tiers.get)  # the rarest tier: the filter must narrow the list
    assert tiers[tier] < TRAIN_COUNT
    choose(page, "tier", tier)
    page.locator("#task input").click()
    expect(page.get_by_role("option")).to_have_count(tiers[tier], timeout=WAIT)
    page.keyboard.press("Escape")
    chosen = page.locator("#task input").input_value().split(" · ")[0]  # the label leads with the id
    assert load_pack().get(chosen)["difficulty"] == tier and load_pack().get(chosen)["split"] == "train"
    expect(page.locator("#preview-text")).to_contain_text(chosen, timeout=WAIT)  # the preview follows the pick


def test_offline_the_page_says_the_bundled_eval_tasks_serve(tmp_path, new_page):
    with running_fakehub() as hub:
        down_url = hub.url
    previous = os.environ.get("HF_ENDPOINT")
    os.environ["HF_ENDPOINT"] = down_url  # nothing listens there any more
    try:
        with launched_app(tmp_path, tasks_dataset=REPO, tasks_cache=tmp_path / "cache") as app:
            os.environ.pop("HF_ENDPOINT") if previous is None else os.environ.update(HF_ENDPOINT=previous)
            assert app.ctx.tasks.wait(timeout=30).state == "offline"
            page = new_page(LAPTOP)
            page.goto(f"{app.url}?tab=play")
            expect(page.locator("#play-task")).to_contain_text("offline: the 50 bundled eval tasks", timeout=30000)
            page.get_by_role("tab", name="Run").click()
            expect(page.locator("#task")).to_contain_text("offline: the 50 bundled eval tasks", timeout=WAIT)
    finally:
        os.environ.pop("HF_ENDPOINT", None) if previous is None else os.environ.update(HF_ENDPOINT=previous)
        uninstall()
