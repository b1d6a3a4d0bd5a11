"""This machine's rollout folder as a Browse source: `index/*/*.jsonl` read incrementally, `index/*/*.parquet`
(compacted rows, rollouts.compact) read whole when one changes, records on demand.

A JSONL index file is append-only, so a file whose size grew is read from where the last read stopped, and an
unchanged file (same inode and size) is not opened at all: a rollout played in the app shows up in Browse within a
second. The JSONL files are read before the Parquet files, and the rows are one per episode id (a JSONL row wins),
so a read racing a compaction neither misses nor doubles a row.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from rollouts.compact import first_per_episode, read_parquet_index
from rollouts.layout import INDEX_GLOB, INDEX_PARQUET_GLOB, RECORD_GLOB, inside, is_record_rel
from rollouts.schema import RecordError, parse_record, valid_episode_id
from rollouts.sources import INDEX_SCHEMA, Loaded, SourceError, concat_tables, read_index_lines

log = logging.getLogger(__name__)


@dataclass
class _FileRead:
    inode: int
    offset: int  # bytes read so far, always at a line end


class LocalSource:
    """`ROLLOUT_DIR`: the rollouts this Space (or this machine) played, pushed or not."""

    name = "local"
    COMPACT_AFTER = 64  # appended batches kept apart before they are joined into one table

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root).resolve()
        self.label = "this Space's rollout folder"
        self._files: dict[Path, _FileRead] = {}
        self._batches: list[pa.Table] = []  # rows in read order: first load, then each refresh's new lines
        self._lock = threading.Lock()
        self._table: pa.Table | None = None
        self._skipped = 0
        self._parquet_stamps: dict[Path, tuple[int, int, int]] = {}
        self._parquet = INDEX_SCHEMA.empty_table()
        self._parquet_skipped = 0

    def load(self) -> Loaded:
        """Re-read what changed since the last load; `changed` says whether any row did."""
        with self._lock:
            changed = self._refresh()
            changed = self._refresh_parquet() or changed  # after the JSONL files: see rollouts.compact
            if changed or self._table is None:
                if len(self._batches) > self.COMPACT_AFTER:
                    self._batches = [concat_tables(self._batches)]
                self._table = first_per_episode(concat_tables([*self._batches, self._parquet]))
            return Loaded(self.name, self.label, table=self._table, changed=changed,
                          skipped=self._skipped + self._parquet_skipped)

    def _refresh_parquet(self) -> bool:
        """Read every Parquet index file again when any of them changed, appeared or vanished."""
        stamps = {}
        for path in sorted(self.root.glob(INDEX_PARQUET_GLOB)) if self.root.is_dir() else []:
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            stamps[path] = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamps == self._parquet_stamps:
            return False
        read = [read_parquet_index(path) for path in stamps]
        self._parquet = concat_tables([table for table, _ in read])
        self._parquet_skipped = sum(skipped for _, skipped in read)
        self._parquet_stamps = stamps
        return True

    def _refresh(self) -> bool:
        present = sorted(self.root.glob(INDEX_GLOB)) if self.root.is_dir() else []
        stats = {}
        for path in present:
            try:
                stats[path] = path.stat()
            except FileNotFoundError:
                continue
        # A file that vanished, shrank or was replaced (never done by the store, but possible by hand) means its
        # rows are unknown: start over. Otherwise only the bytes appended since the last read are read.
        reset = any(path not in stats for path in self._files) or any(
            path in self._files and (self._files[path].inode != st.st_ino or st.st_size < self._files[path].offset)
            for path, st in stats.items())
        if reset:
            self._files, self._batches, self._skipped = {}, [], 0
        chunks = []
        for path, st in stats.items():
            read = self._files.setdefault(path, _FileRead(st.st_ino, 0))
            if st.st_size == read.offset:
                continue
            with open(path, "rb") as f:
                f.seek(read.offset)
                data = f.read(st.st_size - read.offset)
            end = data.rfind(b"\n") + 1  # a line without its newline is still being written (or torn)
            if end:
                chunks.append(data[:end])
                read.offset += end
        if chunks:
            # One parse for every file's new lines: Arrow's per-call setup dominates small reads.
            table, skipped = read_index_lines(b"".join(chunks))
            self._batches.append(table)
            self._skipped += skipped
            if skipped:  # each line is read once, so each bad one is reported once
                log.warning("%s: skipped %d index line(s) that are unreadable or do not point at their record in "
                            "the store", self.root, skipped)
        return reset or bool(chunks)

    def record(self, row: dict) -> dict:
        """The record of an index row (or of an episode id alone, found by its file name)."""
        episode_id = str(row.get("episode_id") or "")
        if not valid_episode_id(episode_id):
            raise SourceError("malformed episode id")
        path = self.locate(episode_id, row.get("path"))
        if path is None:
            raise SourceError(f"rollout {episode_id} is indexed but its record file is missing from the folder")
        try:
            return parse_record(path.read_bytes(), episode_id)
        except OSError:
            raise SourceError(f"rollout {episode_id} is indexed but its record file is missing from the folder") \
                from None
        except RecordError as exc:
            raise SourceError(str(exc)) from None

    def locate(self, episode_id: str, path: Any = None) -> Path | None:
        """The record file of `episode_id`, never outside `rollouts/` of the folder."""
        if not valid_episode_id(episode_id):
            return None
        if is_record_rel(path, episode_id):
            candidate = inside(self.root, path)
            if candidate is not None and candidate.is_file():
                return candidate
        if not self.root.is_dir():
            return None
        for found in self.root.glob(RECORD_GLOB.replace("*.json", f"{episode_id}.json")):
            candidate = inside(self.root, found.relative_to(self.root).as_posix())  # not a link out of the folder
            if candidate is not None and candidate.is_file():
                return candidate
        return None


