"""The Browse tab in real Chromium: a share link opens its rollout in a fresh browser, unknown ids get a clear
message, a table row opens a rollout, two rollouts compare, and model text is shown as text."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from testkit.app import launched_app
from testkit.records import make_record, make_records
from tests.browser.conftest import ARTIFACTS

pytestmark = pytest.mark.browser

TASK = "dock-24B-w06x1-busy-0"
XSS_MODEL = 'vllm:<img src=x onerror="window.__xss = 1">'


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
    hostile = make_record(seed=8, model=XSS_MODEL, episode_id="hostile01", started="2026-11-27T09:00:00Z")
    others = make_records(30, seed=12)
    with launched_app(tmp_path_factory.mktemp("browse-ui"), records=[shared, rival, hostile, *others]) as app:
        yield app, shared, rival


def open_link(page: Page, url: str, rollout: str) -> None:
    page.goto(f"{url}?tab=browse&rollout={rollout}")
    expect(page.get_by_role("tab", selected=True)).to_have_text("Browse")
    expect(page.locator("#rollout-id textarea")).to_have_value(rollout)


def test_a_share_link_opens_its_rollout_in_a_fresh_browser(browse, browser_context_factory):
    app, record, _ = browse
    page = browser_context_factory().new_page()
    open_link(page, app.url, record["episode_id"])

    chat = page.locator("#browse-chat")
    expect(chat).to_contain_text("Rules", timeout=20000)
    expect(chat).to_contain_text("Thinking")
    expect(chat).to_contain_text("check_plan")
    expect(chat).to_contain_text("submit_plan")
    assert chat.locator(".message").count() >= 2 + len(record["steps"])
    # The reasoning is in the transcript: open the first Thinking accordion and read it.
    first_thought = next(m["reasoning"] for m in record["messages"] if m.get("reasoning"))
    chat.get_by_text("Thinking").first.click()
    expect(chat).to_contain_text(first_thought.split(".")[0])

    expect(page.locator("#rollout-head")).to_contain_text("anthropic:claude-sonnet-5-5@high")
    expect(page.locator("#rollout-head")).to_contain_text(TASK)
    expect(page.locator("#browse-chart .js-plotly-plot")).to_be_visible()
    expect(page.locator("#browse-chart")).to_contain_text(f"Plan {len(record['steps'])} of {len(record['steps'])}")
    ships = len(record["final"]["plan"])
    assert page.locator("#browse-chart .shapelayer path").count() >= ships
    expect(page.locator("#browse-optimal .js-plotly-plot")).to_be_visible()
    expect(page.locator("#browse-optimal")).to_contain_text("Reference optimal plan")
    expect(page.locator("#browse-plan-step")).to_be_visible()
    grade = page.locator("#browse-grade")
    expect(grade).to_contain_text(f"Reward {record['reward']:.4f}".rstrip("0"))
    expect(grade).to_contain_text("feasible")
    expect(page.locator("#browse-usage")).to_contain_text("tokens")
    expect(page.locator("#share-link textarea")).to_have_value(
        f"{app.url}?tab=browse&rollout={record['episode_id']}")
    page.screenshot(path=str(ARTIFACTS / "browse-share-link.png"), full_page=True)


@pytest.mark.parametrize("rollout, message", [
    ("0123456789ab", "No rollout 0123456789ab in this Space's rollout folder"),
    ("..%2F..%2Fetc%2Fpasswd", "malformed"),
])
def test_an_unknown_or_malformed_id_gets_a_clear_message(browse, browser_context_factory, rollout, message):
    app, _, _ = browse
    page = browser_context_factory().new_page()
    page.goto(f"{app.url}?tab=browse&rollout={rollout}")
    expect(page.get_by_role("tab", selected=True)).to_have_text("Browse")
    expect(page.locator("#rollout-message")).to_contain_text(message, timeout=20000)
    expect(page.locator("#rollout-head")).to_have_text("")
    if rollout.startswith("0123"):
        page.screenshot(path=str(ARTIFACTS / "browse-unknown-id.png"))


def test_table_filters_open_a_row_and_compare_on_the_same_task(browse, browser_context_factory):
    app, record, rival = browse
    page = browser_context_factory().new_page()
    page.goto(f"{app.url}?tab=browse")
    table = page.locator("#rollouts")
    expect(table).to_contain_text(record["episode_id"], timeout=20000)
    expect(page.locator("#board")).to_contain_text("anthropic:claude-sonnet-5-5@high")
    expect(page.locator("#browse-status")).to_contain_text("33")

    box = page.locator("#f-task input")
    box.fill(TASK)
    box.press("Enter")
    expect(page.locator("#page-info")).not_to_contain_text("of 33")
    expect(table).to_contain_text(rival["episode_id"])
    table.get_by_text(rival["episode_id"]).click()
    expect(page.locator("#rollout-head")).to_contain_text("openai:gpt-5.5@medium")
    page.wait_for_url(f"**rollout={rival['episode_id']}**", timeout=5000)  # the address bar now links to it

    page.locator("#compare-id textarea").fill(record["episode_id"])
    page.locator("#compare").click()
    expect(page.locator("#compare-chart .js-plotly-plot")).to_be_visible(timeout=20000)
    expect(page.locator("#compare-chart")).to_contain_text("placed differently")
    expect(page.locator("#compare-grade-a")).to_contain_text("openai:gpt-5.5@medium")
    expect(page.locator("#compare-grade-b")).to_contain_text("anthropic:claude-sonnet-5-5@high")
    page.screenshot(path=str(ARTIFACTS / "browse-compare.png"), full_page=True)


def test_model_text_is_shown_as_text(browse, browser_context_factory):
    app, _, _ = browse
    page = browser_context_factory().new_page()
    open_link(page, app.url, "hostile01")
    expect(page.locator("#rollout-head")).to_contain_text('<img src=x onerror="window.__xss = 1">', timeout=20000)
    expect(page.locator("#rollouts")).to_contain_text("onerror")
    expect(page.locator("#board")).to_contain_text("onerror")
    assert page.evaluate("window.__xss") is None
    assert page.locator("#rollout-head img, #rollouts img, #board img").count() == 0
