"""Arena ratings at scale: the cells query over a million index rows in DuckDB, then the Bradley–Terry fit with
its 100 bootstrap refits (rollouts.ratings). Prints a Markdown table for BENCHMARKS.md.

    python bench/ratings_bench.py [--rows 1000000] [--tasks 1100] [--models 12] [--repeat 7]
    python bench/ratings_bench.py --archive [--rows 1000000] [--repeat 7]

`--archive` times the leaderboard's `arena` column as Browse computes it: `Archive.ratings` over a rollout folder
of `--rows` realistic index rows (testkit/index_rows.py, as bench/million_bench.py lays them out), each time
afresh (not remembered), beside `Archive.board` over the same rows, over every row and over one tier.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rollouts.ratings import ANCHOR, fetch_cells, ratings


def timed(work, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000, result


def archive_bench(rows: int, repeat: int) -> None:
    import tempfile

    from rollouts.archive import Archive
    from rollouts.filters import Filters
    from testkit.index_rows import index_table, write_index_folder

    with tempfile.TemporaryDirectory() as folder:
        write_index_folder(Path(folder), index_table(rows))
        archive = Archive.from_settings(folder)
        archive.refresh_local(force=True)
        archive.engine.wait_copied()

        def afresh(work):
            def run():
                archive._answers.clear()  # each time its first time, as after new rows arrive
                return work()
            return run

        print(f"| over {rows:,} index rows (median of {repeat}, each not remembered) | every row | tier storm |")
        print("|---|---:|---:|")
        for name, work in (("`Archive.board` (the board as it was)", archive.board),
                           ("`Archive.ratings` (the arena column: cells query, fit, 100 refits)", archive.ratings)):
            every, _ = timed(afresh(lambda w=work: w(Filters())), repeat)
            storm, _ = timed(afresh(lambda w=work: w(Filters.parse(tier="storm"))), repeat)
            print(f"| {name} | {every:.0f} ms | {storm:.0f} ms |")
        lines = archive.ratings(Filters())
        print(f"\n{len(lines)} models, {sum(line.rating is not None for line in lines)} rated")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--tasks", type=int, default=1100)
    parser.add_argument("--models", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--archive", action="store_true", help="time Archive.ratings beside Archive.board")
    args = parser.parse_args()
    if args.archive:
        archive_bench(args.rows, args.repeat)
        return
    con = duckdb.connect(config={"threads": 2, "memory_limit": "256MB"})
    con.execute(f"""CREATE TABLE rollouts AS SELECT 'dock-' || (i % {args.tasks}) AS task_id,
        CASE WHEN (i // {args.tasks}) % {args.models} = 0 THEN '{ANCHOR}'
             ELSE 'model-' || ((i // {args.tasks}) % {args.models}) END AS model,
        (hash(i) % 1000) / 1000.0 + 0.01 * ((i // {args.tasks}) % {args.models}) AS reward
        FROM range({args.rows}) t(i)""")
    fetch_cells(con)  # warm-up
    sql_ms, cells = timed(lambda: fetch_cells(con), args.repeat)
    fit_ms, lines = timed(lambda: ratings(cells), args.repeat)
    battles = sum(line.battles for line in lines) // 2
    print(f"| measure ({args.rows:,} rows, {args.tasks:,} tasks x {args.models} models, {battles:,} battles) "
          "| median of " f"{args.repeat} |")
    print("|---|---:|")
    print(f"| cells: `cells_sql` in DuckDB (2 threads) to Arrow | {sql_ms:.1f} ms |")
    print(f"| `ratings`: battles, fit and 100 bootstrap refits | {fit_ms:.1f} ms |")
    print(f"| total | **{sql_ms + fit_ms:.1f} ms** (target < 500 ms) |")


if __name__ == "__main__":
    main()
