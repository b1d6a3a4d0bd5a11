"""A source's index files held as one DuckDB table, one row per episode.

Every JSONL file of a source is held this way (the small, growing part of an index), and so are its Parquet files
while the source is small (rollouts.index.engine decides): a query then reads one table in DuckDB's own format,
never a file, which is what makes a filter at 20,000 rows in 120 files a matter of milliseconds.

- A JSONL file is followed as it grows (rollouts.jsonio.JsonlTail), its rows kept in Arrow; the new lines of every
  file that grew are parsed in one call (Arrow's per-call setup would cost more than a day's few hundred rows).
- Parquet files are read by DuckDB itself, when one changes (a compaction writes a new one): all of them in one
  scan, the row-path rule applied in SQL (rollouts.index.format.valid_sql).
- When the only change is new lines whose episodes are new, those rows are inserted; otherwise the table is made
  again from every file's rows, keeping the first row of each episode by the precedence rule (JSONL before Parquet,
  each in path order, a file's first row: rollouts.index.format).

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
    PRECEDENCE_SQL,
    concat_tables,
    in_precedence,
    named_mask,
    parse_jsonl,
    read_jsonl,
    sql_columns,
    sql_file_list,
    valid_sql,
)
from rollouts.jsonio import JsonlTail

log = logging.getLogger(__name__)

_JSONL, _PARQUET = FORMS.index(".jsonl"), FORMS.index(".parquet")
Stamp = tuple[int, int, int]  # (inode, mtime_ns, size)


@dataclass
class _Part:
    """One JSONL file's rows as last read."""

    stamp: Stamp
    tail: JsonlTail
    table: pa.Table | None = None
    skipped: int = 0


@dataclass
class HeldRows:
    """The rows of some index files of one source, as the DuckDB table `name`."""

    con: duckdb.DuckDBPyConnection
    name: str
    group: int
    _parts: dict[Path, _Part] = field(default_factory=dict)  # JSONL files
    _parquet: dict[Path, Stamp] = field(default_factory=dict)
    _parquet_skipped: int = 0
    _rows: int = 0
    _made: bool = False

    @property
    def rows(self) -> int:
        return self._rows

    @property
    def skipped(self) -> int:
        return sum(part.skipped for part in self._parts.values()) + self._parquet_skipped

    def update(self, paths: list[Path]) -> bool:
        """Hold exactly these files' rows; True when the table's rows (or the count of lines left out) changed."""
        skipped = self.skipped
        jsonl = [p for p in paths if p.suffix == ".jsonl"]
        parquet = {p: stamp for p in paths if p.suffix == ".parquet" and (stamp := _stamp(p)) is not None}
        gone = [p for p in self._parts if p not in set(jsonl)]
        for path in gone:
            del self._parts[path]
        remake = bool(gone) or not self._made or parquet != self._parquet
        self._parquet = parquet
        appended, reread = self._read_jsonl(jsonl)
        if remake or reread:
            self._remake()
            return True
        return self._insert(appended) or self.skipped != skipped

    def _read_jsonl(self, paths: list[Path]) -> tuple[list[pa.Table], bool]:
        """The new rows of the JSONL files (those of a file seen for the first time, or lines a file grew by), and
        whether a file held before was replaced or cut (then its rows may be others: the table is made again)."""
        grown: list[tuple[Path, _Part, bytes, int]] = []
        reread = False
        for path in paths:
            stamp = _stamp(path)
            part = self._parts.get(path)
            if stamp is None or (part is not None and part.stamp == stamp):
                continue
            if part is None:
                part = self._parts[path] = _Part(stamp, JsonlTail(path))
            restarts = part.tail.restarts
            data = part.tail.read_bytes()
            if part.tail.restarts != restarts:
                reread, part.table, part.skipped = True, None, 0
            part.stamp = stamp
            if data:
                grown.append((path, part, data, part.table.num_rows if part.table is not None else 0))
        appended = []
        for (path, part, _, start), (table, skipped) in zip(grown, _parse_each([d for _, _, d, _ in grown]),
                                                             strict=True):
            new = _with_place(table, self.group, _JSONL, path, start)
            part.table = new if part.table is None else concat_tables([part.table, new])
            part.skipped += skipped
            appended.append(new)
        return appended, reread

    def _insert(self, appended: list[pa.Table]) -> bool:
        """New rows of new episodes go in as they are; a row of an episode already held means the precedence rule
        must choose again."""
        new = concat_tables(appended)
        if not new.num_rows:
            return False
        ids = new.column("episode_id")
        with_held = self.con.execute(f"SELECT count(*) FROM {self.name} WHERE episode_id IN (SELECT unnest(?))",
                                     [ids.to_pylist()]).fetchall()[0][0]
        if with_held or pc.count_distinct(ids).as_py() < new.num_rows:
            self._remake()
            return True
        self.con.register("held_new", new)
        try:
            self.con.execute(f"INSERT INTO {self.name} SELECT * FROM held_new")
        finally:
            self.con.unregister("held_new")
        self._rows += new.num_rows
        return True

    def _remake(self) -> None:
        jsonl = concat_tables(self._parts[p].table for p in in_precedence(self._parts)
                              if self._parts[p].table is not None)
        # One chunk: DuckDB takes a table of many small chunks (a file's rows each) at half the speed.
        self.con.register("held_jsonl", _with_place(jsonl, self.group, _JSONL, None, 0).combine_chunks())
        try:
            parquet = self._parquet_select()
            self.con.execute(f"""CREATE OR REPLACE TABLE {self.name} AS SELECT * FROM (
                SELECT * FROM held_jsonl{f" UNION ALL {parquet}" if parquet else ""})
                QUALIFY row_number() OVER (PARTITION BY episode_id ORDER BY {PRECEDENCE_SQL}) = 1""")
        finally:
            self.con.unregister("held_jsonl")
        self._rows = self.con.execute(f"SELECT count(*) FROM {self.name}").fetchall()[0][0]
        self._made = True

    def _parquet_select(self) -> str | None:
        """The valid rows of every Parquet file, read by DuckDB in one scan; counts the rows left out."""
        if not self._parquet:
            self._parquet_skipped = 0
            return None
        scan = (f"read_parquet({sql_file_list(sorted(self._parquet))}, filename = true, file_row_number = true, "
                "union_by_name = true)")
        try:
            present = {row[0] for row in self.con.execute(f"DESCRIBE SELECT * FROM {scan}").fetchall()}
        except duckdb.Error as exc:  # a file that cannot be read: its rows count as none (and it is said)
            log.warning("cannot read the Parquet index files of %s: %s", self.name, exc)
            self._parquet_skipped = 0
            return None
        rows = sql_columns(scan, self.group, _PARQUET, present, line="file_row_number")
        self._parquet_skipped = self.con.execute(f"SELECT count(*) FROM ({rows}) WHERE NOT {valid_sql()}"
                                                 ).fetchall()[0][0]
        return f"SELECT * FROM ({rows}) WHERE {valid_sql()}"

    def drop(self) -> None:
        self.con.execute(f"DROP TABLE IF EXISTS {self.name}")
        self._parts.clear()
        self._parquet.clear()
        self._rows, self._made = 0, False


def _stamp(path: Path) -> Stamp | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def _parse_each(chunks: list[bytes]) -> list[tuple[pa.Table, int]]:
    """Each chunk of whole JSONL lines read with the index's reader, (its valid rows, its lines left out); all the
    chunks are parsed in one call when Arrow takes every line as it is, else one by one."""
    if len(chunks) > 1:
        whole = parse_jsonl(b"".join(chunks))
        if whole is not None:
            keep = named_mask(whole)  # the row-path rule once, over every chunk's rows
            out, start = [], 0
            for chunk in chunks:
                lines = sum(1 for line in chunk.splitlines() if line.strip())
                rows, kept = whole.slice(start, lines), keep.slice(start, lines)
                valid = rows.filter(kept)
                out.append((valid, lines - valid.num_rows))
                start += lines
            return out
    return [read_jsonl(chunk) for chunk in chunks]


def _with_place(table: pa.Table, group: int, form: int, path: Path | None, start: int) -> pa.Table:
    """The rows with where they came from: the source's group, the file's form and name, each row's line."""
    if "grp" in table.column_names:
        return table
    n = table.num_rows
    return (table.append_column("grp", pa.array([group] * n, pa.int64()))
            .append_column("form", pa.array([form] * n, pa.int64()))
            .append_column("filename", pa.array([None if path is None else str(path)] * n, pa.string()))
            .append_column("line", pc.add(pa.array(range(n), pa.int64()), start)))
