"""Browse at a million rollouts: the DuckDB index (rollouts.archive today) against the pandas index it replaced.

    python bench/browse_bench.py --rows 1000000 --pandas-rows 1000000 --baseline /work/wt-base

Writes `--rows` index rows (testkit/index_rows.py: the flat rows of 2,000 records from testkit/records.py, cloned
under new ids, start times over 60 days and rotated models) as `index/<day>/<writer>.parquet`, two writers a day,
and the same rows as one JSONL file a day for the pandas index (which reads JSONL only). Each engine runs in a
fresh Python process (its own peak memory): the DuckDB one with this checkout, the pandas one with the checkout
at `--baseline` (the code before the DuckDB index) on its PYTHONPATH. Each measures what Browse does:

- first page: from an empty index to the list view's answer (the rows of page 1, the filter choices, the count),
- the copy: the DuckDB index copies a large source's Parquet rows into its own database file in the background
  (rollouts/index/copies.py); the worker times one filter while that runs, then waits for the copy, then times the
  rest, so the figures below are the ones a visitor gets from a few seconds after the first page on,
- filter: a filter set's first page sorted by reward (median and worst of the filter sets),
- search: the search box's first page (median and worst of a few searches),
- leaderboard: the board over every row, then over a filter (not remembered: each is its first time),
- RSS: the process's peak resident memory (VmHWM) after the first page, and at the end.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

from archives import filters, open_archive, rows_of
from workers import ms, worker_result

ROOT = Path(__file__).resolve().parent.parent
FILTERS = [
    {"tier": "storm"},
    {"model": "anthropic:claude-sonnet-5-5@high,openai:gpt-5.5@medium"},
    {"tier": "busy,extreme", "feasible": "yes"},
    {"reward_min": 0.5, "submitted": "yes"},
    {"date_from": "2026-10-20", "date_to": "2026-10-27"},
    {"quay": "24B", "reward_max": 0.3},
]
SEARCHES = ["sonnet", "0000001", "storm run-a", "gpt busy"]


def generate(root: Path, rows: int, *, jsonl: bool) -> dict:
    """The Parquet folder under root/parquet, and (if asked) the same rows as JSONL under root/jsonl."""
    import duckdb

    from testkit.index_rows import index_table, write_index_folder

    start = time.perf_counter()
    table = index_table(rows)
    files = write_index_folder(root / "parquet", table)
    made = {"rows": rows, "parquet_files": len(files), "seconds": time.perf_counter() - start,
            "parquet_mb": sum(f.stat().st_size for f in files) / 2**20}
    if jsonl:
        con = duckdb.connect()
        for day in sorted((root / "parquet" / "index").iterdir()):
            target = root / "jsonl" / "index" / day.name / "bench.jsonl"
            target.parent.mkdir(parents=True, exist_ok=True)
            con.execute(f"COPY (SELECT * FROM read_parquet('{day}/*.parquet')) TO '{target}' (FORMAT json)")
        made["jsonl_mb"] = sum(f.stat().st_size for f in (root / "jsonl").rglob("*.jsonl")) / 2**20
    return made


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def worker(folder: Path) -> dict:
    """One engine over one folder, in this process (whichever `rollouts` is first on the path)."""
    import pandas  # noqa: F401  (the app has its imports loaded before anyone asks for a page)
    from archives import archive_class

    archive_class()
    baseline = peak_rss_mb()
    load = os.getloadavg()[0]  # the machine is shared: figures are comparable only at similar load
    start = time.perf_counter()
    index = open_archive(folder)
    index.refresh_local(force=True)
    rows, matched, _, _ = index.query(filters())
    if hasattr(index, "options"):  # the DuckDB index answers these itself; the pandas one from its frame
        choices, total = index.options(), index.total()
    else:
        from rollouts.query import options

        choices, total = options(index.frame), len(index.frame)
    out = {"first_page": time.perf_counter() - start, "rows": total, "rss_first_page_mb": peak_rss_mb(),
           "baseline_rss_mb": baseline}
    assert rows_of(rows) == 50 and matched == total and len(choices.get("model", choices.get("models"))) > 1
    engine = getattr(index, "engine", None)
    if hasattr(engine, "wait_copied"):  # the DuckDB index copies large Parquet sources in the background
        out["filter_while_copying"] = timed(lambda: index.query(filters(**FILTERS[0]), sort="reward"))
        engine.wait_copied()
        out["copy_ready"] = time.perf_counter() - start
        out["copied"] = engine.copied("local")
    times = [timed(lambda v=v: index.query(filters(**v), sort="reward")) for v in FILTERS]
    searches = [timed(lambda t=t: index.query(filters(q=t))) for t in SEARCHES]
    out.update(filter_median=statistics.median(times), filter_max=max(times),
               search_median=statistics.median(searches), search_max=max(searches))
    out["board_all"] = timed(lambda: index.board(filters()))
    out["board_filtered"] = timed(lambda: index.board(filters(tier="storm")))
    out["rss_end_mb"] = peak_rss_mb()
    out["load"] = (load, os.getloadavg()[0])
    return out


def in_process(folder: Path, code_root: Path, timeout: float) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code_root)}
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", str(folder), "--code-root", str(code_root)]
    return worker_result(command, timeout, cwd=code_root, env=env)


def line(rows: int, engine: str, r: dict) -> str:
    if "timeout" in r or "failed" in r:
        why = f"not finished in {r['timeout']:.0f} s" if "timeout" in r else f"failed: {r['failed']}"
        return f"| {rows:,} | {engine} | {why} | | | | | | | |"
    load = f"{r['load'][0]:.1f} / {r['load'][1]:.1f}" if "load" in r else "–"
    copy = (f"{r['copy_ready']:.1f} s (a filter meanwhile: {ms(r['filter_while_copying'])})"
            if r.get("copied") else "–")
    return (f"| {rows:,} | {engine} | {ms(r['first_page'])} | {ms(r['filter_median'])} (max {ms(r['filter_max'])}) "
            f"| {ms(r['search_median'])} (max {ms(r['search_max'])}) | {ms(r['board_all'])} / "
            f"{ms(r['board_filtered'])} | {r['rss_first_page_mb']:,.0f} MB | {r['rss_end_mb']:,.0f} MB | {copy} | {load} |")


def ratio(a: dict, b: dict, key: str) -> str:
    return f"{b[key] / a[key]:.1f}x" if key in a and key in b and a[key] else "–"


def run(rows: int, pandas_rows: int, baseline: Path, keep: Path | None, timeout: float) -> None:
    import shutil
    import tempfile

    sys.path[:0] = [str(ROOT)]
    work = Path(tempfile.mkdtemp(prefix="million-bench-", dir=keep))
    try:
        made = generate(work / "big", rows, jsonl=pandas_rows == rows)
        print(f"- {rows:,} rows: {made['parquet_files']} Parquet files, {made['parquet_mb']:.0f} MiB "
              f"(written in {made['seconds']:.0f} s)", file=sys.stderr, flush=True)
        sql = in_process(work / "big" / "parquet", ROOT, timeout)
        print(line(rows, "DuckDB (this checkout)", sql), file=sys.stderr, flush=True)
        if pandas_rows != rows:
            generate(work / "small", pandas_rows, jsonl=True)
            small_sql = in_process(work / "small" / "parquet", ROOT, timeout)
        folder = work / ("big" if pandas_rows == rows else "small") / "jsonl"
        pandas = in_process(folder, baseline, timeout)
        print(line(pandas_rows, "pandas (baseline)", pandas), file=sys.stderr, flush=True)
        table = ["| rows | engine | first page | filter: page | search: page | leaderboard: all / filtered | "
                 "RSS after first page | RSS at end | queries from the copy after | load (start / end) |",
                 "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
                 line(rows, "DuckDB (rollouts.archive)", sql)]
        if pandas_rows != rows:
            table.append(line(pandas_rows, "DuckDB (rollouts.archive)", small_sql))
        table.append(line(pandas_rows, f"pandas ({baseline.name})", pandas))
        print("\n".join(table))
        same = sql if pandas_rows == rows else small_sql
        print(f"\npandas / DuckDB at {pandas_rows:,} rows: first page {ratio(same, pandas, 'first_page')}, "
              f"filter {ratio(same, pandas, 'filter_median')}, search {ratio(same, pandas, 'search_median')}, "
              f"leaderboard {ratio(same, pandas, 'board_all')}, RSS {ratio(same, pandas, 'rss_end_mb')}")
        print(f"- machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)


def worker_main(argv: list[str]) -> None:
    folder, code_root = Path(argv[argv.index("--worker") + 1]), Path(argv[argv.index("--code-root") + 1])
    sys.path[:0] = [str(code_root)]
    print(json.dumps(worker(folder)))


if __name__ == "__main__":
    worker_main(sys.argv)
