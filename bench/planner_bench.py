"""Play's plan editor on the biggest task (59 ships): a drag frame in Debian's chromium, and the server call that
finds a draft's problems and draws it again.

    python bench/planner_bench.py [--task dock-36A-w35x3-extreme-0] [--moves 120] [--calls 30]

- server: `draft_problems` (parse, berth_env's check, the scene, its SVG) on the published plan, and the check
  alone, medians of `--calls` calls in this process;
- browser: the app started in this process, Play opened on the task by its link; a ship pressed, then `--moves`
  pointermove events one per animation frame: the handler's own time (performance.now around dispatchEvent) and
  the frame-to-frame time while dragging (median and 95th percentile); then a drop until the server's problems
  are drawn (the round trip a person waits for);
- lazy: whether the chart is drawn before Play is opened (it should not be: the first paint carries no chart).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from berth_env import check, load_pack, parse_plan  # noqa: E402
from berth_env.baselines import published_plan  # noqa: E402
from testkit.app import launched_app  # noqa: E402
from testkit.browser import launch_chromium  # noqa: E402
from viewer.play.planner import draft_problems  # noqa: E402

_DRAG = """async ([ship, moves]) => {
  const host = document.querySelector('#play-planner .pl-chart');
  const rect = host.querySelector(`rect.ship[data-ship="${ship}"]`);
  const box = rect.getBoundingClientRect();
  const x0 = box.x + box.width / 2, y0 = box.y + box.height / 2;
  const at = (type, x, y) => new PointerEvent(type, {bubbles: true, clientX: x, clientY: y, pointerId: 1,
                                                     pointerType: 'mouse', isPrimary: true, buttons: 1});
  rect.dispatchEvent(at('pointerdown', x0, y0));
  const handler = [], frames = [];
  let last = performance.now();
  for (let i = 1; i <= moves; i++) {
    await new Promise(r => requestAnimationFrame(r));
    const now = performance.now();
    frames.push(now - last); last = now;
    const t = performance.now();
    host.dispatchEvent(at('pointermove', x0 + 3 * i, y0 + (i % 20)));
    rect.getBoundingClientRect();  // the style and layout the move costs, inside the timing
    handler.push(performance.now() - t);
  }
  const t = performance.now();
  host.dispatchEvent(at('pointerup', x0 + 3 * moves, y0));
  await new Promise(r => { const w = () => document.querySelector('#play-planner .pl[data-pending]') ? setTimeout(w, 5) : r(); w(); });
  const root = document.querySelector('#play-planner .pl');
  return {handler, frames: frames.slice(1), drop: performance.now() - t,
          call: Number(root.getAttribute('data-call-ms')), draw: Number(root.getAttribute('data-draw-ms'))};
}"""


def _stats(values: list[float]) -> str:
    values = sorted(values)
    return f"median {statistics.median(values):.2f} ms, p95 {values[int(len(values) * 0.95) - 1]:.2f} ms"


def server_side(task: dict, calls: int) -> None:
    plan = published_plan(task)
    draft_problems(task, plan, plan)
    drawn, checked = [], []
    for _ in range(calls):
        t = time.perf_counter()
        draft_problems(task, plan, plan)
        drawn.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        check(task, parse_plan(task, plan).entries)
        checked.append((time.perf_counter() - t) * 1000)
    print(f"server, {len(task['ships'])} ships: draft_problems {_stats(drawn)}; check alone {_stats(checked)}")


def browser_side(task_id: str, moves: int) -> None:
    with tempfile.TemporaryDirectory() as folder, launched_app(Path(folder)) as app, sync_playwright() as pw:
        browser = launch_chromium(pw)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(f"{app.url}?tab=browse")
        page.get_by_role("tab", name="Browse", selected=True).wait_for(timeout=60000)
        page.wait_for_timeout(3000)
        drawn = page.evaluate("() => !!document.querySelector('#play-planner .pl-chart svg')")
        print(f"lazy: the chart drawn while Browse is open: {drawn}")
        page.goto(f"{app.url}?tab=play&task={task_id}")
        try:
            page.wait_for_function("() => document.querySelectorAll('#play-planner rect.ship').length > 50",
                                   timeout=60000)
        finally:
            page.screenshot(path=str(Path(folder).parent / "planner-bench.png"))
        ships = page.locator("#play-planner rect.ship").count()
        result = page.evaluate(_DRAG, [0, moves])
        print(f"browser, {ships} ships: pointermove handler with its layout {_stats(result['handler'])}; "
              f"frame while dragging {_stats(result['frames'])}; drop to problems drawn {result['drop']:.0f} ms "
              f"(the server call {result['call']:.0f} ms, drawing {result['draw']:.0f} ms)")
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="dock-36A-w35x3-extreme-0")
    parser.add_argument("--moves", type=int, default=120)
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    server_side(load_pack().get(args.task), args.calls)
    browser_side(args.task, args.moves)


if __name__ == "__main__":
    main()
