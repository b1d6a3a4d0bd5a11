"""The Run tab explains itself (issue 10), in Debian's chromium: Run in reach at both sizes, the task shown before
the run, red ships turning valid, a paced baseline, errors beside the field, controls that mean what they show."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import Page, expect

from testkit.peers import ChatPeer, Error, Text, ToolCall, Turn, always
from testkit.tasks import TASK_ID, optimal_args

pytestmark = pytest.mark.browser

DESKTOP, PHONE = {"width": 1440, "height": 900}, {"width": 390, "height": 844}
RED = "rgb(214, 39, 40)"  # the chart's violation outline (#D62728) as the browser reports it


def page_at(browser_context_factory, size: dict) -> Page:
    context = browser_context_factory()
    page = context.new_page()
    page.set_viewport_size(size)
    return page


def in_first_viewport(page: Page, selector: str) -> bool:
    box = page.locator(selector).bounding_box()
    size = page.viewport_size
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= size["height"] and \
        box["x"] + box["width"] <= size["width"] + 1


def red_ships(page: Page, chart: str) -> int:
    """Ship rectangles outlined red in a plotly chart's SVG (shapes carry their stroke in their style)."""
    return page.evaluate(
        """([sel, red]) => [...document.querySelectorAll(sel + ' .shapelayer path')]
             .filter(p => (p.style.stroke || '').replace(/\\s/g, '') === red.replace(/\\s/g, '')).length""",
        [chart, RED])


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1440x900", "390x844"])
def test_model_task_and_run_are_in_the_first_viewport(arena, browser_context_factory, size):
    page = page_at(browser_context_factory, size)
    page.goto(arena.url)
    page.wait_for_selector("#run")
    expect(page.locator("#task input")).not_to_have_value("", timeout=15000)
    for selector in ("#model", "#task", "#run"):
        assert in_first_viewport(page, selector), f"{selector} is below the fold at {size}"
    assert page.evaluate("window.scrollY") == 0


def test_the_task_preview_shows_before_any_run_and_follows_the_picker(arena, chromium_page):
    page = chromium_page
    page.set_viewport_size(DESKTOP)
    page.goto(arena.url)
    preview = page.locator("#task-preview")
    expect(preview).to_be_visible(timeout=15000)
    text = page.locator("#preview-text")
    expect(text).to_contain_text("dock-24B-w06x1-standard-0")
    for part in ("quay 24B", "tier standard", "16 ships", "What changed this week", "Sections 6–14 closed",
                 "proven optimum", "naive re-plan", "breaks 5 rules on 4 ships"):
        expect(text).to_contain_text(part)
    expect(page.locator("#preview-chart .js-plotly-plot")).to_be_visible()
    assert red_ships(page, "#preview-chart") == 4  # the published plan's broken ships, outlined red
    box = page.locator("#task input")
    box.fill("dock-36A-w35x3-extreme-0")
    box.press("Enter")  # how fast it follows is measured by bench/page_bench.py, not here
    expect(text).to_contain_text("dock-36A-w35x3-extreme-0", timeout=10000)
    expect(text).to_contain_text("59 ships")
    expect(page.locator("#preview-chart")).to_contain_text("The published plan")


def test_a_hasty_baseline_shows_red_ships_turning_valid(arena, chromium_page):
    page = chromium_page
    page.set_viewport_size(DESKTOP)
    page.goto(arena.url)
    expect(page.locator("#model input")).to_have_value("baseline:hasty", timeout=15000)
    page.locator("#run").click()
    expect(page.locator("#grade")).to_contain_text("Reward", timeout=60000)
    expect(page.locator("#chat")).to_contain_text("check_plan · ❌")  # its first draft breaks rules
    expect(page.locator("#chat")).to_contain_text("check_plan · ✅")
    expect(page.locator("#chart")).to_contain_text("submitted in turn")  # the last draft is drawn...
    page.wait_for_function("""() => ![...document.querySelectorAll('#chart .shapelayer path')]
        .some(p => (p.style.stroke || '').replace(/\\s/g, '') === 'rgb(214,39,40)')""", timeout=10000)
    assert red_ships(page, "#chart") == 0  # ...and it is clean
    slider = page.locator("#plan-step input[type=range]")
    slider.fill("1")
    slider.dispatch_event("change")
    slider.dispatch_event("pointerup")
    expect(page.locator("#chart")).to_contain_text("Draft 1 of", timeout=10000)
    assert red_ships(page, "#chart") > 0  # ...and the first one had red ships


def test_no_typing_bubble_outlives_its_message_and_baselines_show_no_tokens(arena, chromium_page, monkeypatch):
    monkeypatch.setattr(arena.ctx.settings, "baseline_pace_s", 0.4)
    page = chromium_page
    page.goto(arena.url)
    expect(page.locator("#model input")).to_have_value("baseline:hasty", timeout=15000)
    page.locator("#run").click()
    started = time.monotonic()
    bubbles = 0
    while "Reward" not in page.locator("#grade").inner_text() and time.monotonic() - started < 60:
        bubbles += page.locator("#chat [aria-label='Loading response']").count()
        time.sleep(0.1)
    took = time.monotonic() - started
    assert bubbles == 0
    record = arena.ctx.store.load(re.search(r"Episode\s+([0-9a-f]{12})",
                                            page.locator("#episode-info").inner_text()).group(1))
    steps = record["turns"]
    assert took >= 0.4 * steps * 0.9, f"{steps} paced steps took only {took:.1f} s"  # the story can be followed
    assert "tokens" not in page.locator("#status").inner_text()


def test_a_missing_key_is_one_clear_message_beside_the_model(arena, chromium_page, monkeypatch, caplog):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    page = chromium_page
    page.goto(arena.url)
    expect(page.locator("#task input")).not_to_have_value("", timeout=15000)
    box = page.locator("#model input")
    box.fill("anthropic:claude-sonnet-5-5")
    box.press("Enter")
    expect(page.locator("#key-anthropic")).to_be_hidden()  # the keys are folded away until needed
    page.locator("#run").click()
    note = page.locator("#model-note")
    expect(note).to_contain_text("needs an Anthropic API key")
    expect(note).to_contain_text("ANTHROPIC_API_KEY")
    expect(page.locator("#key-anthropic")).to_be_visible()  # the accordion opened where the key goes
    assert page.locator(".error").count() == 0 and page.locator("[data-testid=error]").count() == 0
    expect(page.locator("#run")).to_be_enabled()
    expect(page.locator("#stop")).to_be_disabled()
    assert not any("Traceback" in r.getMessage() for r in caplog.records)


def test_a_provider_failure_mid_run_shows_in_the_chat_and_keeps_the_rollout(arena, chromium_page, monkeypatch):
    # It names a short wait, so the retries (still all made) take milliseconds, not the default back-off.
    with ChatPeer(always(Error(500, "the model server fell over", headers={"retry-after-ms": "20"}))) as peer:
        monkeypatch.setenv("VLLM_BASE_URL", peer.url + "/v1")
        page = chromium_page
        page.goto(arena.url)
        expect(page.locator("#task input")).not_to_have_value("", timeout=15000)
        box = page.locator("#model input")
        box.fill("vllm:fragile")
        box.press("Enter")
        page.locator("#run").click()
        expect(page.locator("#chat")).to_contain_text("Provider error", timeout=60000)
        expect(page.locator("#status")).to_contain_text("error")
        episode_id = re.search(r"Episode\s+([0-9a-f]{12})", page.locator("#episode-info").inner_text()).group(1)
    record = arena.ctx.store.load(episode_id)
    assert record["end_reason"] == "error" and "500" in record["errors"][0]
    expect(page.locator("#run")).to_be_enabled()


def test_stop_is_live_only_while_this_pages_episode_runs(arena, chromium_page, browser_context_factory,
                                                         monkeypatch):
    def slow(request: dict) -> Turn:
        if any(m.get("role") == "tool" for m in request["messages"]):
            return Turn(ToolCall("submit_plan", optimal_args()))
        # Slow, not long: about 80 s of reasoning in a message small enough for a busy browser to keep drawing.
        return Turn(Text("Reading the situation carefully first. " * 40), ToolCall("get_situation"), chunk=4,
                    delay=0.2)

    with ChatPeer(slow) as peer:
        monkeypatch.setenv("VLLM_BASE_URL", peer.url + "/v1")
        page = chromium_page
        page.goto(arena.url)
        expect(page.locator("#task input")).not_to_have_value("", timeout=15000)
        expect(page.locator("#stop")).to_be_disabled()
        box = page.locator("#task input")
        box.fill(TASK_ID)
        box.press("Enter")
        box = page.locator("#model input")
        box.fill("vllm:slow")
        box.press("Enter")
        page.locator("#run").click()
        expect(page.locator("#stop")).to_be_enabled(timeout=10000)
        expect(page.locator("#run")).to_be_disabled()
        expect(page.locator("#episode-info")).to_contain_text("Episode", timeout=20000)
        episode_id = re.search(r"Episode\s+([0-9a-f]{12})", page.locator("#episode-info").inner_text()).group(1)
        watcher = browser_context_factory().new_page()
        watcher.goto(f"{arena.url}?episode={episode_id}")
        expect(watcher.locator("#episode-info")).to_contain_text(episode_id, timeout=40000)
        expect(watcher.locator("#stop")).to_be_disabled()  # watching is not stopping
        page.locator("#stop").click(timeout=45000)  # a busy page re-renders the stream while the click waits
        expect(page.locator("#status")).to_contain_text("stopped", timeout=30000)
        expect(page.locator("#run")).to_be_enabled()
        expect(page.locator("#stop")).to_be_disabled()
    assert arena.ctx.store.load(episode_id)["end_reason"] == "stopped"


def test_a_models_token_usage_is_shown(arena, chromium_page, monkeypatch):
    with ChatPeer([Turn(Text("Submitting the optimum."), ToolCall("submit_plan", optimal_args()))]) as peer:
        monkeypatch.setenv("VLLM_BASE_URL", peer.url + "/v1")
        page = chromium_page
        page.goto(arena.url)
        expect(page.locator("#task input")).not_to_have_value("", timeout=15000)
        box = page.locator("#task input")
        box.fill(TASK_ID)
        box.press("Enter")
        box = page.locator("#model input")
        box.fill("vllm:quick")
        box.press("Enter")
        page.locator("#run").click()
        expect(page.locator("#grade")).to_contain_text("Reward 1", timeout=60000)
        expect(page.locator("#status")).to_contain_text(re.compile(r"\d[\d,]* in / \d[\d,]* out tokens"))
