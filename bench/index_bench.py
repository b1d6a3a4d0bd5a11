"""Browse's index at the sizes most folders have: N rows in 120 index files (two writers a day for 60 days), as JSONL
(not compacted yet) or as Parquet, this checkout against another (`--baseline`), each engine in a fresh process (its
own peak memory), the rounds interleaved so a busy machine slows both alike.

    python bench/index_bench.py --baseline /work/wt-base [--rows 20000] [--rounds 3] [--busy 2]

Each worker is bench/million_bench.py's: the first page from an empty index (rows, choices, count), a filter's first
page sorted by reward (median and worst of six filter sets), searches, the leaderboard, peak RSS. `--busy K` starts
K busy loops for the whole run, to measure on a machine whose cores are taken.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
from pathlib import Path

from million_bench import in_process
from workers import ms

ROOT = Path(__file__).resolve().parent.parent
FIGURES = [("first_page", "first page"), ("filter_median", "filter (median)"), ("filter_max", "filter (worst)"),
           ("search_median", "search"), ("board_all", "leaderboard"), ("rss_end_mb", "peak RSS")]


def generate(root: Path, rows: int) -> None:
    sys.path[:0] = [str(ROOT)]
    from testkit.index_rows import index_table, write_index_folder

    table = index_table(rows)
    for fmt in ("jsonl", "parquet"):
        written = write_index_folder(root / fmt, table, fmt=fmt)
        print(f"- {fmt}: {len(written)} files", file=sys.stderr, flush=True)


def spin() -> None:
    while True:
        pass


def cell(results: list[dict], key: str) -> str:
    failed = [r for r in results if key not in r]
    if failed:
        r = failed[0]
        return "failed" if key != "first_page" else f"failed: {r.get('failed', 'timeout')}"[:90]
    values = [r[key] for r in results]
    median = statistics.median(values)
    return f"{median:,.0f} MB" if key.endswith("_mb") else ms(median)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="the other checkout")
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--busy", type=int, default=0, help="busy loops taking cores meanwhile")
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    loops = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.busy)]
    for loop in loops:
        loop.start()
    with tempfile.TemporaryDirectory(prefix="index-bench-") as work:
        generate(Path(work), args.rows)
        results: dict[tuple[str, str], list[dict]] = {}
        codes = {"before": args.baseline, "this checkout": ROOT}
        for _ in range(args.rounds):
            for fmt in ("jsonl", "parquet"):
                for name, code in codes.items():
                    result = in_process(Path(work) / fmt, code, args.timeout)
                    results.setdefault((fmt, name), []).append(result)
                    print(f"  {fmt} {name}: {result.get('filter_median', result)}", file=sys.stderr, flush=True)
    for loop in loops:
        loop.terminate()
    print(f"| files ({args.rows:,} rows) | code | " + " | ".join(label for _, label in FIGURES) + " |")
    print("|---|---|" + "---:|" * len(FIGURES))
    for (fmt, name), found in results.items():
        print(f"| 120 {fmt} | {name} | " + " | ".join(cell(found, key) for key, _ in FIGURES) + " |")
    print(f"\n{args.rounds} rounds, medians; {args.busy} busy loop(s); load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
