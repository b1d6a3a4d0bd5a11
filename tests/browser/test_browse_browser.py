"""Browse as an explorer (issue 11), in Debian's chromium: a share link lands on its rollout, the list sits beside
the open rollout, search and filters live in the URL (back and forward included), the leaderboard and the heatmap
lead somewhere, compare shows only what differs, exports download, and model text stays text."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from playwright.sync_api import Page, expect

from testkit.app import launched_app
from testkit.records import make_record, make_records
from tests.browser.conftest import ARTIFACTS

pytestmark = pytest.mark.browser

TASK = "dock-24B-w06x1-busy-0"
XSS_MODEL = 'vllm:<img src=x onerror="window.__xss = 1">'
DESKTOP, PHONE = {"width": 1440, "height": 900}, {"width": 390, "height": 844}
ORANGE = "rgb(245, 133, 24)"  # a highlighted ship (#F58518) as the browser reports it


def shown_record() -> dict:
    """A submitted rollout with reasoning and several plans, so every part of the viewer has something to show."""
    for seed in range(200):
        record = make_record(seed=seed, task_id=TASK, model="anthropic:claude-sonnet-5-5@high",
                             end_reason="submitted", episode_id=f"share{seed:04d}", started="2026-11-29T10:00:00Z")
        reasoning = [m for m in record["messages"] if m.get("reasoning")]
        if len(record["steps"]) >= 3 and reasoning and record["final"]["grade"]["feasible"]:
            return record
    raise AssertionError("no suitable record")


@pytest.fixture(scope="module")
def browse(tmp_path_factory):
    shared = shown_record()
    rival = make_record(seed=7, task_id=TASK, model="openai:gpt-5.5@medium", end_reason="submitted",
                        episode_id="rival0001", started="2026-11-28T09:00:00Z")
    rival["messages"].append({"role": "assistant", "content": "The quayside gantry forces ship 4 later.",
                              "reasoning": "", "stop": "end_turn", "tool_calls": []})
    hostile = make_record(seed=8, model=XSS_MODEL, episode_id="hostile01", started="2026-11-27T09:00:00Z")
    others = make_records(60, seed=12)
    with launched_app(tmp_path_factory.mktemp("browse-ui"), records=[shared, rival, hostile, *others]) as app:
        yield app, shared, rival


def fresh(browser_context_factory, size: dict = DESKTOP) -> Page:
    page = browser_context_factory().new_page()
    page.set_viewport_size(size)
    return page


def cell(page: Page, table: str, row: int, column: int):
    """One cell of a gr.Dataframe (a virtual table: rows and cells are ARIA roles, not <tr>/<td>)."""
    return page.locator(f"{table} [role=row].virtual-row").nth(row).locator("[role=gridcell]").nth(column)


def rows_of(page: Page, table: str):
    return page.locator(f"{table} [role=row].virtual-row")


def in_first_viewport(page: Page, selector: str) -> bool:
    box = page.locator(selector).first.bounding_box()
    return box is not None and 0 <= box["y"] < page.viewport_size["height"]


def test_a_share_link_lands_on_its_rollout(browse, browser_context_factory):
    app, record, _ = browse
    page = fresh(browser_context_factory)
    page.goto(f"{app.url}?rollout={record['episode_id']}")
    detail = page.locator("#rollout-detail")
    expect(detail).to_be_visible(timeout=20000)
    head = page.locator("#rollout-head")
    for part in ("anthropic:claude-sonnet-5-5@high", TASK, "tier busy", f"reward {record['reward']:.4f}".rstrip("0"),
                 "ended: submitted", "2026-11-29 10:00 UTC"):
        expect(head).to_contain_text(part)
    expect(page.locator("#browse-chart .js-plotly-plot")).to_be_visible()
    expect(page.locator("#browse-chat .message").first).to_be_visible()
    for selector in ("#rollout-head", "#browse-chart", "#browse-chat"):
        assert in_first_viewport(page, selector), f"{selector} starts below the first viewport"
    expect(page).to_have_title(f"anthropic:claude-sonnet-5-5@high on {TASK} · Berth arena")
    expect(page.locator("#share-link input, #share-link textarea")).to_have_value(
        re.compile(rf"\?tab=browse&rollout={record['episode_id']}$"))
    page.locator("#copy-link").click()
    expect(page.locator("#copy-link")).to_have_text("✓ Copied")
    page.screenshot(path=str(ARTIFACTS / "browse-share-link.png"))
    page.get_by_text("Beside the proven optimum").click()  # drawn on demand, below the first view
    expect(page.locator("#browse-optimal")).to_contain_text("proven optimum (cost 87)", timeout=20000)
    page.locator("#back-to-list").click()
    expect(detail).to_be_hidden()
    expect(page).not_to_have_url(re.compile("rollout="))


@pytest.mark.parametrize("rollout, message", [("0123456789ab", "No rollout"), ("..%2F..%2Fetc%2Fpasswd", "malformed")])
def test_an_unknown_or_malformed_id_gets_a_clear_message(browse, browser_context_factory, rollout, message):
    app, _, _ = browse
    page = fresh(browser_context_factory)
    page.goto(f"{app.url}?tab=browse&rollout={rollout}")
    expect(page.locator("#rollout-message")).to_contain_text(message, timeout=20000)
    expect(page.locator("#rollout-detail")).to_be_hidden()


def test_the_list_sits_beside_the_open_rollout_and_rows_open_in_place(browse, browser_context_factory):
    app, _, _ = browse
    page = fresh(browser_context_factory)
    page.goto(f"{app.url}?tab=browse")
    table = page.locator("#rollouts")
    expect(table).to_contain_text(TASK, timeout=20000)
    expect(page.locator("#rollout-detail")).to_be_hidden()  # nothing empty before a rollout is open
    headers = [h.strip() for h in table.locator("[role=columnheader]").all_inner_texts() if h.strip()]
    assert headers[:6] == ["model", "task", "tier", "reward", "ended", "when"]
    cell(page, "#rollouts", 2, 1).click()
    expect(page.locator("#rollout-detail")).to_be_visible(timeout=20000)
    assert page.evaluate("window.scrollY") == 0
    list_box, detail_box = (page.locator(s).bounding_box() for s in ("#rollout-list", "#rollout-detail"))
    assert list_box["x"] + list_box["width"] <= detail_box["x"] + 1  # side by side on a wide screen
    first = page.locator("#rollout-head").inner_text()
    cell(page, "#rollouts", 2, 1).click()  # focus inside the list, then walk it
    page.keyboard.press("ArrowDown")
    expect(page.locator("#rollout-head")).not_to_have_text(first, timeout=10000)
    page.screenshot(path=str(ARTIFACTS / "browse-list-and-detail.png"))


def test_on_a_phone_the_open_rollout_comes_first(browse, browser_context_factory):
    app, record, _ = browse
    page = fresh(browser_context_factory, PHONE)
    page.goto(f"{app.url}?tab=browse&rollout={record['episode_id']}")
    expect(page.locator("#rollout-detail")).to_be_visible(timeout=20000)
    detail, listing = (page.locator(s).bounding_box() for s in ("#rollout-detail", "#rollout-list"))
    assert detail["y"] < listing["y"]
    assert in_first_viewport(page, "#rollout-head")


def test_search_filters_sort_and_page_live_in_the_url_with_back_and_forward(browse, browser_context_factory):
    app, _, _ = browse
    page = fresh(browser_context_factory)
    page.goto(f"{app.url}?tab=browse")
    expect(page.locator("#rollouts")).to_contain_text(TASK, timeout=20000)
    box = page.locator("#browse-search textarea, #browse-search input").first
    box.fill("quaysid")  # the start of a word only the rival wrote
    box.press("Enter")
    expect(page.locator("#page-info")).to_contain_text("1–1 of 1", timeout=10000)
    expect(page).to_have_url(re.compile(r"[?&]q=quaysid"))
    expect(page.locator("#rollouts")).to_contain_text("openai:gpt-5.5@medium")
    box.fill("")
    box.press("Enter")
    # The list settles before the next change: two changes sent at once both start from the same state, and the
    # later answer wins (see the closing note).
    expect(page.locator("#page-info")).to_contain_text("of 63", timeout=10000)
    tier = page.locator("#f-tier input")
    tier.click()
    page.get_by_role("option", name="storm").click()
    expect(page).to_have_url(re.compile(r"tier=storm"), timeout=10000)
    storm = page.locator("#page-info").inner_text()
    tier.click()
    page.get_by_role("option", name="storm").click()  # and off again: all 63 rows, two pages
    expect(page).not_to_have_url(re.compile(r"tier="), timeout=10000)
    page.locator("#page-next").click()
    expect(page).to_have_url(re.compile(r"page=2"), timeout=10000)
    expect(page.locator("#page-info")).to_contain_text("page 2 of 2")
    page.go_back()
    expect(page.locator("#page-info")).to_contain_text("page 1 of 2", timeout=10000)
    page.go_back()
    expect(page).to_have_url(re.compile(r"tier=storm"), timeout=10000)
    expect(page.locator("#page-info")).to_have_text(storm, timeout=10000)
    expect(page.locator("#f-tier")).to_contain_text("storm")
    page.go_forward()
    page.go_forward()
    expect(page.locator("#page-info")).to_contain_text("page 2 of 2", timeout=10000)
    # The same URL in a fresh browser shows the same view.
    again = fresh(browser_context_factory)
    again.goto(f"{app.url}?tab=browse&tier=storm&sort=reward&order=asc")
    expect(again.locator("#page-info")).to_have_text(storm, timeout=20000)
    expect(again.locator("#f-tier")).to_contain_text("storm")
    expect(again.locator("#sort-by input")).to_have_value("reward")


def test_filters_fit_one_row_with_more_behind_a_toggle(browse, browser_context_factory):
    app, _, _ = browse
    page = fresh(browser_context_factory)
    page.goto(f"{app.url}?tab=browse")
    expect(page.locator("#browse-search")).to_be_visible(timeout=20000)
    bar = page.locator("#browse-bar").bounding_box()
    assert bar["height"] < 110
    for selector in ("#browse-search", "#f-model", "#f-task", "#f-tier", "#more-filters", "#export-csv",
                     "#export-parquet"):
        box = page.locator(selector).bounding_box()
        assert bar["y"] <= box["y"] and box["y"] + box["height"] <= bar["y"] + bar["height"] + 1, selector
    expect(page.locator("#f-quay")).to_be_hidden()
    page.locator("#more-filters").click()
    expect(page.locator("#f-quay")).to_be_visible()
    expect(page.locator("#sort-by")).to_be_visible()


def test_the_leaderboard_leads_to_rollouts_and_headers_stay_whole(browse, browser_context_factory):
    app, _, _ = browse
    page = fresh(browser_context_factory)
    page.goto(f"{app.url}?tab=browse&view=board")
    board = page.locator("#board")
    expect(board).to_contain_text("openai:gpt-5.5@medium", timeout=45000)  # a page boot on a loaded machine
    for header in board.locator("[role=columnheader]").all():
        box = header.bounding_box()
        assert box is None or box["height"] < 60, f"header {header.inner_text()!r} wraps"
    board.get_by_text("openai:gpt-5.5@medium", exact=True).first.click()
    expect(page).to_have_url(re.compile(r"model=openai"), timeout=10000)
    expect(page.get_by_role("tab", selected=True).last).to_have_text("Rollouts")
    expect(cell(page, "#rollouts", 0, 0)).to_have_text("openai:gpt-5.5@medium", timeout=10000)
    models = {cell(page, "#rollouts", i, 0).inner_text().strip() for i in range(rows_of(page, "#rollouts").count())}
    assert models == {"openai:gpt-5.5@medium"}


def test_a_heatmap_cell_opens_that_tasks_best_rollout(browse, browser_context_factory):
    app, _, _ = browse
    page = fresh(browser_context_factory)
    page.goto(f"{app.url}?tab=browse&view=board&task={TASK}")
    heat = page.locator("#heatmap")
    expect(heat).to_contain_text(TASK, timeout=20000)
    scored = rows_of(page, "#heatmap").first.locator("[role=gridcell]").filter(has_text=re.compile(r"\d\.\d\d"))
    scored.first.click()
    expect(page.locator("#rollout-detail")).to_be_visible(timeout=20000)
    expect(page.locator("#rollout-head")).to_contain_text(TASK)


def test_compare_highlights_only_the_ships_that_differ(browse, browser_context_factory):
    app, record, rival = browse
    page = fresh(browser_context_factory)
    page.goto(f"{app.url}?tab=browse&rollout={rival['episode_id']}&compare={record['episode_id']}")
    expect(page.locator("#compare-chart-a .js-plotly-plot")).to_be_visible(timeout=20000)
    expect(page.locator("#compare-chart-b .js-plotly-plot")).to_be_visible()
    head = page.locator("#compare-head")
    expect(head).to_contain_text("openai:gpt-5.5@medium")
    expect(head).to_contain_text("anthropic:claude-sonnet-5-5@high")
    expect(head).to_contain_text("A − B: reward")
    rows = rows_of(page, "#compare-diff").count()
    differing = int(re.search(r"(\d+) ships placed differently", head.inner_text()).group(1))
    # Every ship placed differently has a row; so has a ship placed alike whose broken rules differ.
    assert rows >= differing > 0
    for chart in ("#compare-chart-a", "#compare-chart-b"):
        orange = page.evaluate(
            """([sel, c]) => [...document.querySelectorAll(sel + ' .shapelayer path')]
                 .filter(p => (p.style.fill || '').replace(/\\s/g, '') === c.replace(/\\s/g, '')).length""",
            [chart, ORANGE])
        assert orange == differing  # only the ships that differ are highlighted
    expect(page.locator("#compare-chat-a")).to_contain_text("submit_plan")
    expect(page.locator("#compare-chat-b")).to_contain_text("submit_plan")
    page.screenshot(path=str(ARTIFACTS / "browse-compare.png"), full_page=True)


def test_exports_download_the_filtered_list_and_the_open_rollout(browse, browser_context_factory):
    app, record, _ = browse
    page = fresh(browser_context_factory)
    page.goto(f"{app.url}?tab=browse&tier=busy&rollout={record['episode_id']}")
    expect(page.locator("#rollout-detail")).to_be_visible(timeout=45000)
    total = int(re.search(r"of ([\d,]+)", page.locator("#page-info").inner_text()).group(1).replace(",", ""))
    with page.expect_download() as csv_download:
        page.locator("#export-csv").click()
    rows = list(csv.DictReader(io.StringIO(Path(csv_download.value.path()).read_text(encoding="utf-8"))))
    assert len(rows) == total and {r["difficulty"] for r in rows} == {"busy"}
    with page.expect_download() as parquet_download:
        page.locator("#export-parquet").click()
    table = pq.read_table(parquet_download.value.path())
    assert table.num_rows == total and "episode_id" in table.column_names
    with page.expect_download() as json_download:
        page.locator("#export-json").click()
    assert json.loads(Path(json_download.value.path()).read_text(encoding="utf-8"))["episode_id"] == \
        record["episode_id"]


def test_switching_to_browse_shows_rows_at_once(browse, browser_context_factory):
    app, _, _ = browse
    page = fresh(browser_context_factory)
    page.goto(app.url)
    page.wait_for_selector("#run")
    page.get_by_role("tab", name="Browse").click()
    # Rows come with the tab, no timer poll between; how soon is bench/page_bench.py's "tab to rows".
    expect(page.locator("#rollouts")).to_contain_text(TASK, timeout=15000)


def test_model_text_is_shown_as_text(browse, browser_context_factory):
    app, _, _ = browse
    page = fresh(browser_context_factory)
    page.goto(f"{app.url}?tab=browse&rollout=hostile01")
    expect(page.locator("#rollout-head")).to_contain_text('<img src=x onerror="window.__xss = 1">', timeout=20000)
    expect(page.locator("#rollouts")).to_contain_text("onerror")
    page.goto(f"{app.url}?tab=browse&view=board")
    expect(page.locator("#board")).to_contain_text("onerror", timeout=40000)
    assert page.evaluate("window.__xss") is None
    assert page.locator("#rollout-head img, #rollouts img, #board img, #heatmap img").count() == 0
