"""Language models in the Run tab, in Debian's chromium, against a local chat-completions peer (testkit/peers): a
stream that shows while it runs, model text that stays text, tokens counted; a missing key said beside the model,
and a provider that fails mid-run."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from testkit.peers import ChatPeer, Error, Text, Thinking, ToolCall, Turn, always
from testkit.tasks import TASK_ID, optimal_args
from tests.browser.conftest import ARTIFACTS
from tests.browser.run_page import episode_of, open_form, pick

pytestmark = pytest.mark.browser

XSS_TEXT = ('Here is my plan <img src=x onerror="window.__xss = 1"> and '
            '<script>window.__xss = 2</script> <b onmouseover="window.__xss = 3">bold</b>; '
            "more at https://evil.example/plan, www.evil.example or [my notes](https://evil.example/notes)")


def test_a_model_streams_live_its_html_stays_text_and_its_tokens_are_counted(arena, new_page, monkeypatch):
    thought = "Ship 5 arrives after its planned departure, so it will be late whatever I do. "

    def player(request: dict) -> Turn:
        if any(m.get("role") == "tool" for m in request["messages"]):
            return Turn(Text(XSS_TEXT), ToolCall("submit_plan", optimal_args()))
        return Turn(Thinking(thought * 5), Text("I will read the situation first. " * 2), ToolCall("get_situation"),
                    chunk=8, delay=0.1)  # about 5 s of thinking: long enough to be seen mid-stream

    page = new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    with ChatPeer(player) as peer:
        monkeypatch.setenv("VLLM_BASE_URL", peer.url + "/v1")
        open_form(page, arena.url)
        pick(page, "task", TASK_ID)
        pick(page, "model", "vllm:streamer")
        page.locator("#run").click()
        # Mid-stream: the thinking message exists and grows while the grade is not there yet.
        expect(page.locator("#chat")).to_contain_text("Thinking", timeout=30000)
        first = len(page.locator("#chat").inner_text())
        time.sleep(1.0)
        assert len(page.locator("#chat").inner_text()) > first
        assert "reward" not in page.locator("#grade").inner_text()
        expect(page.locator("#status")).to_contain_text("running")
        page.screenshot(path=str(ARTIFACTS / "run-tab-streaming.png"), full_page=True)
        expect(page.locator("#grade")).to_contain_text("feasible, reward 1", timeout=60000)
    assert arena.ctx.store.load(episode_of(page))["reward"] == 1.0
    chat = page.locator("#chat")
    expect(chat).to_contain_text("I will read the situation first.")
    expect(chat).to_contain_text('<img src=x onerror="window.__xss = 1">')
    expect(chat).to_contain_text("<script>window.__xss = 2</script>")
    chat.get_by_text("bold", exact=False).first.hover()
    assert page.evaluate("window.__xss") is None and not dialogs
    assert chat.locator("img[src='x']").count() == 0 and chat.locator("script").count() == 0
    # Its links are text (issue 27): the Chatbot's Markdown would link each of them.
    expect(chat).to_contain_text("more at https://evil.example/plan, www.evil.example or [my notes](https://evil")
    assert chat.locator("a[href*='evil.example']").count() == 0
    expect(page.locator("#status")).to_contain_text(re.compile(r"\d[\d,]* in / \d[\d,]* out tokens"))
    page.screenshot(path=str(ARTIFACTS / "run-tab-untrusted-text.png"), full_page=True)


def test_a_missing_key_is_said_beside_the_model_and_a_failing_provider_in_the_chat(arena, new_page,
                                                                                  monkeypatch, caplog):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    page = new_page()
    open_form(page, arena.url)
    pick(page, "model", "anthropic:claude-sonnet-5-5")
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

    # It names a short wait, so the retries (still all made) take milliseconds, not the default back-off.
    with ChatPeer(always(Error(500, "the model server fell over", headers={"retry-after-ms": "20"}))) as peer:
        monkeypatch.setenv("VLLM_BASE_URL", peer.url + "/v1")
        pick(page, "model", "vllm:fragile")
        page.locator("#run").click()
        expect(page.locator("#chat")).to_contain_text("Provider error", timeout=60000)
        expect(page.locator("#status")).to_contain_text("error")
        expect(note).to_be_hidden()  # the old note went with the new run
    # Its model never answered a turn: the error is shown, and the episode is no rollout (nothing saved).
    expect(page.locator("#episode-info")).to_contain_text("ended before its first turn, so it is not a rollout")
    assert arena.ctx.store.load(episode_of(page)) is None
    assert "500" in page.locator("#chat").inner_text()
    expect(page.locator("#run")).to_be_enabled()
