"""The store's own view of a folder's index rows: `index/*/*.jsonl` read incrementally, `index/*/*.parquet` read
whole when one changes, one row per episode, with the file each came from.

A JSONL file is read from where the last read stopped; a file swapped by a rewrite (fill_index, annotate, a
compaction) or removed (a compaction that folded every line) is read again, and the rows are rebuilt from every
file's rows. JSONL files are read before Parquet files and win over them (rollouts.compact says why). A row whose
path does not fit the layout, or names another episode, is skipped and counted: a planted row must never make a
reader open a file outside the store.
"""

from __future__ import annotations

import logging
from pathlib import Path

from rollouts.compact import parquet_rows
from rollouts.jsonio import JsonlTail
from rollouts.layout import INDEX_GLOB, INDEX_PARQUET_GLOB, is_record_rel
from rollouts.schema import valid_episode_id

log = logging.getLogger(__name__)


class IndexFiles:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.rows: list[dict] = []
        self.by_id: dict[str, dict] = {}
        self.file_of: dict[str, Path] = {}
        self._refused: dict[Path, int] = {}
        self._tails: dict[Path, JsonlTail] = {}
        self._stamps: dict[Path, tuple[int, int, int]] = {}  # Parquet file -> (inode, mtime_ns, size) as read
        self._file_rows: dict[Path, list[dict]] = {}

    @property
    def skipped(self) -> int:
        """Index lines left out: unreadable, or pointing outside the layout."""
        return sum(self._refused.values()) + sum(tail.skipped for tail in self._tails.values())

    def add(self, row: dict, file: Path) -> None:
        if row.get("episode_id") not in self.by_id:
            self.by_id[row["episode_id"]] = row
            self.file_of[row["episode_id"]] = file
            self.rows.append(row)

    def refresh(self) -> None:
        rebuild = self._read_jsonl()
        rebuild = self._read_parquet() or rebuild
        if rebuild:
            self.rows, self.by_id, self.file_of = [], {}, {}
            for file in self._in_read_order():
                for row in self._file_rows[file]:
                    self.add(row, file)

    def _read_jsonl(self) -> bool:
        """New lines of every JSONL file (added at once); True when a file was swapped or removed."""
        present = sorted(self.root.glob(INDEX_GLOB))
        gone = [file for file in self._tails if file not in present]
        for file in gone:
            del self._tails[file]
            self._file_rows.pop(file, None)
            self._refused.pop(file, None)
        swapped = bool(gone)
        for file in present:
            tail = self._tails.setdefault(file, JsonlTail(file))
            restarts = tail.restarts
            values = tail.read()
            if tail.restarts != restarts:
                self._file_rows[file], self._refused[file], swapped = [], 0, True
            for row in self._valid(values, file):
                self._file_rows.setdefault(file, []).append(row)
                if not swapped:
                    self.add(row, file)
        return swapped

    def _read_parquet(self) -> bool:
        """Every Parquet file that changed, read whole; True when any changed or was removed."""
        present = {}
        for file in sorted(self.root.glob(INDEX_PARQUET_GLOB)):
            try:
                st = file.stat()
            except FileNotFoundError:
                continue
            present[file] = (st.st_ino, st.st_mtime_ns, st.st_size)
        changed = False
        for file in [f for f in self._stamps if f not in present]:
            del self._stamps[file]
            self._file_rows.pop(file, None)
            self._refused.pop(file, None)
            changed = True
        for file, stamp in present.items():
            if self._stamps.get(file) == stamp:
                continue
            self._stamps[file] = stamp
            self._refused[file] = 0
            self._file_rows[file] = self._valid(parquet_rows(file), file)
            changed = True
        return changed

    def _valid(self, values: list, file: Path) -> list[dict]:
        rows = []
        for row in values:
            if isinstance(row, dict) and valid_episode_id(row.get("episode_id")) and \
                    is_record_rel(row.get("path"), row["episode_id"]):
                rows.append(row)
            else:
                self._refused[file] = self._refused.get(file, 0) + 1
                log.warning("skipping an index row of %s that does not point into the store", file)
        return rows

    def _in_read_order(self) -> list[Path]:
        """JSONL files first (their rows win), then Parquet files, each sorted."""
        return sorted(self._file_rows, key=lambda file: (file.suffix == ".parquet", file))
