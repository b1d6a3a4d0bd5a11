"""The index as JSONL against the same rows compacted into Parquet (rollouts.index.compaction), side by side in one run.

    python bench/compact_bench.py                   # 100k and 300k index rows
    python bench/compact_bench.py --rows 1000000

For each size it writes synthetic index rows (rollouts.schema.index_row of testkit records, cloned under new ids and
days; one writer file per day, 60 days) into a temp folder, then measures in this process: the bytes on disk, a
cold `LocalSource.load()` (what Browse's local source does at start) from the JSONL files, `python -m rollouts
compact`'s work (`compact()`), the bytes and a cold load from the Parquet files, and a refresh after one new row is
appended (the Parquet files unchanged), after a small warm-up run. Prints a Markdown table (paste into BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

DAYS = 60
TEMPLATES = 200


def generate(root: Path, n: int) -> None:
    from rollouts.layout import index_rel
    from rollouts.schema import index_row
    from testkit.records import make_records

    rows = [index_row(r, f"rollouts/2026-10-01/{r['episode_id']}.json") for r in make_records(TEMPLATES, seed=5)]
    files: dict[str, list[str]] = {}
    for i in range(n):
        day = f"2026-{10 + (i % DAYS) // 31}-{1 + (i % DAYS) % 31:02d}"
        episode_id = f"b{i:011x}"
        row = {**rows[i % TEMPLATES], "episode_id": episode_id, "path": f"rollouts/{day}/{episode_id}.json",
               "started": f"{day}T10:00:00Z"}
        files.setdefault(day, []).append(json.dumps(row, ensure_ascii=False))
    for day, lines in files.items():
        path = root / index_rel(day, "bench")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def size_mb(root: Path, pattern: str) -> float:
    return sum(p.stat().st_size for p in root.glob(pattern)) / 1e6


def cold_load(root: Path) -> tuple[float, int]:
    """Every index row of the folder, read as Browse reads it (the archive's first look)."""
    from rollouts.archive import Archive

    start = time.perf_counter()
    archive = Archive.of_folder(root)
    return time.perf_counter() - start, archive.total()


def measure(n: int) -> dict:
    from rollouts.archive import Archive
    from rollouts.index.compaction import compact

    root = Path(tempfile.mkdtemp(prefix="compact-bench-"))
    try:
        generate(root, n)
        result = {"rows": n, "jsonl_mb": size_mb(root, "index/*/*.jsonl")}
        result["jsonl_load_s"], rows = cold_load(root)
        assert rows == n, rows
        start = time.perf_counter()
        folded = compact(root)
        result["compact_s"] = time.perf_counter() - start
        assert folded.rows == n, folded
        result["parquet_mb"] = size_mb(root, "index/*/*.parquet")
        result["parquet_load_s"], rows = cold_load(root)
        assert rows == n, rows
        archive = Archive.of_folder(root)
        day = next(root.glob("index/*/bench.parquet")).parent
        first = archive.engine.fetch(limit=1).to_pylist()[0]
        row = {**{k: v for k, v in first.items() if k not in ("played_in", "tokens", "date")}, "source": "cli",
               "episode_id": "new0000000001", "path": f"rollouts/{day.name}/new0000000001.json"}
        (day / "bench.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
        start = time.perf_counter()
        archive.refresh_local(force=True)
        total = archive.total()
        result["refresh_s"] = time.perf_counter() - start
        assert total == n + 1, total
        return result
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, action="append", help="index rows (repeatable; default 100k and 300k)")
    args = parser.parse_args()
    print("| index rows | JSONL MB | cold load from JSONL | compact | Parquet MB | cold load from Parquet | "
          "load vs JSONL | refresh after 1 new row |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    measure(200)  # warm-up: imports and Arrow's first-call setup are not what is measured
    for n in args.rows or [100_000, 300_000]:
        r = measure(n)
        print(f"| {n:,} | {r['jsonl_mb']:.1f} | {r['jsonl_load_s']:.2f} s | {r['compact_s']:.2f} s | "
              f"{r['parquet_mb']:.1f} | {r['parquet_load_s']:.2f} s | "
              f"{r['jsonl_load_s'] / max(r['parquet_load_s'], 1e-9):.1f}x faster | {r['refresh_s'] * 1000:.0f} ms |",
              flush=True)


if __name__ == "__main__":
    main()
