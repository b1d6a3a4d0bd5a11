"""From a provider's token to the browser: how late the live view is, and what a long episode costs the page.

1. Latency: a local chat-completions peer streams numbered tokens (`w00001 w00002 ...`, one per delta, 25 ms
   apart, three turns) to the app; chromium (Playwright, Debian's build) watches the chat with a MutationObserver
   and notes the wall time each token first shows. Latency = shown - sent, same clock. Target: p50 under 150 ms.
2. Memory: the JS heap of the page after a 40-turn, 100k-token episode, against the same page freshly loaded.

    python bench/stream_bench.py            # about two minutes
    python bench/stream_bench.py --quick    # a smoke run: fewer tokens and a 4-turn long episode
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from testkit.app import launched_app  # noqa: E402
from testkit.browser import launch_chromium  # noqa: E402
from testkit.peers import ChatPeer, Text, Thinking, ToolCall, Turn  # noqa: E402
from testkit.tasks import TASK_ID, optimal_args  # noqa: E402

TOKENS_PER_TURN = 150
TOKEN_GAP_S = 0.025
LONG_TURNS = 40
LONG_TOKENS = 100_000

WATCH = """
() => {
  window.__seen = {};
  const chat = document.querySelector('#chat');
  const note = () => {
    const text = chat.innerText;
    const now = performance.timeOrigin + performance.now();
    for (const m of text.matchAll(/w(\\d{5})\\b/g)) {
      if (!(m[1] in window.__seen)) window.__seen[m[1]] = now;
    }
  };
  new MutationObserver(note).observe(chat, {childList: true, subtree: true, characterData: true});
}
"""


def token(i: int) -> str:
    return f"w{i:05d} "


def latency_player(request: dict) -> Turn:
    turn = sum(1 for m in request["messages"] if m.get("role") == "assistant")
    if turn == 3:
        return Turn(ToolCall("submit_plan", optimal_args()))
    first = turn * TOKENS_PER_TURN
    words = "".join(token(first + i) for i in range(TOKENS_PER_TURN))
    return Turn(Text(words), ToolCall("get_situation"), chunk=len(token(0)), delay=TOKEN_GAP_S)


def long_player(request: dict) -> Turn:
    turn = sum(1 for m in request["messages"] if m.get("role") == "assistant")
    if turn == LONG_TURNS - 1:
        return Turn(ToolCall("submit_plan", optimal_args()))
    # About 2,500 tokens a turn (4 characters each): reasoning and text, and a call answered locally (its
    # arguments are not JSON), so the server's 24-call limit does not end the episode first.
    share = LONG_TOKENS * 4 // LONG_TURNS
    return Turn(Thinking("ship 7 waits for the gale; " * (share // 2 // 27)),
                Text("Moving ship 12 two sections up. " * (share // 2 // 32)),
                ToolCall("check_plan", '{"plan": [unfinished'), chunk=400)


def open_page(browser, url: str):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url)
    page.wait_for_selector("#run")
    page.wait_for_function("document.querySelector('#task input').value !== ''")
    box = page.locator("#task input")
    box.fill(TASK_ID)
    box.press("Enter")
    return page


def run_model(page, model: str, max_turns: int = 12) -> None:
    box = page.locator("#model input")
    box.fill(model)
    box.press("Enter")
    page.locator("#max-turns input").fill(str(max_turns))
    page.locator("#run").click()
    page.wait_for_function("document.querySelector('#grade').innerText.includes('Reward')", timeout=600_000)


def heap_mb(page) -> float:
    session = page.context.new_cdp_session(page)
    session.send("HeapProfiler.collectGarbage")
    session.send("Performance.enable")
    metrics = {m["name"]: m["value"] for m in session.send("Performance.getMetrics")["metrics"]}
    return metrics["JSHeapUsedSize"] / 2**20


def main() -> None:
    global TOKENS_PER_TURN, LONG_TURNS, LONG_TOKENS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run, not a measurement")
    if parser.parse_args().quick:
        TOKENS_PER_TURN, LONG_TURNS, LONG_TOKENS = 20, 4, 4_000
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright, launched_app(Path(tmp)) as arena:
        browser = launch_chromium(playwright)
        try:
            with ChatPeer(latency_player) as peer:
                os.environ["VLLM_BASE_URL"] = peer.url + "/v1"
                page = open_page(browser, arena.url)
                page.evaluate(WATCH)
                run_model(page, "vllm:latency")
                seen = page.evaluate("window.__seen")
                # The first three answers carry the numbered tokens; the fourth is the submit.
                sent = [t for r in peer.requests[:3] for t in r.delta_sent_at[:TOKENS_PER_TURN]]
            lags = [(seen[f"{i:05d}"] / 1000 - sent[i]) * 1000 for i in range(len(sent)) if f"{i:05d}" in seen]
            missing = len(sent) - len(lags)
            page.close()

            fresh = open_page(browser, arena.url)
            fresh_mb = heap_mb(fresh)
            with ChatPeer(long_player) as peer:
                os.environ["VLLM_BASE_URL"] = peer.url + "/v1"
                started = time.monotonic()
                run_model(fresh, "vllm:long", max_turns=LONG_TURNS)
                long_s = time.monotonic() - started
                long_mb = heap_mb(fresh)
                chars = sum(r.chars_sent for r in peer.requests)
            record = arena.ctx.store.rows()[-1]
        finally:
            browser.close()
    quantiles = statistics.quantiles(lags, n=20)
    print("| measure | value | target |")
    print("|---|---:|---|")
    print(f"| tokens streamed / seen in the page | {len(sent)} / {len(lags)} | all ({missing} missing) |")
    print(f"| token -> browser latency, p50 | {statistics.median(lags):.0f} ms | < 150 ms |")
    print(f"| token -> browser latency, p95 | {quantiles[18]:.0f} ms | |")
    print(f"| long episode: turns, characters streamed | {record['turns']}, {chars:,} | 40, ~400k |")
    print(f"| long episode wall time | {long_s:.1f} s | |")
    print(f"| page JS heap, fresh / after the long episode | {fresh_mb:.1f} MB / {long_mb:.1f} MB "
          f"({long_mb / fresh_mb:.1f}x) | |")
    print(json.dumps({"lags_ms": [round(x, 1) for x in lags[:20]]}), file=sys.stderr)


if __name__ == "__main__":
    main()
