"""Time the grader in-process on the largest eval task (59 ships): grade, check_plan reply, and their parts.

Target: grading the reference optimum of the largest task well under 2 ms (median over many runs).

    python bench/grade_bench.py [--runs 2000]
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

from berth_env import check, evaluate, grade, load_pack, parse_plan, unavoidable_cost  # noqa: E402

TARGET_MS = 2.0


def median_ms(work: Callable[[], object], runs: int) -> float:
    for _ in range(min(50, runs)):  # warm up
        work()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    runs = parser.parse_args().runs

    pack = load_pack()
    task = max(pack.tasks, key=lambda t: (len(t["ships"]), t["task_id"]))
    plan = task["reference"]["optimal_plan"]
    entries = parse_plan(task, plan).entries
    rows = [
        ("grade(optimal plan)", lambda: grade(task, plan)),
        ("evaluate(optimal plan)", lambda: evaluate(task, plan)),
        ("parse_plan", lambda: parse_plan(task, plan)),
        ("check", lambda: check(task, entries)),
        ("unavoidable_cost", lambda: unavoidable_cost(task)),
    ]
    print(f"task {task['task_id']} ({len(task['ships'])} ships), median of {runs} runs\n")
    print("| what | median ms |\n|---|---:|")
    results = {name: median_ms(work, runs) for name, work in rows}
    for name, ms in results.items():
        print(f"| {name} | {ms:.3f} |")
    graded = results["grade(optimal plan)"]
    verdict = "within" if graded < TARGET_MS else "OVER"
    print(f"\ngrade: {graded:.3f} ms, {verdict} the {TARGET_MS} ms target")
    return 0 if graded < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
