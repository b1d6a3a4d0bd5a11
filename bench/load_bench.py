"""Load: many visitors call `/run` at once. The old app and this one, side by side in one run.

Each app runs as its own `python app.py` (the embedded berth server, bundled tasks, a fresh rollout folder, no Hub)
on a port in 7900-7999, one after the other so they never share the CPU. Against each, floods of 32, 64 and 200
callers fire at once (testkit.load: raw HTTP to Gradio's `/gradio_api/call/run`, each caller on its own connection
with its own `X-Forwarded-For` address, which uvicorn trusts from loopback only, so each is a distinct visitor) and
`baseline:greedy` plays. Per flood: finished / refused with a message / failed / no answer within the timeout, the
p95 time to an answer (a caller without one counts the full timeout), the page (`GET /`) load time while the flood
runs, the app's peak resident memory (the process and its children, from /proc), and lost episodes: accepted ones
(they streamed an episode id) with no record in the folder once everything settled.

    python bench/load_bench.py                          # old = /work/wt-old, sizes 32, 64, 200 (a few minutes)
    python bench/load_bench.py --sizes 32 --timeout 30  # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from testkit.load import flood, p95  # noqa: E402

SETTLE_S = 60.0  # how long to wait, after a flood, for accepted episodes still running to save their records


@dataclass
class FloodResult:
    callers: int
    kinds: Counter
    p95_s: float
    refused_p95_s: float = 0.0  # how long a refused caller waited for its refusal
    page_s: list[float] = field(default_factory=list)
    page_failed: int = 0
    peak_rss_mb: float = 0.0
    lost: int = 0
    accepted: int = 0


def launch(worktree: Path, port: int, folder: Path) -> subprocess.Popen:
    env = {**os.environ, "GRADIO_SERVER_PORT": str(port), "GRADIO_SERVER_NAME": "127.0.0.1",
           "ROLLOUT_DIR": str(folder), "HF_HUB_OFFLINE": "1", "PUBLIC_ROLLOUTS": "", "TASKS_DATASET": "",
           "ROLLOUT_DATASET": "", "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONPATH": str(worktree)}
    env.pop("HF_TOKEN", None)
    with open(folder.parent / f"app-{port}.log", "wb") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen([sys.executable, "app.py"], cwd=worktree, env=env, stdout=log, stderr=log)


def wait_ready(url: str, process: subprocess.Popen, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the app at {url} exited with {process.returncode}")
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise RuntimeError(f"the app at {url} did not answer within {timeout_s:.0f} s")


def rss_mb(pid: int) -> float:
    """Resident memory of `pid` and its children, in MB."""
    pids = [pid] + [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _parent(p) == pid]
    total = 0
    for one in pids:
        try:
            for line in Path(f"/proc/{one}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def _parent(proc: Path) -> int:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


async def one_flood(url: str, pid: int, folder: Path, callers: int, timeout_s: float, first: int) -> FloodResult:
    done = asyncio.Event()
    result = FloodResult(callers, Counter(), 0.0)

    async def watch() -> None:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            while not done.is_set():
                result.peak_rss_mb = max(result.peak_rss_mb, rss_mb(pid))
                started = time.monotonic()
                try:
                    (await client.get(url)).raise_for_status()
                    result.page_s.append(time.monotonic() - started)
                except httpx.HTTPError:
                    result.page_failed += 1
                await asyncio.sleep(0.5)

    watcher = asyncio.create_task(watch())
    outcomes = await flood(url, callers, timeout_s=timeout_s, first_visitor=first)
    done.set()
    await watcher
    result.kinds = Counter(o.kind for o in outcomes)
    result.p95_s = p95([o.seconds if o.kind != "no_answer" else timeout_s for o in outcomes])
    result.refused_p95_s = p95([o.seconds for o in outcomes if o.kind == "refused"])
    accepted = [o.episode_id for o in outcomes if o.episode_id]
    result.accepted = len(accepted)
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline and any(not _saved(folder, e) for e in accepted):
        await asyncio.sleep(1)
    result.lost = sum(1 for e in accepted if not _saved(folder, e))
    return result


def _saved(folder: Path, episode_id: str) -> bool:
    return any(folder.glob(f"rollouts/*/{episode_id}.json"))


def bench_app(name: str, worktree: Path, port: int, sizes: list[int], timeout_s: float,
              scratch: Path) -> list[FloodResult]:
    folder = scratch / name / "rollouts"
    folder.mkdir(parents=True)
    process = launch(worktree, port, folder)
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_ready(url, process)
        results = []
        for number, size in enumerate(sizes):
            # Fresh visitor addresses per flood, so one flood's per-visitor counts never carry into the next.
            result = asyncio.run(one_flood(url, process.pid, folder, size, timeout_s, first=1 + 1000 * number))
            print(f"{name} {size}: {dict(result.kinds)} p95 {result.p95_s:.1f}s refused p95 "
                  f"{result.refused_p95_s:.1f}s lost {result.lost}/"
                  f"{result.accepted} rss {result.peak_rss_mb:.0f}MB", file=sys.stderr, flush=True)
            results.append(result)
        return results
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()


def table(old: list[FloodResult], new: list[FloodResult], timeout_s: float) -> str:
    def page(r: FloodResult) -> str:
        if not r.page_s:
            return f"none ({r.page_failed} failed)"
        return f"{statistics.median(r.page_s):.2f} / {max(r.page_s):.2f} s" + \
            (f" ({r.page_failed} failed)" if r.page_failed else "")

    def ratio(a: float, b: float) -> str:
        return f"{b / a:.2f}×" if a else "–"

    lines = ["| callers | app | finished | refused with a message | failed | no answer "
             f"({timeout_s:.0f} s) | p95 to an answer | p95 to a refusal | page load, median / max | peak RSS | accepted, lost |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for o, n in zip(old, new, strict=True):
        for label, r in (("old", o), ("new", n)):
            lines.append(f"| {r.callers} | {label} | {r.kinds['finished']} | {r.kinds['refused']} | "
                         f"{r.kinds['failed']} | {r.kinds['no_answer']} | {r.p95_s:.1f} s | {r.refused_p95_s:.1f} s | "
                         f"{page(r)} | "
                         f"{r.peak_rss_mb:.0f} MB | {r.accepted}, {r.lost} |")
        page_ratio = ratio(statistics.median(o.page_s), statistics.median(n.page_s)) if o.page_s and n.page_s \
            else "–"
        lines.append(f"| {o.callers} | new/old | | | | | {ratio(o.p95_s, n.p95_s)} | "
                     f"{ratio(o.refused_p95_s, n.refused_p95_s)} | {page_ratio} | "
                     f"{ratio(o.peak_rss_mb, n.peak_rss_mb)} | |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", type=Path, default=Path("/work/wt-old"), help="the old code's worktree")
    parser.add_argument("--sizes", default="32,64,200", help="callers per flood, comma-separated")
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds a caller waits for an answer")
    parser.add_argument("--port", type=int, default=7931, help="the old app's port; the new one uses the next")
    parser.add_argument("--new-only", action="store_true", help="this branch alone, no table (a quick look)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="load-bench-") as scratch:
        old = [] if args.new_only else bench_app("old", args.old, args.port, sizes, args.timeout, Path(scratch))
        new = bench_app("new", ROOT, args.port + 1, sizes, args.timeout, Path(scratch))
    if old:
        print(table(old, new, args.timeout))


if __name__ == "__main__":
    main()
