"""Time a step's address (issue 30.5): its page and its image over HTTP, and the per-ship gap.

    python bench/step_bench.py [--rollouts 12] [--runs 40]

- The per-ship gap (berth_env.gap.split_gap) of every reference plan in the pack (the naive and the optimal plan
  of each task, the largest task included): median and worst ms per plan. Target: within 5 ms per plan.
- The launched app (testkit/app.py: the app as `python app.py` builds it, served by uvicorn in this process) over
  `--rollouts` baseline rollouts played on the embedded berth server, read with a plain HTTP client on one kept-alive
  connection: `GET /r/<id>/step/2` first render (each rollout's step once, nothing kept), then warm (`--runs`
  requests, the page kept); `GET /r/<id>/step/2.png` cold (first render) and warm. Targets: the page's median under
  150 ms warm; its image within 1 s cold.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from berth_env import load_pack  # noqa: E402
from berth_env.embedded import embedded_url  # noqa: E402
from berth_env.gap import split_gap  # noqa: E402
from testkit.app import launched_app  # noqa: E402
from testkit.episodes import play  # noqa: E402


def gap_times() -> tuple[float, float, int]:
    """(median ms, worst ms, plans) of split_gap over every reference plan in the pack."""
    times = []
    for task in load_pack().tasks:
        for name in ("naive_plan", "optimal_plan"):
            plan = task["reference"][name]
            split_gap(task, plan)  # warm
            started = time.perf_counter()
            split_gap(task, plan)
            times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), max(times), len(times)


def timed(client: httpx.Client, url: str) -> float:
    started = time.perf_counter()
    answer = client.get(url)
    spent = (time.perf_counter() - started) * 1000
    assert answer.status_code == 200, (url, answer.status_code)
    return spent


def served(rollouts: int, runs: int) -> dict[str, float]:
    tasks = [t["task_id"] for t in load_pack().tasks]
    records = []
    for n in range(rollouts):
        _, record = play("baseline:hasty", embedded_url(), task_id=tasks[n % len(tasks)])
        if len(record["steps"]) >= 2:
            records.append(record)
    with tempfile.TemporaryDirectory() as folder, launched_app(Path(folder), records=records) as app, \
            httpx.Client(timeout=60) as client:
        ids = [r["episode_id"] for r in records]
        first = [timed(client, f"{app.url}r/{i}/step/2") for i in ids]
        warm = [timed(client, f"{app.url}r/{ids[n % len(ids)]}/step/2") for n in range(runs)]
        cold_png = [timed(client, f"{app.url}r/{i}/step/2.png") for i in ids]
        warm_png = [timed(client, f"{app.url}r/{ids[n % len(ids)]}/step/2.png") for n in range(runs)]
    return {"rollouts": len(ids), "page first p50": statistics.median(first), "page first max": max(first),
            "page warm p50": statistics.median(warm), "png cold p50": statistics.median(cold_png),
            "png cold max": max(cold_png), "png warm p50": statistics.median(warm_png)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rollouts", type=int, default=12)
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    median, worst, plans = gap_times()
    print(f"per-ship gap: {plans} reference plans, median {median:.2f} ms, worst {worst:.2f} ms (target 5 ms)")
    for name, value in served(args.rollouts, args.runs).items():
        print(f"{name:>16}: {value:.1f}" + ("" if name == "rollouts" else " ms"))


if __name__ == "__main__":
    main()
