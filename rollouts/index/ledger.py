"""The store's ledger: which episodes a folder holds, in which index file, and where each record is.

`index/*/*.jsonl` files are read incrementally and their rows kept whole: they are the small, growing part, and
the store rewrites them in place. `index/*/*.parquet` files (what compaction folded) are read again when one
changes, and only their episode ids and record paths are kept: a million rows as dicts took 2.2 GB, their ids and
paths as Arrow columns and an id -> file map take about a tenth of it. A Parquet row is read whole when it is asked
for (`row`, `rows`, `stale_rows`), from its file.

One row per episode, by the index's precedence rule (rollouts.index.format: JSONL files before Parquet files, each
form in path order, the first row of a file). A JSONL file swapped by a rewrite (fill_index, annotate, a
compaction) or removed is read again, and the map rebuilt.
A row whose path does not fit the layout, or names another episode, is skipped and counted: a planted row must
never make a reader open a file outside the store.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rollouts.index.format import in_precedence, index_files, parquet_rows, valid_rows
from rollouts.jsonio import JsonlTail
from rollouts.layout import is_record_rel
from rollouts.schema import COLUMNS, valid_episode_id

log = logging.getLogger(__name__)


class Ledger:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._jsonl_of: dict[str, tuple[Path, dict]] = {}  # episode id -> (JSONL file, row), for the rows that count
        self._parquet_ids = _ParquetIds({})
        self._count = 0
        self._refused: dict[Path, int] = {}
        self._tails: dict[Path, JsonlTail] = {}
        self._jsonl_rows: dict[Path, list[dict]] = {}
        self._stamps: dict[Path, tuple[int, int, int]] = {}  # Parquet file -> (inode, mtime_ns, size) as read
        self._parquet: dict[Path, tuple[pa.Table, frozenset[str]]] = {}  # (its rows' episode_id and path, columns)

    @property
    def skipped(self) -> int:
        """Index lines left out: unreadable, or pointing outside the layout."""
        return sum(self._refused.values()) + sum(tail.skipped for tail in self._tails.values())

    def __len__(self) -> int:
        return self._count

    def __contains__(self, episode_id: object) -> bool:
        return isinstance(episode_id, str) and self._find(episode_id) is not None

    def _find(self, episode_id: str) -> tuple[Path, dict | int] | None:
        """(the file whose row counts, the row itself for a JSONL file or its number in a Parquet file)."""
        found = self._jsonl_of.get(episode_id)
        return found if found is not None else self._parquet_ids.find(episode_id)

    def file_of(self, episode_id: str) -> Path | None:
        found = self._find(episode_id)
        return found[0] if found is not None else None

    def path_of(self, episode_id: str) -> str | None:
        """The record path the episode's row names."""
        found = self._find(episode_id)
        if found is None:
            return None
        file, row = found
        return row.get("path") if isinstance(row, dict) else self._parquet[file][0].column("path")[row].as_py()

    def row(self, episode_id: str) -> dict | None:
        """The episode's whole row (a Parquet one read from its file), with the columns its file has."""
        found = self._find(episode_id)
        if found is None or isinstance(found[1], dict):
            return found[1] if found is not None else None
        return next(iter(self._own_rows(found[0], [episode_id])), None)

    def rows(self) -> Iterator[dict]:
        """Every episode's row, JSONL files first, then each Parquet file read whole in turn."""
        yield from (row for _, row in self._jsonl_of.values())
        for file in sorted(self._parquet):
            yield from self._own_rows(file)

    def stale_rows(self) -> dict[Path, list[dict]]:
        """The rows that lack a column (written by an older version), by the file that holds them."""
        stale: dict[Path, list[dict]] = {}
        for file, row in self._jsonl_of.values():
            if not COLUMNS.keys() <= row.keys():
                stale.setdefault(file, []).append(row)
        for file, (_, columns) in sorted(self._parquet.items()):
            if not COLUMNS.keys() <= columns:  # a Parquet file's rows all have its columns
                rows = self._own_rows(file)
                if rows:
                    stale[file] = rows
        return stale

    def _own_rows(self, file: Path, ids: list[str] | None = None) -> list[dict]:
        """A Parquet file's rows that count: valid, and not outdone by an earlier file's row of the episode."""
        rows, seen = [], set()
        for row in parquet_rows(file, ids):
            episode_id = row.get("episode_id")
            if isinstance(episode_id, str) and episode_id not in seen and self.file_of(episode_id) == file and \
                    is_record_rel(row.get("path"), episode_id):
                seen.add(episode_id)
                rows.append(row)
        return rows

    def add(self, row: dict, file: Path) -> None:
        """A JSONL row, read or just appended: it counts unless the episode has a JSONL row already (a JSONL row wins
        over a Parquet one, by the precedence rule)."""
        episode_id = row["episode_id"]
        if episode_id in self._jsonl_of:
            return
        self._jsonl_of[episode_id] = (file, row)
        if self._parquet_ids.find(episode_id) is None:
            self._count += 1

    def refresh(self) -> None:
        files = index_files(self.root)
        rebuild = self._read_jsonl([file for file in files if file.suffix == ".jsonl"])
        rebuild = self._read_parquet([file for file in files if file.suffix == ".parquet"]) or rebuild
        if rebuild:  # every JSONL row counts over a Parquet row of its episode, whatever was read first
            self._jsonl_of = {}
            for file in in_precedence(self._jsonl_rows):
                for row in self._jsonl_rows[file]:
                    self._jsonl_of.setdefault(row["episode_id"], (file, row))
            self._parquet_ids = _ParquetIds({file: self._parquet[file][0] for file in in_precedence(self._parquet)})
            in_both = sum(1 for episode_id in self._jsonl_of if self._parquet_ids.find(episode_id))
            self._count = len(self._jsonl_of) + self._parquet_ids.distinct - in_both

    def _read_jsonl(self, present: list[Path]) -> bool:
        """New lines of every JSONL file (added at once); True when a file was swapped or removed."""
        gone = [file for file in self._tails if file not in present]
        for file in gone:
            del self._tails[file]
            self._jsonl_rows.pop(file, None)
            self._refused.pop(file, None)
        swapped = bool(gone)
        for file in present:
            tail = self._tails.setdefault(file, JsonlTail(file))
            restarts = tail.restarts
            values = tail.read()
            if tail.restarts != restarts:
                self._jsonl_rows[file], self._refused[file], swapped = [], 0, True
            for row in self._valid(values, file):
                self._jsonl_rows.setdefault(file, []).append(row)
                earlier = self._jsonl_of.get(row["episode_id"])
                # An episode already in another JSONL file: which row counts is the files' order, so rebuild.
                swapped = swapped or (earlier is not None and earlier[0] != file)
                if not swapped:
                    self.add(row, file)
        return swapped

    def _read_parquet(self, files: list[Path]) -> bool:
        """The ids and paths of every Parquet file that changed; True when any changed or was removed."""
        present = {}
        for file in files:
            try:
                st = file.stat()
            except FileNotFoundError:
                continue
            present[file] = (st.st_ino, st.st_mtime_ns, st.st_size)
        changed = False
        for file in [f for f in self._stamps if f not in present]:
            del self._stamps[file]
            self._parquet.pop(file, None)
            self._refused.pop(file, None)
            changed = True
        for file, stamp in present.items():
            if self._stamps.get(file) == stamp:
                continue
            self._stamps[file] = stamp
            self._parquet[file] = self._read_ids(file)
            changed = True
        return changed

    def _read_ids(self, file: Path) -> tuple[pa.Table, frozenset[str]]:
        empty = pa.table({"episode_id": pa.array([], pa.string()), "path": pa.array([], pa.string())})
        try:
            columns = frozenset(pq.read_schema(file).names)
            ids = pq.read_table(file, columns=["episode_id", "path"]) if {"episode_id", "path"} <= columns else empty
            ids = ids.cast(empty.schema)
        except (OSError, pa.ArrowException) as exc:
            log.warning("cannot read the Parquet index file %s: %s", file, exc)
            return empty, frozenset()
        valid = valid_rows(ids)
        self._refused[file] = ids.num_rows - valid.num_rows
        if valid.num_rows < ids.num_rows:
            log.warning("skipping %d index row(s) of %s that do not point into the store",
                        ids.num_rows - valid.num_rows, file)
        return valid, columns

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


PAD = " "  # not a character of an episode id (rollouts.schema.EPISODE_ID)


class _ParquetIds:
    """The episode ids of the Parquet files' rows, sorted as fixed-width bytes (13 MB for a million 12-character
    ids, where a dict of them took 160 MB), found by binary search; an id in several files is the first file's."""

    def __init__(self, tables: dict[Path, pa.Table]) -> None:
        self.files = list(tables)
        sizes = [table.num_rows for table in tables.values()]
        self.starts = np.cumsum([0, *sizes])
        ids = [table.column("episode_id").combine_chunks() for table in tables.values() if table.num_rows]
        self.keys, self.order, self.distinct, self.width = np.array([], dtype="S1"), np.array([], np.int64), 0, 0
        if not ids:
            return
        joined = pa.concat_arrays(ids)
        self.width = width = max(1, pc.max(pc.binary_length(joined)).as_py())
        # Padded to one width, the ids' bytes are the fixed-width array itself: no Python string per id.
        padded = pc.utf8_rpad(joined, width=width, padding=PAD)  # a fresh array: its values start at byte 0
        keys = np.frombuffer(padded.buffers()[2], dtype=f"S{width}", count=len(padded)).copy()
        self.order = np.argsort(keys, kind="stable")  # the first file's row first among equal ids
        self.keys = keys[self.order]
        self.distinct = int(1 + np.count_nonzero(self.keys[1:] != self.keys[:-1]))

    def find(self, episode_id: str) -> tuple[Path, int] | None:
        """(the file, the row's number in it) of the episode's first row."""
        if not episode_id or len(episode_id) > self.width or PAD in episode_id:
            return None
        key = episode_id.ljust(self.width, PAD).encode("ascii", "replace")
        at = int(np.searchsorted(self.keys, key))
        if at >= len(self.keys) or self.keys[at] != key:
            return None
        position = int(self.order[at])
        file = int(np.searchsorted(self.starts, position, side="right")) - 1
        return self.files[file], position - int(self.starts[file])
