"""The Run form explains itself (issue 10), in Debian's chromium: the task shown before any run and following the
picker, and a Stop button that is live only on the page whose episode runs."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from testkit.peers import ChatPeer, Text, ToolCall, Turn
from testkit.tasks import TASK_ID, optimal_args
from tests.browser.run_page import episode_of, open_form, pick, red_ships

pytestmark = pytest.mark.browser


def test_the_task_preview_shows_before_any_run_and_follows_the_picker(arena, new_page):
    page = new_page()
    page.goto(arena.url)
    preview = page.locator("#task-preview")
    expect(preview).to_be_visible(timeout=30000)
    text = page.locator("#preview-text")
    expect(text).to_contain_text("dock-24B-w06x1-standard-0")
    for part in ("quay 24B", "tier standard", "16 ships", "What changed this week", "Sections 6–14 closed",
                 "proven optimum", "naive re-plan", "breaks 5 rules on 4 ships"):
        expect(text).to_contain_text(part)
    expect(page.locator("#preview-chart .js-plotly-plot")).to_be_visible()
    assert red_ships(page, "#preview-chart") == 4  # the published plan's broken ships, outlined red
    pick(page, "task", "dock-36A-w35x3-extreme-0")  # how fast it follows is bench/page_bench.py's to measure
    expect(text).to_contain_text("dock-36A-w35x3-extreme-0")
    expect(text).to_contain_text("59 ships")
    expect(page.locator("#preview-chart")).to_contain_text("The published plan")


def test_stop_is_live_only_while_this_pages_episode_runs(arena, new_page,
                                                         monkeypatch):
    def slow(request: dict) -> Turn:
        if not any(m.get("role") == "tool" for m in request["messages"]):
            # The first turn at once: the Stop below comes in the second, so the episode is a rollout to keep.
            return Turn(ToolCall("get_situation"))
        # Slow, not long: about 80 s of reasoning in a message small enough for a busy browser to keep drawing,
        # in a delta a second or so: each one redraws the chat, and the page only has to be busy until Stop.
        return Turn(Text("Weighing the berths carefully before I submit. " * 34), ToolCall("submit_plan",
                                                                                           optimal_args()),
                    chunk=16, delay=0.8)

    with ChatPeer(slow) as peer:
        monkeypatch.setenv("VLLM_BASE_URL", peer.url + "/v1")
        page = new_page()
        open_form(page, arena.url)
        expect(page.locator("#stop")).to_be_disabled()
        pick(page, "task", TASK_ID)
        pick(page, "model", "vllm:slow")
        page.locator("#run").click()
        expect(page.locator("#stop")).to_be_enabled()
        expect(page.locator("#run")).to_be_disabled()
        expect(page.locator("#episode-info")).to_contain_text("Episode", timeout=30000)
        episode_id = episode_of(page)
        watcher = new_page()
        watcher.goto(f"{arena.url}?episode={episode_id}")
        expect(watcher.locator("#episode-info")).to_contain_text(episode_id, timeout=40000)
        expect(watcher.locator("#stop")).to_be_disabled()  # watching is not stopping
        watcher.close()  # a closed watcher leaves the run as it was
        page.locator("#stop").click(timeout=45000)  # a busy page re-renders the stream while the click waits
        expect(page.locator("#status")).to_contain_text("stopped", timeout=45000)
        expect(page.locator("#run")).to_be_enabled()
        expect(page.locator("#stop")).to_be_disabled()
    stopped = arena.ctx.store.load(episode_id)
    assert stopped["end_reason"] == "stopped" and stopped["turns"] == 1
