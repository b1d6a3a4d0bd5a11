"""Browse at scale: the index approach (rollouts.archive) against loading every record with `datasets`.

    python bench/browse_bench.py                       # 10k and 100k rollouts (several minutes, ~4.5 GB of temp files)
    python bench/browse_bench.py --sizes 10000 --naive-timeout 120
    python bench/browse_bench.py --rows 1000000        # a million index rows: DuckDB against pandas (million_bench.py)

For each size it writes a synthetic rollout dataset in the store's layout under a temp dir (records from
testkit/records.py: 2,000 distinct episodes, cloned under new ids, dates and models; index rows from
rollouts.schema.index_row, written directly rather than through the store's fsyncs), then measures, each approach in a
fresh Python process so peak memory is its own:

- index: `Archive` over the folder: first table page and first leaderboard (cold start, index files only),
  a filter change (table page, then leaderboard; median and worst of 6 filter sets), a new rollout appearing
  (one appended index line, then a refresh), and peak RSS.
- naive: `datasets.load_dataset(folder, "rollouts")` (every record, as the dataset card declares them, Arrow cache
  built from cold), index rows computed from the records, then the same pandas filtering and leaderboard; a run
  past `--naive-timeout` seconds is stopped and reported as such.

Prints a Markdown table (paste into BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from workers import ms, worker_result  # noqa: E402

TEMPLATES = 2000
DAYS = 60
FILTER_SETS = [
    {"tier": "storm"},
    {"model": "anthropic:claude-sonnet-5-5@high,openai:gpt-5.5@medium"},
    {"tier": "busy,extreme", "feasible": "yes"},
    {"reward_min": 0.5, "submitted": "yes"},
    {"date_from": "2026-10-20", "date_to": "2026-10-27"},
    {"task": "dock-24B-w06x1-busy-0,dock-36A-w17x1-standard-0", "quay": "24B"},
]


# -- the dataset -----------------------------------------------------------------------------------------------


def generate(root: Path, n: int, seed: int = 0) -> dict:
    """n rollouts in the dataset layout: records, index rows (one index file per day) and the dataset card."""
    from rollouts import card as dataset_card
    from rollouts.schema import index_row
    from testkit.records import MODELS, make_records

    start = time.perf_counter()
    rng = random.Random(seed)
    templates = make_records(min(TEMPLATES, n), seed=seed)
    texts = [json.dumps(t, ensure_ascii=False) for t in templates]
    index: dict[str, list[str]] = {}
    record_bytes = 0
    made_dirs: set[str] = set()
    for i in range(n):
        k = i % len(templates)
        template, text = templates[k], texts[k]
        episode_id = f"{seed:02x}{i:010x}"
        day = f"2026-10-{1 + i % 31:02d}" if i % DAYS < 31 else f"2026-11-{1 + (i % DAYS) - 31:02d}"
        started = f"{day}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:00Z"
        model = MODELS[(k + i // len(templates)) % len(MODELS)]
        record = {**template, "episode_id": episode_id, "started": started, "model": model}
        body = (text.replace(f'"episode_id": "{template["episode_id"]}"', f'"episode_id": "{episode_id}"', 1)
                .replace(f'"started": "{template["started"]}"', f'"started": "{started}"', 1)
                .replace(f'"model": "{template["model"]}"', f'"model": {json.dumps(model)}', 1))
        rel = f"rollouts/{day}/{episode_id}.json"
        if day not in made_dirs:
            (root / "rollouts" / day).mkdir(parents=True, exist_ok=True)
            made_dirs.add(day)
        data = body.encode()
        (root / rel).write_bytes(data)
        record_bytes += len(data)
        index.setdefault(day, []).append(json.dumps(index_row(record, rel), ensure_ascii=False))
    index_bytes = 0
    for day, lines in index.items():
        folder = root / "index" / day
        folder.mkdir(parents=True, exist_ok=True)
        data = ("\n".join(lines) + "\n").encode()
        (folder / "bench.jsonl").write_bytes(data)
        index_bytes += len(data)
    (root / "README.md").write_text(dataset_card.render(), encoding="utf-8")
    return {"seconds": time.perf_counter() - start, "record_bytes": record_bytes, "index_bytes": index_bytes,
            "index_files": len(index)}


# -- the two approaches (each in its own process) --------------------------------------------------------------


def peak_rss_mb() -> float:
    """This process's peak resident memory. VmHWM, not ru_maxrss: the latter carries over the parent's peak across
    fork and exec, so a worker started by a big parent would report the parent's size."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def filter_changes(table_fn, board_fn) -> dict:
    tables, boards = [], []
    for values in FILTER_SETS:
        start = time.perf_counter()
        table_fn(values)
        middle = time.perf_counter()
        board_fn(values)
        tables.append(middle - start)
        boards.append(time.perf_counter() - middle)
    return {"filter_table_median": statistics.median(tables), "filter_table_max": max(tables),
            "filter_board_median": statistics.median(boards), "filter_board_max": max(boards)}


def run_index(root: Path) -> dict:
    import pandas  # noqa: F401  (imports are not part of the first view: the app has them loaded already)
    from archives import filters, open_archive, rows_of

    from rollouts.layout import record_rel_for

    baseline = peak_rss_mb()
    start = time.perf_counter()
    index = open_archive(root)
    rows, matched, _, _ = index.query(filters())
    first_table = time.perf_counter() - start
    board = index.board(filters())
    first_board = time.perf_counter() - start
    assert matched == index.total() and rows_of(rows) == 50 and len(board) > 1
    out = {"first_table": first_table, "first_board": first_board, "rows": matched}
    out.update(filter_changes(lambda v: index.query(filters(**v), sort="reward"),
                              lambda v: index.board(filters(**v))))
    # A rollout saved by the app: one more line in an index file, picked up by the next refresh.
    day_file = sorted(root.glob("index/*/*.jsonl"))[-1]
    row = json.loads(day_file.read_text().splitlines()[-1])
    # Its own id, and the record path that goes with it: readers refuse a row whose path names another episode.
    row |= {"episode_id": "fresh_rollout", "path": record_rel_for("fresh_rollout", row["path"].split("/")[1])}
    with open(day_file, "a") as f:
        f.write(json.dumps(row) + "\n")
    start = time.perf_counter()
    index.refresh_local(force=True)
    rows, total, _, _ = index.query(filters(q="fresh_rollout"))
    out["new_rollout"] = time.perf_counter() - start
    assert total == 1
    out["baseline_rss_mb"] = baseline
    out["peak_rss_mb"] = peak_rss_mb()
    return out


def run_naive(root: Path, cache: Path) -> dict:
    """Every record loaded with `datasets`, its index rows computed, then filtered and ranked by the index engine
    over that table (so the figures differ from the index approach only in how the rows were had)."""
    import datasets
    import pyarrow as pa

    from rollouts.archive import Archive
    from rollouts.filters import Filters
    from rollouts.index.format import INDEX_SCHEMA
    from rollouts.schema import index_row
    from rollouts.sources.local import LocalSource

    datasets.disable_progress_bars()
    baseline = peak_rss_mb()
    start = time.perf_counter()
    dataset = datasets.load_dataset(str(root), "rollouts", split="train", cache_dir=str(cache))
    loaded = time.perf_counter() - start
    rows = []
    for record in dataset:
        if not isinstance(record["started"], str):
            record["started"] = record["started"].strftime("%Y-%m-%dT%H:%M:%SZ")
        rows.append(index_row(record, f"rollouts/{record['started'][:10]}/{record['episode_id']}.json"))
    archive = Archive(LocalSource(cache / "no-folder"))
    archive.engine.set_table("local", pa.Table.from_pylist(rows, schema=INDEX_SCHEMA))
    first_page, total, _, _ = archive.query(Filters())
    assert first_page.num_rows == min(50, total)
    first_table = time.perf_counter() - start
    archive.board(Filters())
    first_board = time.perf_counter() - start
    out = {"load_dataset": loaded, "first_table": first_table, "first_board": first_board, "rows": total}
    out.update(filter_changes(lambda v: archive.query(Filters.parse(**v), sort="reward"),
                              lambda v: archive.board(Filters.parse(**v))))
    out["baseline_rss_mb"] = baseline
    out["peak_rss_mb"] = peak_rss_mb()
    return out


def in_process(kind: str, root: Path, cache: Path, timeout: float) -> dict:
    command = [sys.executable, __file__, "--worker", kind, "--dir", str(root), "--cache", str(cache)]
    return worker_result(command, timeout, cwd=ROOT)


# -- the report ------------------------------------------------------------------------------------------------


def row(size: int, approach: str, result: dict) -> str:
    if "timeout" in result:
        return f"| {size:,} | {approach} | not finished in {result['timeout']:.0f} s | | | | | |"
    if "failed" in result:
        return f"| {size:,} | {approach} | failed: {result['failed']} | | | | | |"
    change = (f"{ms(result['filter_table_median'])} (max {ms(result['filter_table_max'])})",
              f"{ms(result['filter_board_median'])} (max {ms(result['filter_board_max'])})")
    return (f"| {size:,} | {approach} | {ms(result['first_table'])} | {ms(result['first_board'])} | {change[0]} | "
            f"{change[1]} | {ms(result.get('new_rollout'))} | {result['peak_rss_mb']:,.0f} MB "
            f"(baseline {result['baseline_rss_mb']:,.0f}) |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--naive-timeout", type=float, default=240.0,
                        help="seconds the datasets approach may take per size before it is stopped")
    parser.add_argument("--keep", type=Path, help="write the datasets here and keep them")
    parser.add_argument("--rows", type=int, help="index rows only, DuckDB against pandas (bench/million_bench.py)")
    parser.add_argument("--pandas-rows", type=int, help="rows for the pandas index (default: --rows)")
    parser.add_argument("--baseline", type=Path, default=Path("/work/wt-base"),
                        help="a checkout of the code before the DuckDB index, for the pandas figures")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per engine run with --rows")
    parser.add_argument("--worker", choices=["index", "naive"], help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--cache", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        result = run_index(args.dir) if args.worker == "index" else run_naive(args.dir, args.cache)
        print(json.dumps(result))
        return
    if args.rows:
        sys.path[:0] = [str(ROOT / "bench")]
        import million_bench

        million_bench.run(args.rows, args.pandas_rows or args.rows, args.baseline, args.keep, args.timeout)
        return

    lines = ["| rollouts | approach | first table page | first leaderboard | filter change: table | "
             "filter change: leaderboard | new rollout visible | peak RSS |",
             "|---:|---|---:|---:|---:|---:|---:|---:|"]
    notes = []
    for size in args.sizes:
        work = Path(tempfile.mkdtemp(prefix=f"browse-bench-{size}-", dir=args.keep))
        try:
            made = generate(work / "data", size)
            notes.append(f"- {size:,} rollouts: {made['record_bytes'] / 2**30:.2f} GiB of records, "
                         f"{made['index_bytes'] / 2**20:.1f} MiB of index rows in {made['index_files']} files "
                         f"(written in {made['seconds']:.0f} s)")
            print(notes[-1], file=sys.stderr, flush=True)
            index = in_process("index", work / "data", work / "cache", timeout=600)
            print(row(size, "index (rollouts.archive)", index), file=sys.stderr, flush=True)
            naive = in_process("naive", work / "data", work / "cache", timeout=args.naive_timeout)
            print(row(size, "naive (datasets, every record)", naive), file=sys.stderr, flush=True)
            lines += [row(size, "index (rollouts.archive)", index), row(size, "naive (datasets, every record)",
                                                                           naive)]
            if "load_dataset" in naive:
                notes.append(f"- {size:,}: `load_dataset` alone took {naive['load_dataset']:.1f} s (cold Arrow cache)")
            if "frame_mb" in index:
                notes.append(f"- {size:,}: the index frame holds {index['frame_mb']:.1f} MB")
        finally:
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
    cpu = os.cpu_count()
    print("\n".join(lines))
    print()
    print("\n".join(notes))
    print(f"- machine: {cpu} cores, Python {sys.version.split()[0]}; filter change = median (max) of "
          f"{len(FILTER_SETS)} filter sets; RSS = the worker process's peak (VmHWM), baseline = after imports")


if __name__ == "__main__":
    main()
