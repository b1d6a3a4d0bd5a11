"""A source's index files held as one DuckDB table, one row per episode.

Every JSONL file of a source is held this way (the small, growing part of an index), and so are its Parquet files
while the source is small (rollouts.index.engine decides): a query then reads one table in DuckDB's own format,
never a file, which is what makes a filter at 20,000 rows in 120 files a matter of milliseconds.

- A JSONL file is followed as it grows (rollouts.jsonio.JsonlTail); the new lines of every file that grew are parsed
  in one call (Arrow's per-call setup would cost more than a day's few hundred rows) and kept in DuckDB (a table of
  every JSONL row, `<name>_jsonl`, from which the held table is made), never twice in memory.
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
    INDEX_SCHEMA,
    PRECEDENCE_SQL,
    concat_tables,
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
BATCH_BYTES = 16 << 20  # JSONL lines parsed and stored at a time: the memory a first read of a large folder takes
INSERT_ROWS = 10_000  # new rows inserted into the held table as they are; past this the table is made again
Stamp = tuple[int, int, int]  # (inode, mtime_ns, size)


@dataclass
class _Part:
    """One JSONL file as last read."""

    stamp: Stamp
    tail: JsonlTail
    rows: int = 0
    skipped: int = 0


@dataclass
class HeldRows:
    """The rows of some index files of one source, as the DuckDB table `name`."""

    con: duckdb.DuckDBPyConnection
    name: str
    group: int
    _parts: dict[Path, _Part] = field(default_factory=dict)  # JSONL files
    _dropped: list[Path] = field(default_factory=list)  # JSONL files whose rows leave the raw table
    _parquet: dict[Path, Stamp] = field(default_factory=dict)
    _parquet_skipped: int = 0
    _rows: int = 0
    _made: bool = False
    _dropped_any: bool = False

    @property
    def rows(self) -> int:
        return self._rows

    @property
    def skipped(self) -> int:
        return sum(part.skipped for part in self._parts.values()) + self._parquet_skipped

    def update(self, paths: list[Path]) -> bool:
        """Hold exactly these files' rows; True when the table's rows (or the count of lines left out) changed."""
        self._ensure_raw()
        skipped = self.skipped
        jsonl = [p for p in paths if p.suffix == ".jsonl"]
        parquet = {p: stamp for p in paths if p.suffix == ".parquet" and (stamp := _stamp(p)) is not None}
        gone = [p for p in self._parts if p not in set(jsonl)]
        for path in gone:
            del self._parts[path]
        self._dropped += gone
        remake = bool(gone) or not self._made or parquet != self._parquet
        self._parquet = parquet
        appended = self._read_jsonl(jsonl)
        if remake or self._dropped_any or appended is None:
            self._remake()
            return True
        return self._insert(appended) or self.skipped != skipped

    def _ensure_raw(self) -> None:
        if not self._made:
            empty = _with_place(INDEX_SCHEMA.empty_table(), self.group, _JSONL, None, 0)
            self.con.register("held_empty", empty)
            try:
                self.con.execute(f"CREATE OR REPLACE TABLE {self.name}_jsonl AS SELECT * FROM held_empty")
            finally:
                self.con.unregister("held_empty")

    def _read_jsonl(self, paths: list[Path]) -> pa.Table | None:
        """Read the new lines of the JSONL files (a file seen for the first time, or the lines a file grew by; a file
        held before that was replaced or cut is read again from its start, its old rows dropped) into the raw table,
        BATCH_BYTES at a time so a folder of any size is read within a bounded memory; the rows read, when they are
        few enough to be inserted into the held table as they are (else None: the table is made again)."""
        self._dropped_any = bool(self._dropped)
        self._drop_raw()
        batch: list[tuple[Path, _Part, bytes]] = []
        size, appended, kept = 0, [], 0
        for path in paths:
            stamp = _stamp(path)
            part = self._parts.get(path)
            if stamp is None or (part is not None and part.stamp == stamp):
                continue
            if part is None:
                part = self._parts[path] = _Part(stamp, JsonlTail(path))
            restarts = part.tail.restarts
            data = part.tail.read_bytes()
            if part.tail.restarts != restarts:  # its rows may be others now: the table is made again
                self._dropped.append(path)
                self._drop_raw()
                self._dropped_any, part.rows, part.skipped = True, 0, 0
            part.stamp = stamp
            if data:
                batch.append((path, part, data))
                size += len(data)
            if size >= BATCH_BYTES:
                kept += self._store_batch(batch, appended)
                batch, size = [], 0
        kept += self._store_batch(batch, appended)
        return concat_tables(appended) if kept <= INSERT_ROWS else None

    def _store_batch(self, batch: list[tuple[Path, _Part, bytes]], appended: list[pa.Table]) -> int:
        """Parse a batch of new lines and keep its rows in the raw table; the rows kept (listed in `appended` while
        there are few)."""
        rows = []
        for (path, part, _), (table, skipped) in zip(batch, _parse_each([d for _, _, d in batch]), strict=True):
            rows.append(_with_place(table, self.group, _JSONL, path, part.rows))
            part.rows, part.skipped = part.rows + table.num_rows, part.skipped + skipped
        new = concat_tables(rows)
        if new.num_rows:
            # One chunk: DuckDB scans each Arrow chunk with buffers of its own (2,000 files' rows as 2,000 chunks ran
            # it out of memory), and a table of many small chunks at half the speed.
            self.con.register("held_new", new.combine_chunks())
            try:
                self.con.execute(f"INSERT INTO {self.name}_jsonl SELECT * FROM held_new")
            finally:
                self.con.unregister("held_new")
            if sum(t.num_rows for t in appended) + new.num_rows <= INSERT_ROWS:
                appended.append(new)
        return new.num_rows

    def _drop_raw(self) -> None:
        """The rows of files gone or read again leave the raw table."""
        if self._dropped:
            self.con.execute(f"DELETE FROM {self.name}_jsonl WHERE filename = ANY(?::VARCHAR[])",
                             [[str(p) for p in self._dropped]])
            self._dropped = []

    def _insert(self, appended: pa.Table) -> bool:
        """New rows of new episodes go in as they are; a row of an episode already held means the precedence rule
        must choose again."""
        if not appended.num_rows:
            return False
        ids = appended.column("episode_id")
        with_held = self.con.execute(f"SELECT count(*) FROM {self.name} WHERE episode_id IN (SELECT unnest(?))",
                                     [ids.to_pylist()]).fetchall()[0][0]
        if with_held or pc.count_distinct(ids).as_py() < appended.num_rows:
            self._remake()
            return True
        self.con.register("held_new", appended)
        try:
            self.con.execute(f"INSERT INTO {self.name} SELECT * FROM held_new")
        finally:
            self.con.unregister("held_new")
        self._rows += appended.num_rows
        return True

    def _remake(self) -> None:
        parquet = self._parquet_select()
        self.con.execute(f"""CREATE OR REPLACE TABLE {self.name} AS SELECT * FROM (
            SELECT * FROM {self.name}_jsonl{f" UNION ALL {parquet}" if parquet else ""})
            QUALIFY row_number() OVER (PARTITION BY episode_id ORDER BY {PRECEDENCE_SQL}) = 1""")
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
        self.con.execute(f"DROP TABLE IF EXISTS {self.name}_jsonl")
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
