"""Browse as an explorer (issue 11), in Debian's chromium, part two: the leaderboard and the heatmap lead to
rollouts, compare shows only what differs, exports download what is shown, and model text stays text."""

from __future__ import annotations

import csv
import io
import json
import re
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from playwright.sync_api import expect

from tests.browser.browse_page import ORANGE, PAGE_INFO, TASK, XSS_MODEL, cell, rows_of
from tests.browser.conftest import ARTIFACTS, DESKTOP, PHONE

pytestmark = pytest.mark.browser


def test_the_leaderboard_leads_to_rollouts_and_shows_model_names_as_text(browse, new_page):
    app, _, _, _ = browse
    page = new_page()
    page.goto(f"{app.url}?tab=browse&view=board")
    board = page.locator("#board")
    expect(board).to_contain_text("openai:gpt-5.5@medium", timeout=45000)  # a page boot on a loaded machine
    for header in board.locator("[role=columnheader]").all():
        box = header.bounding_box()
        assert box is None or box["height"] < 60, f"header {header.inner_text()!r} wraps"
    expect(board).to_contain_text('<img src=x onerror="window.__xss = 1">')  # a model named in HTML
    # That model has one episode: no interval, no arena rating, listed after every model large enough to rank,
    # and the notes under the board say why (rollouts.sample_size's words, as `python -m agent board` prints).
    headers = [h.strip() for h in board.locator("[role=columnheader]").all_inner_texts()]
    rows = [[cell(page, "#board", i, k).inner_text().strip() for k in range(len(headers))]
            for i in range(rows_of(page, "#board").count())]
    by_model = {row[0]: dict(zip(headers, row, strict=True)) for row in rows}
    hostile = by_model[XSS_MODEL]
    assert (hostile["n"], hostile["95% CI"], hostile["arena"], hostile["arena 95% CI"], hostile["arena rank"]) == (
        "1", "n too small", "", "unrated", "")
    small = [int(row[headers.index("n")]) < 5 for row in rows]
    assert small == sorted(small) and any(small) and not all(small)
    note = page.locator("#board-note")
    expect(note).to_contain_text("n too small: no interval from fewer than 2 episodes.")
    expect(note).to_contain_text("fewer than 5 episodes, so listed last and unranked (no arena rating or rank)")
    # 63 rollouts over 45 tasks: no two models met on 5 tasks, so no one is rated, and the page says what it takes.
    assert {row[headers.index("arena 95% CI")] for row in rows} == {"unrated"}
    expect(note).to_contain_text("a model is rated and ranked once it has battles on at least 5 tasks")
    expect(note).not_to_contain_text("1000 = baseline:naive")  # no anchor is rated, so none is named
    # pass^k (rollouts.board): pass^1 for every model; pass^4 blank where no task has 4 tries, and the note says so.
    assert {"pass^1 feasible", "pass^4 feasible", "pass^1 ≤10%", "pass^4 ≤10%"} <= set(headers)
    assert all(row[headers.index("pass^1 feasible")].isdigit() for row in rows)
    assert {row[headers.index("pass^4 feasible")] for row in rows} == {""}
    expect(note).to_contain_text("pass^k: the chance that all k tries of a task are feasible")
    expect(note).to_contain_text("blank where no task has k tries")
    for size in (DESKTOP, PHONE):  # a wide table scrolls sideways to its last column, its models fixed at the left
        page.set_viewport_size(size)
        headers = [h.strip() for h in page.locator("#board [role=columnheader]").all_inner_texts()]
        assert scrolled_to_its_end(page, "#board") == {"first": "model", "last": headers[-1]}, size
    page.set_viewport_size(DESKTOP)
    assert page.locator("#board img, #heatmap img").count() == 0 and page.evaluate("window.__xss") is None
    board.get_by_text("openai:gpt-5.5@medium", exact=True).first.click()
    expect(page).to_have_url(re.compile(r"model=openai"), timeout=20000)
    expect(page.get_by_role("tab", selected=True).last).to_have_text("Rollouts")
    expect(cell(page, "#rollouts", 0, 0)).to_have_text("openai:gpt-5.5@medium", timeout=20000)
    models = {cell(page, "#rollouts", i, 0).inner_text().strip() for i in range(rows_of(page, "#rollouts").count())}
    assert models == {"openai:gpt-5.5@medium"}


def scrolled_to_its_end(page, table: str) -> dict:
    """Scroll the table `table` sideways to its end; the headers then seen whole in its box, first and last."""
    page.locator(f"{table} .virtual-table-viewport").evaluate("e => { e.scrollLeft = e.scrollWidth; }")
    return page.evaluate("""(sel) => {
        const box = document.querySelector(sel + ' .virtual-table-viewport').getBoundingClientRect();
        const seen = [...document.querySelectorAll(sel + ' [role=columnheader]')].filter((h) => {
            const r = h.getBoundingClientRect(); return r.left >= box.left - 1 && r.right <= box.right + 1; });
        return {first: seen[0]?.innerText.trim(), last: seen[seen.length - 1]?.innerText.trim()}; }""", table)


def test_a_heatmap_cell_opens_that_tasks_best_rollout(browse, new_page):
    app, _, _, _ = browse
    page = new_page()
    page.goto(f"{app.url}?tab=browse&view=board&task={TASK}")
    heat = page.locator("#heatmap")
    expect(heat).to_contain_text(TASK, timeout=30000)
    scored = rows_of(page, "#heatmap").first.locator("[role=gridcell]").filter(has_text=re.compile(r"\d\.\d\d"))
    scored.first.click()
    expect(page.locator("#rollout-detail")).to_be_visible(timeout=30000)
    expect(page.locator("#rollout-head")).to_contain_text(TASK)


HOUR_AXIS = "(sel) => document.querySelector(sel + ' .js-plotly-plot')._fullLayout.xaxis.range"


def test_compare_highlights_only_the_ships_that_differ(browse, new_page):
    app, record, rival, _ = browse
    page = new_page()
    page.goto(f"{app.url}?tab=browse&rollout={rival['episode_id']}&view=compare")  # A at once, before B is picked
    expect(page.locator("#compare-a-chart .js-plotly-plot")).to_be_visible(timeout=30000)
    expect(page.locator("#compare-a-chat")).to_contain_text("submit_plan")
    expect(page.locator("#compare-head")).to_contain_text("Pick B above")
    page.goto(f"{app.url}?tab=browse&rollout={rival['episode_id']}&compare={record['episode_id']}")
    expect(page.locator("#compare-b-chart .js-plotly-plot")).to_be_visible(timeout=30000)
    expect(page.locator("#compare-a-chart .js-plotly-plot")).to_be_visible()
    # One time axis for both: a plan that ends later does not stretch its own chart alone.
    assert page.evaluate(HOUR_AXIS, "#compare-a-chart") == page.evaluate(HOUR_AXIS, "#compare-b-chart")
    head = page.locator("#compare-head")
    expect(head).to_contain_text("openai:gpt-5.5@medium")
    expect(head).to_contain_text("anthropic:claude-sonnet-5-5@high")
    expect(head).to_contain_text("A − B: reward")
    rows = rows_of(page, "#compare-diff").count()
    differing = int(re.search(r"(\d+) ships placed differently", head.inner_text()).group(1))
    # Every ship placed differently has a row; so has a ship placed alike whose broken rules differ.
    assert rows >= differing > 0
    for chart in ("#compare-a-chart", "#compare-b-chart"):
        orange = page.evaluate(
            """([sel, c]) => [...document.querySelectorAll(sel + ' .shapelayer path')]
                 .filter(p => (p.style.fill || '').replace(/\\s/g, '') === c.replace(/\\s/g, '')).length""",
            [chart, ORANGE])
        assert orange == differing  # only the ships that differ are highlighted
    expect(page.locator("#compare-a-chat")).to_contain_text("submit_plan")
    expect(page.locator("#compare-b-chat")).to_contain_text("submit_plan")
    page.screenshot(path=str(ARTIFACTS / "browse-compare.png"), full_page=True)


def test_exports_download_what_is_shown_go_once_fetched_and_model_text_stays_text(browse, new_page):
    app, _, _, hostile = browse
    page = new_page()
    page.goto(f"{app.url}?tab=browse&tier={hostile['task']['difficulty']}&rollout={hostile['episode_id']}")
    expect(page.locator("#rollout-detail")).to_be_visible(timeout=45000)
    expect(page.locator("#rollout-head")).to_contain_text('<img src=x onerror="window.__xss = 1">')
    expect(page.locator("#rollouts")).to_contain_text("onerror")
    assert page.evaluate("window.__xss") is None
    assert page.locator("#rollout-head img, #rollouts img").count() == 0

    total = int(re.search(r"of ([\d,]+)", page.locator(PAGE_INFO).inner_text()).group(1).replace(",", ""))
    with page.expect_download() as csv_download:
        page.locator("#export-csv").click()
    rows = list(csv.DictReader(io.StringIO(Path(csv_download.value.path()).read_text(encoding="utf-8"))))
    assert len(rows) == total and {r["difficulty"] for r in rows} == {hostile["task"]["difficulty"]}
    with page.expect_download() as parquet_download:
        page.locator("#export-parquet").click()
    table = pq.read_table(parquet_download.value.path())
    assert table.num_rows == total and "episode_id" in table.column_names
    with page.expect_download() as json_download:
        page.locator("#export-json").click()
    assert json.loads(Path(json_download.value.path()).read_text(encoding="utf-8"))["episode_id"] == "hostile01"

    # On the same page (a page boot is most of a browser test's cost): a download is gone once fetched, and a
    # refused one says why.
    downloads = app.ctx.downloads
    with page.expect_download() as fetched:
        page.locator("#export-csv").click()
    assert Path(fetched.value.path()).read_text(encoding="utf-8").startswith('"run",')
    # Served whole: the app's copy is gone (only the open rollout's JSON, not fetched, is held).
    deadline = time.monotonic() + 5
    while list(downloads.folder.rglob("rollouts-*.csv")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not list(downloads.folder.rglob("rollouts-*.csv"))
    budget = downloads.visitor_bytes
    downloads.visitor_bytes = 1  # every export is now over one visitor's budget
    try:
        page.locator("#export-csv").click()
        # Over the visitor's budget: the export, or the open rollout's JSON already held.
        expect(page.locator("#filter-note")).to_contain_text(re.compile("one download may be|Your downloads already "
                                                                        "hold"), timeout=15000)
    finally:
        downloads.visitor_bytes = budget
    assert not list(downloads.folder.rglob("rollouts-*.csv"))
