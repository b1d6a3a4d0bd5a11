"""A baseline run in Debian's chromium, from the form to the grade and on to its link: one page boot and one run
checked from every side (what streams, what the chart and grade say, where a typed key goes), then the episode's
link in a fresh browser, good and bad."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS, DESKTOP, PHONE
from tests.browser.run_page import (
    assert_chart_fits,
    episode_of,
    in_first_viewport,
    open_form,
    red_ships,
    wait_until_no_red_ships,
)

pytestmark = pytest.mark.browser

SECRET = "sk-ant-api03-TYPED-KEY-never-stored"
PACE_S = 0.15  # a paced baseline: the story can be followed, and typing bubbles would have time to show


def test_a_paced_baseline_runs_live_to_a_grade_and_its_link_reattaches(arena, new_page,
                                                                       monkeypatch):
    monkeypatch.setattr(arena.ctx.settings, "baseline_pace_s", PACE_S)
    page = new_page(PHONE)
    open_form(page, arena.url)
    for selector in ("#model", "#task", "#run"):  # Run in reach on a phone and on a laptop
        assert in_first_viewport(page, selector), f"{selector} is below the fold at {PHONE}"
    assert_chart_fits(page, "#preview-chart")  # the whole week on a phone, scaled to its box
    page.set_viewport_size(DESKTOP)
    for selector in ("#model", "#task", "#run"):
        assert in_first_viewport(page, selector), f"{selector} is below the fold at {DESKTOP}"
    assert page.evaluate("window.scrollY") == 0
    expect(page.locator("#status")).to_contain_text("Pick a model and a task")
    expect(page.locator("#model input")).to_have_value("baseline:hasty")
    expect(page.locator("#stop")).to_be_disabled()

    # A key typed for this run only: the baseline ignores it, and it must land nowhere.
    page.get_by_text("API keys: used for this run only").click()
    page.locator("#key-anthropic input").fill(SECRET)
    page.locator("#run").click()
    started, bubbles = time.monotonic(), 0
    while "reward" not in page.locator("#grade").inner_text() and time.monotonic() - started < 90:
        bubbles += page.locator("#chat [aria-label='Loading response']").count()
        time.sleep(0.1)
    took = time.monotonic() - started
    assert bubbles == 0  # no typing bubble outlives its message
    episode_id = episode_of(page)
    record = arena.ctx.store.load(episode_id)
    assert record["end_reason"] == "submitted"
    assert took >= PACE_S * record["turns"] * 0.9, f"{record['turns']} paced steps took only {took:.1f} s"

    chat = page.locator("#chat")
    expect(chat).to_contain_text("check_plan · ❌")  # the hasty first draft breaks rules...
    expect(chat).to_contain_text("check_plan · ✅")
    expect(chat).to_contain_text("submit_plan")
    assert chat.locator(".message").count() >= 6
    expect(page.locator("#status")).to_contain_text("submitted")
    assert "tokens" not in page.locator("#status").inner_text()  # a baseline spends none
    expect(page.locator("#grade")).to_contain_text("feasible")
    expect(page.locator("#grade")).to_contain_text(f"{record['reward']:.4f}".rstrip("0"))
    expect(page.locator("#optimal .js-plotly-plot")).to_be_visible()
    expect(page.locator("#chart")).to_contain_text("submitted in turn")  # ...the last draft is drawn, clean
    wait_until_no_red_ships(page, "#chart", timeout=20000)
    assert page.locator("#chart .shapelayer path").count() >= len(record["final"]["plan"])
    assert red_ships(page, "#chart") == 0
    page.screenshot(path=str(ARTIFACTS / "run-tab-baseline.png"), full_page=True)
    slider = page.locator("#plan-step input[type=range]")
    slider.fill("1")
    slider.dispatch_event("change")
    slider.dispatch_event("pointerup")
    expect(page.locator("#chart")).to_contain_text("Draft 1 of", timeout=20000)
    assert red_ships(page, "#chart") > 0  # ...and the first one had red ships

    storage = page.evaluate("JSON.stringify(Object.assign({}, window.localStorage, window.sessionStorage))")
    assert "TYPED-KEY" not in storage and "TYPED-KEY" not in page.locator("body").inner_text()
    assert not any("TYPED-KEY" in p.read_text() for p in Path(arena.root).rglob("*.json*"))

    other = new_page()
    other.goto(f"{arena.url}?episode={episode_id}")
    expect(other.locator("#episode-info")).to_contain_text(episode_id, timeout=30000)
    expect(other.locator("#chat")).to_contain_text("submit_plan")
    expect(other.locator("#grade")).to_contain_text("reward")
    expect(other.locator("#stop")).to_be_disabled()
    other.screenshot(path=str(ARTIFACTS / "run-tab-episode-link.png"), full_page=True)
    # A link to no episode says so (a malformed id's message: tests/viewer/test_run_app.py).
    other.goto(f"{arena.url}?episode=0123456789ab")
    expect(other.locator("#status")).to_contain_text("No episode 0123456789ab is running here or stored",
                                                     timeout=30000)
