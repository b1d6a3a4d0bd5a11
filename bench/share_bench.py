"""Time the share pages (issue 20): their pictures in this process, and the pages as `python app.py` serves them.

    python bench/share_bench.py [--runs 30]                       # the pictures only
    python bench/share_bench.py --served [--rows 300] [--trials 5]  # ... and the served pages

The pictures, on the largest eval task (59 ships, three weeks), warm: the berth chart's scene, its SVG, the plotly
figure the app builds from the same scene, and the share image (SVG card and its PNG). Targets: the chart's SVG well
under 20 ms; the 1200 x 630 PNG within 300 ms.

`--served` starts `python app.py` on a folder of `--rows` realistic rollouts and measures, side by side in one run:
- in Debian's chromium, a fresh browser context each trial, the share page `/r/<id>` and the Gradio share link
  `?tab=browse&rollout=<id>` (bench/page_bench.py's) from navigation until the rollout's header and chart are
  drawn, alternating the two;
- with a plain HTTP client (one kept-alive connection), warm: `GET /r/<id>` and `GET /r/<id>.png` medians, and
  their first renders (distinct rollouts, nothing cached);
- Gradio's queue under a flood of share requests: the median and worst time of one API call (`/browse_record`)
  alone (before and after), and while 6 threads ask for pages and images of distinct rollouts, uncached, as fast
  as they are answered.
Targets: the page within 50 ms at p50, the PNG within 300 ms, chromium within 1 s; the Gradio call unmoved.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from berth_env import load_pack  # noqa: E402
from viewer.chart import berth_chart, berth_chart_svg, berth_scene  # noqa: E402
from viewer.chart.card import share_png, share_svg  # noqa: E402

LARGEST = "dock-36A-w35x3-extreme-0"
VIEWPORT = {"width": 1440, "height": 900}


def median_ms(work: Callable[[], object], runs: int) -> float:
    for _ in range(3):  # warm up
        work()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def pictures(runs: int) -> None:
    task = load_pack().get(LARGEST)
    plan, previous = task["reference"]["optimal_plan"], task["reference"]["naive_plan"]
    card = {"model": "anthropic:claude-sonnet-5-5@high", "reward": 0.91}
    rows = [
        ("scene (parse, check, layers)", lambda: berth_scene(task, plan, previous_plan=previous), runs * 5),
        ("chart SVG (`berth_chart_svg`)", lambda: berth_chart_svg(task, plan, previous_plan=previous), runs * 5),
        ("plotly figure (`berth_chart`)", lambda: berth_chart(task, plan, previous_plan=previous), runs),
        ("share card SVG (`share_svg`)", lambda: share_svg(task, plan, **card), runs * 5),
        ("share image PNG (`share_png`)", lambda: share_png(task, plan, **card), runs),
    ]
    print(f"| {LARGEST}, warm, median | ms |\n|---|---|")
    for name, work, n in rows:
        print(f"| {name} | {median_ms(work, n):.1f} |")


# -- the pages as served -----------------------------------------------------------------------------------------

def page_seconds(browser: Any, url: str, rollout: str) -> float:
    """Navigation to the share page until its header and its chart are drawn, in a fresh context."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    started = time.perf_counter()
    page.goto(f"{url}r/{rollout}", wait_until="commit")
    page.wait_for_function("""() => { const h = document.querySelector('.head h1');
        const c = document.querySelector('figure.chart svg');
        return h && c && h.getBoundingClientRect().height > 0 && c.getBoundingClientRect().height > 0; }""",
                           timeout=60000)
    seconds = time.perf_counter() - started
    context.close()
    return seconds


def http_medians(url: str, ids: list[str], runs: int) -> dict[str, float]:
    """Warm medians (ms) of the page and of the image (both cached by then), and of each one's first render."""
    with httpx.Client(timeout=60) as client:
        first: dict[str, list[float]] = {"page_first_ms": [], "png_first_ms": []}
        for episode_id in ids[1:11]:
            for name, suffix in (("page_first_ms", ""), ("png_first_ms", ".png")):
                started = time.perf_counter()
                assert client.get(f"{url}r/{episode_id}{suffix}").status_code == 200
                first[name].append(time.perf_counter() - started)
        out = {name: statistics.median(times) * 1000 for name, times in first.items()}
        for name, path in (("page_ms", f"r/{ids[0]}"), ("png_ms", f"r/{ids[0]}.png")):
            out[name] = median_ms(lambda path=path: client.get(f"{url}{path}").raise_for_status(), runs)
    return out


def queue_under_flood(url: str, rollout: str, ids: list[str], calls: int) -> dict[str, float]:
    """One Gradio API call's time (s) alone, while threads flood the share routes with requests for one rollout
    (answered from the caches: one link pasted in many places), and with uncached requests (every rollout a new
    one: lookups, renders, images drawn)."""
    from gradio_client import Client

    client = Client(url, verbose=False)

    def timed() -> list[float]:
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            client.predict(rollout, api_name="/browse_record")
            times.append(time.perf_counter() - started)
        return times

    alone = timed()
    out: dict[str, float] = {}
    for name, pick in (("cached", lambda i: rollout), ("flood", lambda i: ids[(11 + i // 2) % len(ids)])):
        stop, answered = threading.Event(), []

        def flood(offset: int, pick: Any = pick, stop: threading.Event = stop, answered: list = answered) -> None:
            with httpx.Client(timeout=60) as http:
                for i in itertools.count(offset, 6):
                    if stop.is_set():
                        return
                    answered.append(http.get(f"{url}r/{pick(i)}{'.png' if i % 2 else ''}").status_code)

        threads = [threading.Thread(target=flood, args=(k,), daemon=True) for k in range(6)]
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        started, flooded = time.perf_counter(), timed()
        out[f"{name}_rps"] = len(answered) / (time.perf_counter() - started + 1.0)
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        out.update({f"{name}_p50": statistics.median(flooded), f"{name}_max": max(flooded),
                    f"{name}_ok": answered.count(200) / max(1, len(answered))})
    alone += timed()  # before and after: the machine's own noise, bracketed
    return {**out, "alone_p50": statistics.median(alone), "alone_max": max(alone)}


def served(rows: int, trials: int, runs: int) -> None:
    from playwright.sync_api import sync_playwright

    from bench.page_bench import build_folder, share_link_seconds, start_app
    from testkit.browser import launch_chromium

    folder = Path(tempfile.mkdtemp(prefix="share-bench-"))
    try:
        rollout = build_folder(folder, rows)
        ids = [p.stem for p in sorted(folder.glob("rollouts/*/*.json")) if p.stem != rollout]
        process, url = start_app(ROOT, folder)
        try:
            with sync_playwright() as playwright:
                browser = launch_chromium(playwright)
                page_seconds(browser, url, rollout)  # the app's first answers (imports, caches) out of the way
                share, gradio = [], []
                for _ in range(trials):
                    share.append(page_seconds(browser, url, rollout))
                    gradio.append(share_link_seconds(browser, url, rollout)[0])
                browser.close()
            http = http_medians(url, [rollout, *ids], runs * 3)
            queue = queue_under_flood(url, rollout, ids, 20)
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    page_s, link_s = statistics.median(share), statistics.median(gradio)
    print(f"\n| {rows} rollouts, `python app.py`, medians | figure |\n|---|---:|")
    print(f"| chromium: share page `/r/<id>` until header and chart are drawn ({trials} trials) | {page_s:.2f} s |")
    print(f"| chromium: Gradio link `?tab=browse&rollout=<id>`, the same | {link_s:.2f} s |")
    print(f"| ratio, share page / Gradio link | {page_s / link_s:.2f} |")
    print(f"| `GET /r/<id>`, warm | {http['page_ms']:.1f} ms |")
    print(f"| `GET /r/<id>.png`, warm (cached) | {http['png_ms']:.1f} ms |")
    print(f"| `GET /r/<id>`, first render of a rollout | {http['page_first_ms']:.0f} ms |")
    print(f"| `GET /r/<id>.png`, first render of a rollout | {http['png_first_ms']:.0f} ms |")
    print(f"| Gradio API call alone, median / worst | {queue['alone_p50']:.3f} / {queue['alone_max']:.3f} s |")
    for name, what in (("cached", "one rollout's page and image (cached)"), ("flood", "distinct rollouts (uncached)")):
        print(f"| ... while 6 clients ask for {what}: {queue[f'{name}_rps']:.0f} requests/s, "
              f"{queue[f'{name}_ok']:.0%} answered 200 | {queue[f'{name}_p50']:.3f} / {queue[f'{name}_max']:.3f} s |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--served", action="store_true", help="also start `python app.py` and time its pages")
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    pictures(args.runs)
    if args.served:
        served(args.rows, args.trials, args.runs)


if __name__ == "__main__":
    main()
