"""The index's format: one flat row per rollout in `index/<day>/<writer>.jsonl` (appended) and `.parquet` (compacted).

Every reader of index files takes from here: the Arrow schema of a row (rollouts.schema.COLUMNS, typed), the one
reader of each file form, the rule that a row's `path` names its own record (the layout's pattern, applied in
Arrow and in SQL), and the one precedence rule for an episode found in several files.

**Precedence.** An episode may have a row in more than one file: a compaction killed between writing the Parquet
file and rewriting the JSONL leaves it in both, and after that an annotation or `fill_index` edits the JSONL copy.
So the JSONL copy wins: files are taken JSONL first, then Parquet, each form in path order, and within a file the
first row counts. `in_precedence` orders files so, `first_per_episode` keeps the first row of each episode in a
table read in that order, and `PRECEDENCE_SQL` is the same order for a query that sees many files' rows at once.
Between sources the order is rollouts.schema.SOURCES (an episode in several is the first source's row).

**The row-path rule.** A row whose `path` is not the record path of its own episode id
(`rollouts/<YYYY-MM-DD>/<episode_id>.json`) is left out and counted: a planted row must never make a reader open
another file. `valid_rows` (Arrow) and `valid_sql` (DuckDB) are both made from rollouts.layout's one pattern.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from rollouts.layout import INDEX_DIR, RECORD_PATH_PATTERN
from rollouts.schema import COLUMNS, EPISODE_ID, coerce_cell

log = logging.getLogger(__name__)

ARROW_TYPES: dict[type, pa.DataType] = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}
INDEX_SCHEMA = pa.schema([(name, ARROW_TYPES[kind]) for name, kind in COLUMNS.items()])
FORMS = (".jsonl", ".parquet")  # in precedence order
INDEX_FILE_GLOBS = tuple(f"{INDEX_DIR}/*/*{suffix}" for suffix in FORMS)
# Both anchored: Arrow's and DuckDB's regex functions search unless told to match the whole text.
_PATH = f"^{RECORD_PATH_PATTERN}$"
_ID = f"^{EPISODE_ID.pattern}$"


# -- which files, in which order -----------------------------------------------------------------------------------


def precedence(path: str | Path) -> tuple[int, str]:
    """A file's place in the precedence order: JSONL before Parquet, then by path."""
    text = str(path)
    form = next((rank for rank, suffix in enumerate(FORMS) if text.endswith(suffix)), len(FORMS))
    return form, text


def in_precedence(paths: Iterable[str | Path]) -> list:
    """The files in precedence order (the first one's row of an episode counts)."""
    return sorted(paths, key=precedence)


def index_files(root: Path) -> list[Path]:
    """Every index file of a rollout folder, in precedence order ([] when the folder has none)."""
    if not (root / INDEX_DIR).is_dir():
        return []
    return in_precedence(path for pattern in INDEX_FILE_GLOBS for path in root.glob(pattern))


# -- the row-path rule ---------------------------------------------------------------------------------------------


def named_mask(table: pa.Table) -> pa.ChunkedArray:
    """True for each row whose id is well formed and whose `path` is its own record's path."""
    ids = table.column("episode_id")
    keep = pc.fill_null(pc.match_substring_regex(ids, _ID), False)
    named = pc.struct_field(pc.extract_regex(pc.fill_null(table.column("path"), ""), _PATH), [1])
    return pc.and_(keep, pc.fill_null(pc.equal(named, ids), False))


def valid_rows(table: pa.Table) -> pa.Table:
    """The rows that follow the row-path rule (the table itself when all do)."""
    keep = named_mask(table)
    return table if pc.all(keep).as_py() is not False else table.filter(keep)


def valid_sql(episode_id: str = "episode_id", path: str = "path") -> str:
    """The row-path rule as a DuckDB condition over two columns (null counts as not valid)."""
    return (f"coalesce(regexp_full_match({episode_id}, '{EPISODE_ID.pattern}') AND "
            f"regexp_extract({path}, '{_PATH}', 2) = {episode_id}, false)")


# -- the SQL reader -----------------------------------------------------------------------------------------------

SQL_TYPES = {str: "VARCHAR", int: "BIGINT", float: "DOUBLE", bool: "BOOLEAN"}
_ARROW_NAMES = {str: ("string", "large_string"), int: ("int64",), float: ("double",), bool: ("bool",)}


def sql_quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def sql_file_list(paths: Iterable[Path]) -> str:
    return "[" + ", ".join(sql_quote(str(p)) for p in paths) + "]"


def sql_columns(scan: str, group: int, form: int, present: set[str] | dict[str, str], *,
                line: str = "NULL::BIGINT") -> str:
    """A SELECT of a scan's rows as the engine holds them: the index columns in order (as they are when the scan has
    them in the right type, cast when not, a value that does not fit becoming null as `coerce_cell` makes it, null
    when absent: the SQL form of `conform`), then where each row came from (its source's group, its file's form and
    name, its place in the file)."""
    cells = []
    for name, kind in COLUMNS.items():
        if name not in present:
            cells.append(f"NULL::{SQL_TYPES[kind]} AS {name}")
        elif isinstance(present, dict) and present[name] in _ARROW_NAMES[kind]:
            cells.append(name)
        else:
            cells.append(f"TRY_CAST({name} AS {SQL_TYPES[kind]}) AS {name}")
    filename = "filename" if "filename = true" in scan else "NULL::VARCHAR"
    return (f"SELECT {', '.join(cells)}, {group}::BIGINT AS grp, {form}::BIGINT AS form, {filename} AS filename, "
            f"{line} AS line FROM {scan}")


# -- reading the two forms -----------------------------------------------------------------------------------------


def parse_jsonl(data: bytes) -> pa.Table | None:
    """Every line of `data` as a row in INDEX_SCHEMA, in order, when Arrow's reader takes them all as they are (one
    row per non-blank line); None when it does not (a bad line: read_jsonl reads it line by line). No row is left
    out here: the caller applies the row-path rule."""
    try:
        threads = len(data) > 1 << 22  # threads pay off only for large reads
        table = pa_json.read_json(io.BytesIO(data), read_options=pa_json.ReadOptions(block_size=1 << 22,
                                                                                     use_threads=threads),
                                  parse_options=pa_json.ParseOptions(explicit_schema=INDEX_SCHEMA,
                                                                     unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    lines = sum(1 for line in data.splitlines() if line.strip())
    return table.select(INDEX_SCHEMA.names) if table.num_rows == lines else None


def read_jsonl(data: bytes) -> tuple[pa.Table, int]:
    """JSONL index lines -> (a table in INDEX_SCHEMA of the rows that count, in file order; how many lines were left
    out: not JSON, or breaking the row-path rule). Arrow's reader does the work (100k rows in a fraction of a
    second); a file it refuses (a bad line, a value of the wrong type) is read line by line, keeping every readable
    row."""
    if not data.strip():
        return INDEX_SCHEMA.empty_table(), 0
    lines = sum(1 for line in data.splitlines() if line.strip())
    table = parse_jsonl(data)
    table = valid_rows(table if table is not None else _read_slowly(data))
    return table, max(0, lines - table.num_rows)


def _read_slowly(data: bytes) -> pa.Table:
    rows = []
    for line in data.splitlines():
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(row, dict):
            rows.append({name: coerce_cell(row.get(name), kind) for name, kind in COLUMNS.items()})
    return pa.Table.from_pylist(rows, schema=INDEX_SCHEMA)


def read_parquet(source: str | Path | pa.NativeFile) -> tuple[pa.Table, int]:
    """A Parquet index file -> (a table in INDEX_SCHEMA of the rows that count, how many were left out); an
    unreadable file counts as no rows (and is logged)."""
    try:
        table = conform(pq.read_table(source))
    except (OSError, pa.ArrowException) as exc:
        log.warning("cannot read the Parquet index file %s: %s", source, exc)
        return INDEX_SCHEMA.empty_table(), 0
    valid = valid_rows(table)
    return valid, table.num_rows - valid.num_rows


def read_index_file(path: Path) -> tuple[pa.Table, int]:
    """Either form, by its suffix."""
    if path.suffix == ".parquet":
        return read_parquet(path)
    try:
        return read_jsonl(path.read_bytes())
    except OSError as exc:
        log.warning("cannot read the index file %s: %s", path, exc)
        return INDEX_SCHEMA.empty_table(), 0


def parquet_rows(path: Path, ids: Sequence[str] | None = None) -> list[dict]:
    """The rows of a Parquet index file (only those of `ids`, if given) as dicts with the columns the file has (so
    a row written by an older version still lacks the newer columns, as its JSONL line would); [] when the file
    cannot be read."""
    try:
        return pq.read_table(path, filters=[("episode_id", "in", list(ids))] if ids else None).to_pylist()
    except (OSError, pa.ArrowException) as exc:
        log.warning("cannot read the Parquet index file %s: %s", path, exc)
        return []


def conform(table: pa.Table) -> pa.Table:
    """A table in INDEX_SCHEMA: a column it lacks (written by an older version) is null, a column beyond the
    schema (a newer version) is left out, a column of another type is cast, or null where it cannot be."""
    columns = []
    for field in INDEX_SCHEMA:
        if field.name not in table.column_names:
            columns.append(pa.nulls(table.num_rows, field.type))
            continue
        column = table.column(field.name)
        try:
            columns.append(column.cast(field.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            columns.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=INDEX_SCHEMA)


def rows_table(rows: list[dict]) -> pa.Table:
    """Row dicts -> a table in INDEX_SCHEMA. Rows the store wrote have every cell in its column's type, so Arrow
    takes them as they are; only rows with an odd cell (edited by hand) pay for coercing every cell."""
    try:
        return pa.Table.from_pylist(rows, schema=INDEX_SCHEMA)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return pa.Table.from_pylist([{name: coerce_cell(row.get(name), kind) for name, kind in COLUMNS.items()}
                                     for row in rows], schema=INDEX_SCHEMA)


def concat_tables(tables: Iterable[pa.Table]) -> pa.Table:
    tables = [t for t in tables if t.num_rows]
    return pa.concat_tables(tables) if tables else INDEX_SCHEMA.empty_table()


# -- one row per episode -------------------------------------------------------------------------------------------


def first_per_episode(table: pa.Table) -> pa.Table:
    """One row per episode id, the first (rows keep their order); the table itself when no id repeats. Read the
    files `in_precedence`, and this is the precedence rule."""
    if table.num_rows < 2:
        return table
    ids = table.column("episode_id")
    if pc.count_distinct(ids, mode="all").as_py() == table.num_rows:
        return table
    numbered = pa.table({"episode_id": ids, "at": pa.array(range(table.num_rows), pa.int64())})
    first = numbered.group_by("episode_id", use_threads=False).aggregate([("at", "min")]).column("at_min")
    return table.take(pc.take(first, pc.sort_indices(first)))


def read_index_files(paths: Iterable[Path]) -> tuple[pa.Table, int]:
    """Several index files as one table, one row per episode by the precedence rule; and the lines left out."""
    read = [read_index_file(path) for path in in_precedence(paths)]
    return first_per_episode(concat_tables(table for table, _ in read)), sum(skipped for _, skipped in read)


# The SQL form of the precedence order, for a query over many files' rows with a `form` rank and a `filename`.
PRECEDENCE_SQL = "form, filename, line"
