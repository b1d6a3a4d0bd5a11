"""This checkout against another one (e.g. a worktree of an older commit), side by side in one run: what a
restructuring must not make slower. Prints a Markdown table for BENCHMARKS.md.

    python bench/checkouts_bench.py --against /path/to/other/checkout [--runs 7] [--rows 300]

Each figure is a whole `python` process run from each checkout in turn (A B A B ...), so drift in the machine's
speed hits both alike; the ratio is taken pair by pair and its median reported (below 1: this checkout is faster).
The figures:
- importing the app (`import app`: every section, the chart, the share pages; what a Space pays before serving);
- the CLI's board of a folder of `--rows` realistic rollouts (`python -m agent board --json`);
- one baseline episode played and saved by the CLI on the embedded server (`python -m agent run`);
- the app built and served in process on the same folder (its context, every section, the share routes), one
  share page `/r/<id>` fetched over its ASGI interface, and the leaderboard's lines.
The folder is written once, with this checkout's testkit, and read by both.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Run inside each checkout: the share page of the first rollout and Browse's board, in process. Each checkout
# names its modules its own way, so the script finds them by trying both layouts.
IN_PROCESS = """
import sys
from pathlib import Path
from fastapi.testclient import TestClient
from app import build_app, serve
from rollouts.filters import Filters
from viewer.context import AppContext, Settings
root = Path(sys.argv[1])
ctx = AppContext.create(Settings.from_env())
episode = sorted(root.glob("rollouts/*/*.json"))[0].stem
with TestClient(serve(build_app(ctx), ctx)) as client:
    page = client.get(f"/r/{episode}")
    assert page.status_code == 200 and len(page.text) > 1000, page.status_code
assert ctx.archive.board(Filters())
"""


def write_folder(root: Path, rows: int) -> None:
    from rollouts.store import RolloutStore
    from testkit.records import make_records

    store = RolloutStore(root)
    for record in make_records(rows):
        store.save(record)


def commands(folder: Path, out: Path) -> dict[str, list[str]]:
    return {
        "import app": [sys.executable, "-c", "import app"],
        "CLI board of the folder": [sys.executable, "-m", "agent", "board", "--dir", str(folder), "--json"],
        "CLI: one baseline episode": [sys.executable, "-m", "agent", "run", "--model", "baseline:greedy", "--task",
                                      "dock-24B-w06x1-busy-0", "--out", str(out), "--force"],
        "app built, a share page and the board": [sys.executable, "-c", IN_PROCESS, str(folder)],
    }


def timed(command: list[str], cwd: Path, folder: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(cwd), "ROLLOUT_DIR": str(folder), "HF_HUB_OFFLINE": "1"}
    env.pop("HF_TOKEN", None)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])} failed in {cwd}:\n{done.stderr[-2000:]}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", type=Path, required=True, help="the other checkout (B)")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--rows", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "rollouts"
        write_folder(folder, args.rows)
        print(f"| figure (median of {args.runs} pairs) | this checkout, s | other, s | ratio |")
        print("|---|---:|---:|---:|")
        for name, command in commands(folder, Path(tmp) / "played").items():
            timed(command, ROOT, folder), timed(command, args.against, folder)  # warm the caches and bytecode
            pairs = [(timed(command, ROOT, folder), timed(command, args.against, folder)) for _ in range(args.runs)]
            mine, theirs = (statistics.median(p[i] for p in pairs) for i in (0, 1))
            ratio = statistics.median(a / b for a, b in pairs)
            print(f"| {name} | {mine:.2f} | {theirs:.2f} | {ratio:.2f} |", flush=True)


if __name__ == "__main__":
    main()
