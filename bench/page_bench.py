"""What a visitor waits for, in Debian's chromium: a share link until its rollout shows, Browse until its rows show.

    python bench/page_bench.py [--rows 300] [--trials 5] [--against /path/to/another/checkout] [--only tab]
                               [--busy 2]

Builds a rollout folder of `--rows` realistic records, starts `python app.py` from this checkout (and, with
`--against`, from another one, e.g. a worktree of an older commit) on that folder, and times in a fresh browser
each trial:
- share link: navigation to `?tab=browse&rollout=<id>` until the rollout's header names its model and its chart is
  drawn, and whether both start in the first 1440x900 viewport;
- tab to rows: a click on the Browse tab (the Run tab loaded first) until the list shows a task id;
- preview follows the picker: on the Run tab, another task typed into the picker (Enter) until the task preview
  names it (a checkout without a preview shows "-");
- where Run sits: the top of the Run button in px, at 1440x900 and at 390x844 (inside the viewport when below
  900 and 844).
Medians of the trials; run both apps in one invocation so the ratio is measured side by side. `--only tab` times
the tab alone; `--busy K` keeps K busy loops running meanwhile (a machine whose cores are taken).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from playwright.sync_api import Browser, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from testkit.browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from testkit.records import make_records  # noqa: E402

VIEWPORT = {"width": 1440, "height": 900}


def build_folder(folder: Path, rows: int) -> str:
    """A store with `rows` rollouts; returns the id of one submitted rollout to link to."""
    from rollouts.store import RolloutStore

    store = RolloutStore(folder, writer_id="bench")
    records = make_records(rows, seed=31)
    for record in records:
        store.save(record)
    store.close()
    return next(r["episode_id"] for r in records if r["final"]["submitted"] and len(r["steps"]) >= 2)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_app(checkout: Path, folder: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "ROLLOUT_DIR": str(folder), "PUBLIC_ROLLOUTS": "", "GRADIO_SERVER_PORT": str(port),
           "HF_HUB_OFFLINE": "1", "TASKS_DATASET": ""}
    process = subprocess.Popen([sys.executable, "app.py"], cwd=checkout, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    os.killpg(process.pid, signal.SIGTERM)
    raise RuntimeError(f"the app in {checkout} did not start")


def share_link_seconds(browser: Browser, url: str, rollout: str) -> tuple[float, bool]:
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    started = time.perf_counter()
    page.goto(f"{url}?tab=browse&rollout={rollout}", wait_until="commit")
    page.wait_for_function("""() => { const h = document.querySelector('#rollout-head');
        return h && h.innerText.includes(':') && document.querySelector('#browse-chart .js-plotly-plot'); }""",
                           timeout=60000)
    seconds = time.perf_counter() - started
    in_view = page.evaluate("""() => ['#rollout-head', '#browse-chart'].every(s => {
        const r = document.querySelector(s).getBoundingClientRect(); return r.top >= 0 && r.top < innerHeight; })""")
    context.close()
    return seconds, bool(in_view)


def tab_to_rows_seconds(browser: Browser, url: str) -> float:
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("#run")
    page.wait_for_timeout(1500)  # the Run tab has settled
    started = time.perf_counter()
    page.get_by_role("tab", name="Browse").click()
    page.wait_for_function("() => /dock-/.test(document.querySelector('#rollouts')?.innerText || '')",
                           timeout=60000)
    seconds = time.perf_counter() - started
    context.close()
    return seconds


OTHER_TASK = "dock-36A-w35x3-extreme-0"


def preview_follows_seconds(browser: Browser, url: str) -> float | None:
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("#run")
    page.wait_for_timeout(1500)
    if not page.locator("#preview-text").count():
        context.close()
        return None
    box = page.locator("#task input")
    box.fill(OTHER_TASK)
    started = time.perf_counter()
    box.press("Enter")
    page.wait_for_function(f"() => (document.querySelector('#preview-text')?.innerText || '').includes('{OTHER_TASK}')",
                           timeout=60000)
    seconds = time.perf_counter() - started
    context.close()
    return seconds


def run_button_top(browser: Browser, url: str, viewport: dict) -> float:
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("#run")
    page.wait_for_timeout(1500)
    top = page.evaluate("() => document.querySelector('#run').getBoundingClientRect().top")
    context.close()
    return top


def measure(browser: Browser, url: str, rollout: str, trials: int, only: str | None = None) -> dict:
    if only == "tab":
        tab = sorted(tab_to_rows_seconds(browser, url) for _ in range(trials))
        return {"tab_to_rows_s": statistics.median(tab), "tab_to_rows_max_s": tab[-1]}
    share = [share_link_seconds(browser, url, rollout) for _ in range(trials)]
    tab = [tab_to_rows_seconds(browser, url) for _ in range(trials)]
    follows = [preview_follows_seconds(browser, url) for _ in range(trials)]
    return {"share_link_s": statistics.median(s for s, _ in share), "in_first_viewport": all(v for _, v in share),
            "tab_to_rows_s": statistics.median(tab),
            "preview_s": None if None in follows else statistics.median(follows),
            "run_top_desktop": run_button_top(browser, url, VIEWPORT),
            "run_top_phone": run_button_top(browser, url, {"width": 390, "height": 844})}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--against", type=Path, help="another checkout to measure side by side")
    parser.add_argument("--only", choices=["tab"], help="time only the Browse tab's first rows")
    parser.add_argument("--busy", type=int, default=0, help="busy loops taking cores meanwhile")
    args = parser.parse_args(argv)
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    folder = Path(tempfile.mkdtemp(prefix="page-bench-"))
    try:
        rollout = build_folder(folder, args.rows)
        checkouts = {"this checkout": ROOT, **({"against": args.against.resolve()} if args.against else {})}
        results = {}
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for name, checkout in checkouts.items():
                process, url = start_app(checkout, folder)
                try:
                    results[name] = measure(browser, url, rollout, args.trials, args.only)
                finally:
                    os.killpg(process.pid, signal.SIGTERM)
                    process.wait(timeout=30)
            browser.close()
        for name, figures in results.items():
            if args.only == "tab":
                print(f"{name}: tab to rows {figures['tab_to_rows_s']:.2f} s (worst {figures['tab_to_rows_max_s']:.2f} "
                      f"s), {args.busy} busy loop(s)")
                continue
            preview = "-" if figures["preview_s"] is None else f"{figures['preview_s']:.2f} s"
            print(f"{name}: share link {figures['share_link_s']:.2f} s (in the first viewport: "
                  f"{figures['in_first_viewport']}), tab to rows {figures['tab_to_rows_s']:.2f} s, preview follows "
                  f"the picker {preview}, Run's top {figures['run_top_desktop']:.0f} px at 1440x900 and "
                  f"{figures['run_top_phone']:.0f} px at 390x844")
        if len(results) == 2:
            mine, other = results["this checkout"], results["against"]
            share = (f"share link {mine['share_link_s'] / other['share_link_s']:.2f}, " if "share_link_s" in mine
                     else "")
            print(f"ratio (this / against): {share}tab to rows {mine['tab_to_rows_s'] / other['tab_to_rows_s']:.2f}")
    finally:
        for loop in loops:
            loop.kill()
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
