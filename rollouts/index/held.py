"""A source's index files read with the index's readers and held as one DuckDB table, one row per episode.

Every JSONL file of a source is held this way (the small, growing part of an index), and so are its Parquet files
while the source is small (rollouts.index.engine decides): a query then reads one table in DuckDB's own format,
never a file, which is what makes a filter at 20,000 rows in 120 files a matter of milliseconds.

Each file is read once per version with rollouts.index.format's reader of its form: a JSONL file from where the last
read stopped (rollouts.jsonio.JsonlTail), a Parquet file whole when it changed. When the only change is new lines
whose episodes are new, those rows are inserted; otherwise the table is made again from the files' rows in
precedence order, keeping the first row of each episode (rollouts.index.format's rule).

The table has the index columns, then `grp` (the source's place in SOURCES), `form` (0 JSONL, 1 Parquet),
`filename` and `line` (a row's place in its file), so a query can say where a row came from.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from rollouts.index.format import (
    FORMS,
    concat_tables,
    first_per_episode,
    in_precedence,
    read_jsonl,
    read_parquet,
)
from rollouts.jsonio import JsonlTail

log = logging.getLogger(__name__)

EXTRA = ("grp", "form", "filename", "line")  # the columns every engine row has beyond the index's own


@dataclass
class _Part:
    """One file's rows as last read."""

    stamp: tuple[int, int, int]  # (inode, mtime_ns, size)
    table: pa.Table
    skipped: int = 0
    tail: JsonlTail | None = None  # for a JSONL file: where the next read starts


@dataclass
class HeldRows:
    """The rows of some index files of one source, as the DuckDB table `name`."""

    con: duckdb.DuckDBPyConnection
    name: str
    group: int
    _parts: dict[Path, _Part] = field(default_factory=dict)
    _ids: set[str] = field(default_factory=set)
    _made: bool = False

    @property
    def rows(self) -> int:
        return len(self._ids)

    @property
    def skipped(self) -> int:
        return sum(part.skipped for part in self._parts.values())

    def update(self, paths: list[Path]) -> bool:
        """Hold exactly these files' rows; True when the table's rows (or the count of lines left out) changed."""
        skipped = self.skipped
        gone = [path for path in self._parts if path not in set(paths)]
        for path in gone:
            del self._parts[path]
        appended, remake = [], bool(gone) or not self._made
        for path in paths:
            try:
                st = path.stat()
            except FileNotFoundError:
                remake = remake or self._parts.pop(path, None) is not None
                continue
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
            part = self._parts.get(path)
            if part is not None and part.stamp == stamp:
                continue
            new = self._read(path, part, stamp)
            if new is None:  # the whole file was read again: its rows may be others than before
                remake = True
            elif new.num_rows:
                appended.append(new)
        if remake:
            self._remake()
            return True
        return self._insert(appended) or self.skipped != skipped

    def _read(self, path: Path, part: _Part | None, stamp: tuple[int, int, int]) -> pa.Table | None:
        """Read what changed in one file: the rows of a file seen for the first time, or the new rows of a JSONL
        file that only grew; None when a file held before was read whole again (its rows may be others now)."""
        form = FORMS.index(path.suffix)
        if path.suffix == ".jsonl":
            tail = part.tail if part is not None else JsonlTail(path)
            restarts = tail.restarts
            table, skipped = read_jsonl(tail.read_bytes())
            if part is not None and tail.restarts == restarts:
                new = _with_place(table, self.group, form, path, part.table.num_rows)
                part.table, part.stamp, part.skipped = concat_tables([part.table, new]), stamp, part.skipped + skipped
                return new
        else:
            table, skipped = read_parquet(path)
        self._parts[path] = _Part(stamp, _with_place(table, self.group, form, path, 0), skipped,
                                  tail if path.suffix == ".jsonl" else None)
        return self._parts[path].table if part is None else None

    def _insert(self, appended: list[pa.Table]) -> bool:
        """New rows of new episodes go in as they are; a row of an episode already held means the precedence
        rule must choose again."""
        if not appended:
            return False
        new = concat_tables(appended)
        ids = new.column("episode_id").to_pylist()
        if len(set(ids)) < len(ids) or not self._ids.isdisjoint(ids):
            self._remake()
            return True
        self.con.register("held_new", new)
        try:
            self.con.execute(f"INSERT INTO {self.name} SELECT * FROM held_new")
        finally:
            self.con.unregister("held_new")
        self._ids.update(ids)
        return True

    def _remake(self) -> None:
        rows = first_per_episode(concat_tables(self._parts[path].table for path in in_precedence(self._parts)))
        # One chunk: DuckDB takes a table of many small chunks (a file's rows each) at half the speed.
        rows = _with_place(rows, self.group, 0, None, 0).combine_chunks()
        self.con.register("held_all", rows)
        try:
            self.con.execute(f"CREATE OR REPLACE TABLE {self.name} AS SELECT * FROM held_all")
        finally:
            self.con.unregister("held_all")
        self._ids = set(rows.column("episode_id").to_pylist())
        self._made = True

    def drop(self) -> None:
        self.con.execute(f"DROP TABLE IF EXISTS {self.name}")
        self._parts.clear()
        self._ids.clear()
        self._made = False


def _with_place(table: pa.Table, group: int, form: int, path: Path | None, start: int) -> pa.Table:
    """The rows with where they came from: the source's group, the file's form and name, each row's line."""
    n = table.num_rows
    if "grp" in table.column_names:
        return table
    return (table.append_column("grp", pa.array([group] * n, pa.int64()))
            .append_column("form", pa.array([form] * n, pa.int64()))
            .append_column("filename", pa.array([None if path is None else str(path)] * n, pa.string()))
            .append_column("line", pc.add(pa.array(range(n), pa.int64()), start)))
