"""The Run tab in a real browser: Debian's chromium driven by Playwright (no browser download)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from testkit.peers import ChatPeer, Text, Thinking, ToolCall, Turn
from tests.agent_helpers import TASK_ID, optimal_args
from tests.browser.conftest import ARTIFACTS

pytestmark = pytest.mark.browser

XSS_TEXT = ('Here is my plan <img src=x onerror="window.__xss = 1"> and '
            '<script>window.__xss = 2</script> <b onmouseover="window.__xss = 3">bold</b>')


def open_form(page: Page, url: str, task_id: str = TASK_ID) -> None:
    page.goto(url)
    page.wait_for_selector("#run")
    expect(page.locator("#task input")).not_to_have_value("", timeout=15000)
    box = page.locator("#task input")
    box.fill(task_id)
    box.press("Enter")


def run_in_page(page: Page, url: str, model: str | None = None, key: str | None = None) -> str:
    """Open the app, optionally type a model spec and a key, click Run, wait for the grade; returns the id."""
    open_form(page, url)
    if model:
        box = page.locator("#model input")
        box.fill(model)
        box.press("Enter")
    if key:
        page.get_by_text("API keys: used for this run only").click()
        page.locator("#key-anthropic input").fill(key)
    page.locator("#run").click()
    expect(page.locator("#grade")).to_contain_text("Reward", timeout=60000)
    info = page.locator("#episode-info").inner_text()
    return re.search(r"Episode\s+([0-9a-f]{12})", info).group(1)


def test_baseline_runs_live_to_a_grade_with_a_berth_chart(arena, chromium_page):
    page = chromium_page
    episode_id = run_in_page(page, arena.url)
    chat = page.locator("#chat")
    expect(chat).to_contain_text("check_plan")
    expect(chat).to_contain_text("submit_plan")
    assert chat.locator(".message").count() >= 6
    expect(page.locator("#status")).to_contain_text("submitted")
    # The berth chart: one rectangle per ship of the submitted plan, in Plotly's SVG.
    ships = len(json.loads(optimal_args())["plan"])
    expect(page.locator("#chart .js-plotly-plot")).to_be_visible()
    assert page.locator("#chart path[data-index]").count() >= ships or \
        page.locator("#chart .shapelayer path").count() >= ships
    expect(page.locator("#grade")).to_contain_text("feasible")
    expect(page.locator("#optimal .js-plotly-plot")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "run-tab-baseline.png"), full_page=True)
    record = arena.ctx.store.load(episode_id)
    assert record["end_reason"] == "submitted" and record["task_id"] == TASK_ID
    expect(page.locator("#grade")).to_contain_text(f"{record['reward']:.4f}".rstrip("0"))


def test_an_episode_link_reattaches_in_a_fresh_page(arena, chromium_page, browser_context_factory):
    episode_id = run_in_page(chromium_page, arena.url)
    other = browser_context_factory().new_page()
    other.goto(f"{arena.url}?episode={episode_id}")
    expect(other.locator("#episode-info")).to_contain_text(episode_id, timeout=20000)
    expect(other.locator("#chat")).to_contain_text("submit_plan")
    expect(other.locator("#grade")).to_contain_text("Reward")
    other.screenshot(path=str(ARTIFACTS / "run-tab-episode-link.png"), full_page=True)


def test_a_running_episode_streams_reasoning_and_text_live(arena, chromium_page, monkeypatch):
    """A scripted chat-completions peer streams reasoning and text slowly; the page shows them before the end."""
    thought = "Ship 5 arrives after its planned departure, so it will be late whatever I do. "
    said = "I will read the situation before drafting anything at all. "

    def player(request: dict) -> Turn:
        if any(m.get("role") == "tool" for m in request["messages"]):
            return Turn(ToolCall("submit_plan", optimal_args()))
        return Turn(Thinking(thought * 8), Text(said * 2), ToolCall("get_situation"), chunk=5, delay=0.04)

    with ChatPeer(player) as peer:
        monkeypatch.setenv("VLLM_BASE_URL", peer.url + "/v1")
        page = chromium_page
        open_form(page, arena.url)
        box = page.locator("#model input")
        box.fill("vllm:streamer")
        box.press("Enter")
        page.locator("#run").click()
        # Mid-stream: the thinking message exists and grows while the grade is not there yet.
        expect(page.locator("#chat")).to_contain_text("Thinking", timeout=20000)
        first = len(page.locator("#chat").inner_text())
        time.sleep(1.0)
        assert len(page.locator("#chat").inner_text()) > first
        assert "Reward" not in page.locator("#grade").inner_text()
        expect(page.locator("#status")).to_contain_text("running")
        page.screenshot(path=str(ARTIFACTS / "run-tab-streaming.png"), full_page=True)
        expect(page.locator("#grade")).to_contain_text("Reward", timeout=60000)
        expect(page.locator("#chat")).to_contain_text(said.strip())


def test_model_html_and_script_never_run(arena, chromium_page, monkeypatch):
    page = chromium_page
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    script = [Turn(Text(XSS_TEXT), ToolCall("submit_plan", optimal_args()))]
    with ChatPeer(script) as peer:
        monkeypatch.setenv("VLLM_BASE_URL", peer.url + "/v1")
        episode_id = run_in_page(page, arena.url, model="vllm:xss")
    assert arena.ctx.store.load(episode_id)["reward"] == 1.0
    chat = page.locator("#chat")
    expect(chat).to_contain_text('<img src=x onerror="window.__xss = 1">')
    expect(chat).to_contain_text("<script>window.__xss = 2</script>")
    chat.get_by_text("bold", exact=False).first.hover()
    assert page.evaluate("window.__xss") is None and not dialogs
    assert chat.locator("img[src='x']").count() == 0 and chat.locator("script").count() == 0
    page.screenshot(path=str(ARTIFACTS / "run-tab-untrusted-text.png"), full_page=True)


def test_a_typed_key_stays_out_of_the_page_the_browser_storage_and_the_record(arena, chromium_page):
    secret = "sk-ant-api03-TYPED-KEY-never-stored"
    page = chromium_page
    episode_id = run_in_page(page, arena.url, key=secret)
    storage = page.evaluate("JSON.stringify(Object.assign({}, window.localStorage, window.sessionStorage))")
    assert "TYPED-KEY" not in storage
    assert "TYPED-KEY" not in page.locator("body").inner_text()
    stored = Path(arena.root)
    assert not any("TYPED-KEY" in p.read_text() for p in stored.rglob("*.json*"))
    assert arena.ctx.store.load(episode_id) is not None


def test_a_plain_page_load_and_a_bad_episode_link(arena, chromium_page):
    page = chromium_page
    page.goto(arena.url)
    page.wait_for_selector("#run")
    expect(page.locator("#status")).to_contain_text("Pick a model and a task")
    page.goto(f"{arena.url}?episode=..%2F..%2Fetc")
    expect(page.locator("#status")).to_contain_text("malformed")
    page.goto(f"{arena.url}?episode=0123456789ab")
    expect(page.locator("#status")).to_contain_text("No episode 0123456789ab is running here or stored")
