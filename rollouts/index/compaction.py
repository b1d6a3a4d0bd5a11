"""Compaction: each writer's appended JSONL index rows folded into its Parquet index file for the same day.

`index/<day>/<writer_id>.jsonl` grows by one line per rollout; `index/<day>/<writer_id>.parquet` holds the same
flat rows (rollouts.schema.COLUMNS), compacted, so a reader of a large dataset opens a few columnar files instead
of parsing millions of JSON lines. `python -m rollouts compact [--dir D]` folds every JSONL file of a folder; the
pusher (rollouts.hub_push) folds a file once it has grown past a threshold.

One JSONL file is folded while holding its `flock` (the lock appends and rewrites take, rollouts.jsonio) and the
folder's compaction lock:

1. its whole lines are read; a complete, valid row (every column, an episode id, its record path) is folded. What
   cannot be folded stays in the JSONL: unreadable or planted lines (readers skip them, compaction must not erase
   them), rows of an older version lacking columns (`RolloutStore.fill_index` fills those in from their records),
   and a torn last line. Nothing is folded into a Parquet file of an older version until fill_index updated it.
2. the new Parquet (the old Parquet rows, with a folded row replacing one of the same episode) is written to a
   temp file, fsynced and renamed over the old one.
3. the JSONL is replaced by what stays, or removed when nothing does.

Killed before the rename of 2, the JSONL is untouched (and the temp file is removed later). Killed between 2 and 3,
a row is in both files: readers keep one row per episode id (the JSONL one wins: rollouts.index.format's precedence
rule), and the next compaction folds the JSONL again without adding anything twice. Readers read the JSONL files before the Parquet
files, which is what makes a read racing a compaction see every row: a row leaves the JSONL only after it is in
the Parquet.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from filelock import FileLock

from rollouts.index.format import INDEX_SCHEMA, concat_tables, conform, index_files, parquet_rows, rows_table
from rollouts.jsonio import atomic_write, fsync_dir, held_lock
from rollouts.layout import INDEX_DIR, PUSH_DIR, inside, is_record_rel
from rollouts.schema import COLUMNS, coerce_cell, valid_episode_id

log = logging.getLogger(__name__)

COMPACT_LOCK = "compact.lock"  # under .push/: one compaction (or Parquet rewrite) at a time in a folder
STALE_TEMP_S = 120.0


@dataclass
class Folded:
    """What one compaction did: rows folded into Parquet, lines left in the JSONL files, files touched."""

    rows: int = 0
    kept: int = 0
    files: int = 0


# -- writing -------------------------------------------------------------------------------------------------------


def _foldable(value: Any) -> dict | None:
    """This JSONL value when it can go into the Parquet as a row, else None."""
    if not isinstance(value, dict) or not COLUMNS.keys() <= value.keys():
        return None
    if not valid_episode_id(value.get("episode_id")) or not is_record_rel(value.get("path"), value["episode_id"]):
        return None
    return value


def write_parquet(path: Path, table: pa.Table) -> None:
    """Replace `path` with `table` as Parquet, whole (temp file, fsync, rename: rollouts.jsonio.atomic_write)."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    atomic_write(path, sink.getvalue().to_pybytes())


def fold_file(jsonl: Path) -> Folded:
    """Fold one JSONL index file into the Parquet file beside it (steps 1-3 of the module doc). The caller holds
    the folder's compaction lock."""
    with held_lock(jsonl) as fd:
        if fd is None:
            return Folded()
        with open(fd, "rb", closefd=False) as f:
            data = f.read()
        *lines, tail = data.split(b"\n")
        folded: dict[str, dict] = {}
        kept: list[bytes] = []
        for line in lines:
            try:
                row = _foldable(json.loads(line))
            except (ValueError, RecursionError):
                row = None
            if row is None:
                if line.strip():
                    kept.append(line)
            else:
                folded.setdefault(row["episode_id"], row)  # the first row of an episode, as readers take it
        if not folded:
            return Folded(kept=len(kept))
        target = jsonl.with_suffix(".parquet")
        old = pq.read_table(target) if target.exists() else INDEX_SCHEMA.empty_table()
        if not set(COLUMNS) <= set(old.column_names):
            # Written by an older version: folding would turn its missing cells into nulls that look filled in.
            # `RolloutStore.fill_index` (run at the Space's start and after each CLI run) brings it up to date first.
            log.warning("not folding into %s until fill_index adds its missing columns", target)
            return Folded(kept=len(kept) + len(folded))
        old = conform(old)
        if old.num_rows:
            keep_old = pc.invert(pc.is_in(old.column("episode_id"), pa.array(list(folded), pa.string())))
            old = old.filter(keep_old)
        write_parquet(target, concat_tables([old, rows_table(list(folded.values()))]))
        rest = b"".join(line + b"\n" for line in kept) + tail
        if rest:
            atomic_write(jsonl, rest)
        else:
            jsonl.unlink()
            fsync_dir(jsonl.parent)  # the removal is durable, as the rename before it
    log.info("folded %d index row(s) of %s into %s", len(folded), jsonl.name, target.name)
    return Folded(rows=len(folded), kept=len(kept), files=1)


def compact(root: str | Path, *, min_bytes: int = 0, only: Callable[[Path], bool] | None = None) -> Folded:
    """Fold every JSONL index file of the folder `root` of at least `min_bytes` (and, given `only`, for which it
    says True) into its Parquet file; safe while other processes save into the folder."""
    root = Path(root)
    total = Folded()
    if not (root / INDEX_DIR).is_dir():
        return total
    (root / PUSH_DIR).mkdir(exist_ok=True)
    with FileLock(root / PUSH_DIR / COMPACT_LOCK):
        _drop_stale_temps(root)
        for jsonl in (file for file in index_files(root) if file.suffix == ".jsonl"):
            # A link out of the store (a day folder or a file pointing elsewhere) is not the store's to rewrite.
            if inside(root, jsonl.relative_to(root).as_posix()) is None or \
                    inside(root, jsonl.with_suffix(".parquet").relative_to(root).as_posix()) is None:
                log.error("not compacting %s: it is a link out of the store", jsonl)
                continue
            try:
                if jsonl.stat().st_size < max(1, min_bytes) or (only is not None and not only(jsonl)):
                    continue
            except FileNotFoundError:
                continue
            done = fold_file(jsonl)
            total.rows, total.kept, total.files = total.rows + done.rows, total.kept + done.kept, \
                total.files + done.files
    return total


def rewrite_parquet_rows(root: Path, path: Path, change: Callable[[dict], dict | None]) -> int:
    """Replace the rows of a Parquet index file for which `change(row)` returns a different row (as
    rollouts.jsonio.rewrite_lines does for JSONL); the number replaced. The file is swapped whole."""
    with FileLock(root / PUSH_DIR / COMPACT_LOCK):
        rows = parquet_rows(path)
        changed = 0
        for i, row in enumerate(rows):
            new = change(row)
            if new is not None and new != row:
                rows[i] = {name: coerce_cell(new.get(name), kind) for name, kind in COLUMNS.items()}
                changed += 1
        if changed:
            write_parquet(path, pa.Table.from_pylist(
                [{name: row.get(name) for name in COLUMNS} for row in rows], schema=INDEX_SCHEMA))
        return changed


def _drop_stale_temps(root: Path) -> None:
    """Temp files of a compaction (or rewrite) that was killed before its rename."""
    now = time.time()
    for tmp in root.glob(f"{INDEX_DIR}/*/.*.tmp"):
        if inside(root, tmp.relative_to(root).as_posix()) is None:
            continue
        try:
            if now - tmp.stat().st_mtime >= STALE_TEMP_S:
                tmp.unlink()
        except FileNotFoundError:
            continue
