"""The Arena in Debian's chromium, one app and three page boots for the whole scenario: on a laptop, a named match
of two baselines races side by side to its verdict, takes one vote, and its `?match=` link replays it while the app
holds it; on a phone, the link replays it stacked (after the app has forgotten it, as after a restart), landing on
the verdict, then a random match keeps the models' names out of everything the page receives until the vote.

"Everything the page receives" is read where it arrives: an init script copies the bytes of Gradio's event streams
(`/queue/data`) as the page reads them. The same copy holds the names once they may be shown, so the check can fail.
Screenshots go to test-artifacts/ (docs/screens/ comes from scripts/screenshots.py).
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import ARTIFACTS, DESKTOP, PHONE
from tests.browser.run_page import assert_chart_fits, in_first_viewport

pytestmark = pytest.mark.browser

MATCH_WAIT_MS = 60_000
# Keeps a copy of every event-stream chunk the page reads, in window.__stream.
COPY_STREAMS = """(() => {
  window.__stream = [];
  const original = window.fetch;
  window.fetch = async function (...args) {
    const response = await original.apply(this, args);
    const url = String((args[0] && args[0].url) || args[0]);
    if (url.includes('/queue/data') && response.body) {
      const reader = response.clone().body.pipeThrough(new TextDecoderStream()).getReader();
      (async () => { for (;;) { const {done, value} = await reader.read(); if (done) return;
                                window.__stream.push(value); } })();
    }
    return response;
  };
})();"""


def open_arena(page: Page, url: str) -> None:
    page.add_init_script(COPY_STREAMS)
    page.goto(f"{url}?tab=arena")
    expect(page.get_by_role("tab", selected=True)).to_have_text("Arena", timeout=30000)
    expect(page.locator("#arena-task input")).not_to_have_value("")


def received(page: Page) -> str:
    return page.evaluate("window.__stream.join('')")


def sides(page: Page) -> list[dict]:
    """Both sides' boxes, read at one moment (a smooth scroll may be under way)."""
    return page.evaluate("""() => ['#arena-a', '#arena-b'].map(s => {
        const r = document.querySelector(s).getBoundingClientRect();
        return {x: r.x, y: r.y, width: r.width, height: r.height}; })""")


def test_the_arena_on_a_laptop_and_a_phone(arena, new_page, monkeypatch):
    """Two page boots: the laptop plays a named match and votes; the phone opens that match's link (as after a
    restart: the app no longer holds it), then plays a random pair."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setattr(arena.ctx.settings, "baseline_pace_s", 0.1)  # long enough to see both sides running
    laptop = new_page(DESKTOP)
    open_arena(laptop, arena.url)
    match_id = named_match_with_a_vote(laptop, arena)
    laptop.goto(f"{arena.url}?match={match_id}")  # the link the page offers, opened while the app holds the match
    expect(laptop.locator("#arena-verdict")).to_contain_text("A (baseline:greedy) wins on reward", timeout=30000)
    both_sides_drawn(laptop)
    arena.ctx.matches._matches.pop(match_id)
    phone = new_page(PHONE)
    phone.add_init_script(COPY_STREAMS)
    phone.goto(f"{arena.url}?match={match_id}")
    replayed_from_its_link(phone)
    random_match_with_hidden_names(phone)


def named_match_with_a_vote(page: Page, arena) -> str:
    for selector in ("#arena-model-a", "#arena-model-b", "#arena-random", "#arena-task", "#arena-run"):
        assert in_first_viewport(page, selector), f"{selector} is below the fold at {DESKTOP}"
    expect(page.locator("#arena-sides")).to_be_hidden()  # nothing to show before a match
    model_b = page.locator("#arena-model-b input")
    model_b.fill("anthropic:claude-x")
    model_b.press("Enter")
    page.locator("#arena-run").click()  # a side that needs a key says so beside the form, and opens the keys
    expect(page.locator("#arena-note")).to_contain_text("Model B: 'anthropic:claude-x' needs an Anthropic API key")
    expect(page.locator("#arena-key-anthropic input")).to_be_visible()
    expect(page.locator("#arena-sides")).to_be_hidden()
    model_b.fill("baseline:hasty")
    model_b.press("Enter")
    page.locator("#arena-run").click()
    expect(page.locator("#arena-stop")).to_be_enabled()
    expect(page.locator("#arena-verdict")).to_contain_text("Both agents are playing")
    expect(page.locator("#arena-b-chat")).to_contain_text("check_plan · ❌")  # hasty's first draft breaks rules
    a_box, b_box = sides(page)
    assert a_box["x"] + a_box["width"] <= b_box["x"] + 1 and abs(a_box["y"] - b_box["y"]) < 2  # side by side
    page.screenshot(path=str(ARTIFACTS / "arena-running-desktop.png"))

    expect(page.locator("#arena-verdict")).to_contain_text("A (baseline:greedy) wins on reward",
                                                           timeout=MATCH_WAIT_MS)
    expect(page.locator("#arena-a-head")).to_contain_text("🏆 A · baseline:greedy")
    expect(page.locator("#arena-b-head")).to_have_text("B · baseline:hasty")
    for side in "ab":
        expect(page.locator(f"#arena-{side}-grade")).to_contain_text("feasible, reward")
        expect(page.locator(f"#arena-{side}-chat")).to_contain_text("submit_plan")
        expect(page.locator(f"#arena-{side}-info")).to_contain_text("share link")
    # The hasty side keeps every rule yet costs more than the naive re-plan: its grade says so in words.
    expect(page.locator("#arena-b-grade")).to_contain_text("✅ feasible, reward 0.2 · worse than the naive re-plan")
    expect(page.locator("#arena-stop")).to_be_disabled()
    expect(page.locator("#arena-skip")).to_be_hidden()  # named: nothing to skip to
    page.screenshot(path=str(ARTIFACTS / "arena-verdict-desktop.png"))
    match_id = page.locator("#arena-link code").inner_text()
    assert arena.ctx.matches.book.get(match_id)["winner"] == "a"
    page.locator("#arena-vote-a").click()
    expect(page.locator("#arena-ballot")).to_contain_text("Your vote is counted")
    expect(page.locator("#arena-ballot")).to_contain_text("a is better 1 · b is better 0 · tie 0 · both are bad 0")
    expect(page.locator("#arena-vote")).to_be_hidden()
    assert arena.ctx.matches.book.get(match_id)["votes"]["a"] == 1
    return match_id


def both_sides_drawn(page: Page) -> None:
    """Each side's chart shows its last draft (not the published plan it starts from), with the slider over its
    drafts, and fits its box."""
    for side in "ab":
        chart = f"#arena-{side}-chart"
        expect(page.locator(f"{chart} .js-plotly-plot")).to_be_visible()
        expect(page.locator(f"{chart} .gtitle")).to_contain_text(re.compile(r"Draft (\d+) of \1 \(submitted"))
        expect(page.locator(f"#arena-{side}-plan-step")).to_be_visible()
        expect(page.locator(f"#arena-{side}-plan-step")).to_contain_text("Draft (1-")
        assert_chart_fits(page, chart)


def replayed_from_its_link(page: Page) -> None:
    """The match replayed side by side from the folder, its names shown and its voting closed; a phone lands on
    the verdict."""
    expect(page.locator("#arena-verdict")).to_contain_text("A (baseline:greedy) wins on reward", timeout=30000)
    expect(page.locator("#arena-verdict")).to_be_in_viewport()
    expect(page.get_by_role("tab", selected=True)).to_have_text("Arena")
    expect(page.locator("#arena-ballot")).to_contain_text("Voting on this match is closed")
    expect(page.locator("#arena-ballot")).to_contain_text("a is better 1")
    expect(page.locator("#arena-vote")).to_be_hidden()
    for side in "ab":
        expect(page.locator(f"#arena-{side}-chat")).to_contain_text("submit_plan")
    both_sides_drawn(page)
    a_box, b_box = sides(page)
    assert b_box["y"] >= a_box["y"] + a_box["height"] - 1 and b_box["width"] > PHONE["width"] - 40  # stacked


def random_match_with_hidden_names(page: Page) -> None:
    page.evaluate("window.scrollTo(0, 0)")
    for selector in ("#arena-model-a", "#arena-random", "#arena-task", "#arena-run"):
        assert in_first_viewport(page, selector), f"{selector} is below the fold at {PHONE}"
    page.locator("#arena-random input").check()
    expect(page.locator("#arena-model-a input")).to_be_disabled()
    page.evaluate("window.__stream = []")  # what the replay above received named its models, as it may
    page.locator("#arena-run").click()
    expect(page.locator("#arena-verdict")).to_contain_text("Both agents are playing")
    for head in ("#arena-a-head", "#arena-b-head"):
        expect(page.locator(head)).to_contain_text("model hidden until you vote or skip")
    expect(page.locator("#arena-vote")).to_be_visible(timeout=MATCH_WAIT_MS)
    expect(page.locator("#arena-verdict")).to_contain_text(re.compile(r"🏆 [AB] wins on|🤝 A tie"))
    expect(page.locator("#arena-vote-a")).to_be_in_viewport()  # brought into view when the match ended
    page.screenshot(path=str(ARTIFACTS / "arena-verdict-phone.png"))
    shown = " ".join(page.locator(s).inner_text() for s in ("#arena-verdict", "#arena-ballot", "#arena-a",
                                                             "#arena-b", "#arena-link"))
    assert "baseline" not in shown, shown
    assert page.locator("#arena-a-info").inner_text().strip() == ""
    assert "baseline:" not in received(page)  # not on screen, and never sent

    page.locator("#arena-vote-tie").click()
    expect(page.locator("#arena-ballot")).to_contain_text("Your vote is counted")
    expect(page.locator("#arena-a-head")).to_contain_text("baseline:")
    expect(page.locator("#arena-a-info")).to_contain_text("share link")
    assert "baseline:" in received(page)  # the copy does see names, once they may be shown
    page.screenshot(path=str(ARTIFACTS / "arena-voted-phone.png"), full_page=True)
