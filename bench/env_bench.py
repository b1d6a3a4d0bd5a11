"""How much of a berth-server round trip is grading? Prints a small markdown table.

1. In process: grading (and checking) the reference optimum of the largest task (59 ships).
2. Over the WebSocket, with OpenEnv's MCPToolClient: `check_plan` round trips at 1 and 32 concurrent sessions,
   each against a bare `echo` tool that takes the same plan argument and does nothing with it, on the same server.

The server runs in a child process (so client and server do not share one interpreter lock) with a bench-only
environment: the production one plus `echo`, and limits raised so a session can check as often as it likes.
Targets: grading the largest plan under 2 ms; the grader under 25% of a round trip.

    python bench/env_bench.py            # about a minute on 2 cores
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from berth_env import evaluate, grade, load_pack  # noqa: E402
from berth_env.server import BerthEnvironment, PlanArgument, create_berth_app  # noqa: E402

GRADE_TARGET_MS = 2.0
SHARE_TARGET = 0.25
SINGLE_CALLS = 200
CONCURRENT_SESSIONS = 32
CONCURRENT_CALLS = 40  # per session and per tool


class BenchEnvironment(BerthEnvironment):
    """The production environment plus an `echo` tool, with no practical check or call limit. Bench use only."""

    def __init__(self) -> None:
        super().__init__()
        self.max_checks = self.max_tool_calls = 10**9

        @self.mcp_server.tool
        def echo(plan: PlanArgument) -> str:
            """Validate the plan argument like check_plan does, then return at once."""
            return "ok"


def largest_task() -> dict:
    return max(load_pack().tasks, key=lambda task: len(task["ships"]))


def timed_ms(fn, repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


# ---------------------------------------------------------------------------------------------- the server


def serve(port: int) -> None:
    import uvicorn

    uvicorn.run(create_berth_app(BenchEnvironment), host="127.0.0.1", port=port, log_level="error")


def start_child_server() -> tuple[subprocess.Popen, str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    child = subprocess.Popen([sys.executable, __file__, "--serve", str(port)], cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        if child.poll() is not None:
            raise RuntimeError("the bench server exited while starting")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return child, url
        except OSError:
            if time.monotonic() > deadline:
                child.kill()
                raise RuntimeError("the bench server did not start") from None
            time.sleep(0.1)


# ------------------------------------------------------------------------------------------------ clients


async def session_latencies(url: str, task: dict, calls: int, ready: asyncio.Barrier | None = None
                            ) -> dict[str, list[float]]:
    """One session: reset, then `calls` check_plan and `calls` echo round trips, interleaved in blocks of 10."""
    from openenv.core.env_server.mcp_types import CallToolAction
    from openenv.core.mcp_client import MCPToolClient

    plan = task["reference"]["optimal_plan"]
    samples: dict[str, list[float]] = {"check_plan": [], "echo": []}
    async with MCPToolClient(url, message_timeout_s=120) as client:
        await client.reset(task_id=task["task_id"])
        for tool in ("check_plan", "echo"):  # warm-up, not timed
            await client.step(CallToolAction(tool_name=tool, arguments={"plan": plan}))
        if ready is not None:
            await ready.wait()  # every session is connected and warm before any is timed
        for block in range(0, calls, 10):
            for tool in ("check_plan", "echo"):
                for _ in range(min(10, calls - block)):
                    began = time.perf_counter()
                    step = await client.step(CallToolAction(tool_name=tool, arguments={"plan": plan}))
                    samples[tool].append((time.perf_counter() - began) * 1000)
                    if step.observation.error is not None:
                        raise RuntimeError(f"{tool} failed: {step.observation.error.message}")
    return samples


async def concurrent_latencies(url: str, task: dict, sessions: int, calls: int) -> dict[str, list[float]]:
    ready = asyncio.Barrier(sessions)
    runs = [session_latencies(url, task, calls, ready) for _ in range(sessions)]
    merged: dict[str, list[float]] = {"check_plan": [], "echo": []}
    for result in await asyncio.gather(*runs):
        for tool, values in result.items():
            merged[tool] += values
    return merged


# ------------------------------------------------------------------------------------------------- report


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def main() -> None:
    task = largest_task()
    plan = task["reference"]["optimal_plan"]
    assert grade(task, plan)["reward"] == 1.0
    timed_ms(lambda: grade(task, plan), 20)
    grade_ms = statistics.median(timed_ms(lambda: grade(task, plan), 300))
    check_ms = statistics.median(timed_ms(lambda: evaluate(task, plan), 300))

    child, url = start_child_server()
    try:
        single = asyncio.run(session_latencies(url, task, SINGLE_CALLS))
        many = asyncio.run(concurrent_latencies(url, task, CONCURRENT_SESSIONS, CONCURRENT_CALLS))
    finally:
        child.terminate()
        child.wait(timeout=15)

    print(f"Berth server bench: task {task['task_id']} ({len(task['ships'])} ships), reference optimum; "
          f"{os.cpu_count()} CPUs; server in a child process.\n")
    print("| measure | median ms | p90 ms | vs echo | target |")
    print("|---|---:|---:|---:|---|")
    print(f"| grade() in process | {grade_ms:.3f} | | | < {GRADE_TARGET_MS:g} ms |")
    print(f"| evaluate() (check_plan body) in process | {check_ms:.3f} | | | |")
    for label, samples in ((f"1 session ({SINGLE_CALLS} calls each)", single),
                           (f"{CONCURRENT_SESSIONS} sessions ({CONCURRENT_SESSIONS * CONCURRENT_CALLS} calls each)",
                            many)):
        echo, check = samples["echo"], samples["check_plan"]
        ratio = statistics.median(check) / statistics.median(echo)
        print(f"| echo round trip, {label} | {statistics.median(echo):.2f} | {p90(echo):.2f} | 1.00 | |")
        print(f"| check_plan round trip, {label} | {statistics.median(check):.2f} | {p90(check):.2f} | "
              f"{ratio:.2f} | |")
    share = max(grade_ms, check_ms) / statistics.median(single["check_plan"])
    print(f"| grading's share of a 1-session check_plan round trip | {share:.0%} | | | < {SHARE_TARGET:.0%} |")
    verdict = "met" if grade_ms < GRADE_TARGET_MS and share < SHARE_TARGET else "NOT met"
    print(f"\nTargets {verdict}.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
    else:
        main()
