"""Time the share page's pictures in-process on the largest eval task (59 ships, three weeks), warm: the berth
chart's scene, its SVG, the plotly figure the app builds from the same scene, and the share image (SVG card and
its PNG).

Targets: the chart's SVG well under 20 ms; the 1200 x 630 PNG within 300 ms.

    python bench/share_bench.py [--runs 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from berth_env import load_pack  # noqa: E402
from viewer.chart import berth_chart, berth_chart_svg, berth_scene  # noqa: E402
from viewer.share_card import share_png, share_svg  # noqa: E402

LARGEST = "dock-36A-w35x3-extreme-0"


def median_ms(work: Callable[[], object], runs: int) -> float:
    for _ in range(3):  # warm up
        work()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    runs = parser.parse_args().runs
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


if __name__ == "__main__":
    main()
