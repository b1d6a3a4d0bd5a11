"""Where Browse reads rollouts from: the local folder, our Hub dataset and upstream's published Parquet.

Each source answers two questions: `load()` -> its index rows as an Arrow table (or a clear error), and
`record(row)` -> one full record, fetched only when someone opens it. Index rows have the columns of
`rollouts.schema.COLUMNS`; nothing here ever reads every record.

- `LocalSource`: `index/*/*.jsonl` under ROLLOUT_DIR, read incrementally: an index file is append-only, so a file
  whose size grew is read from where the last read stopped, and an unchanged file (same inode and size) is not
  opened at all. This is what makes a rollout played in the app show up in Browse within a second.
- `HubSource`: the same layout in a Hub dataset. One cheap probe (the repo's current commit, with a short timeout
  and no retries) comes first: an unchanged commit means nothing to read, an unreachable Hub means a clear message
  at once instead of huggingface_hub's retry loop (about 23 s). Then the `index/` tree is listed at that commit
  and only index files whose blob id changed are downloaded (`hf_hub_download`, cached).
- `UpstreamSource`: one Parquet file found through the dataset card's `rollouts` config; only the flat columns are
  read for the index, and one row's JSON columns when it is opened.

Our two sources read the compacted `index/*/*.parquet` files too (rollouts.compact), after the JSONL files, and keep
one row per episode id.

Offline (`HF_HUB_OFFLINE=1`) the Hub sources use what huggingface_hub has cached, if anything, and say so.
Every error message names the source and the cause, never a token.
"""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from rollouts.schema import COLUMNS, EPISODE_ID, coerce_cell

_ARROW = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}
INDEX_SCHEMA = pa.schema([(name, _ARROW[kind]) for name, kind in COLUMNS.items()])


class SourceError(Exception):
    """A source could not be read; the message says which and why, for the page."""


@dataclass
class Loaded:
    """One source's rows after a load: `table` (INDEX_SCHEMA) or `error`; `note` qualifies either."""

    name: str
    label: str
    table: pa.Table | None = None
    error: str | None = None
    note: str | None = None
    changed: bool = True
    skipped: int = 0  # index lines left out: unreadable, or pointing outside the layout
    at: float = field(default_factory=time.time)

    @property
    def rows(self) -> int:
        return self.table.num_rows if self.table is not None else 0


# -- index rows ------------------------------------------------------------------------------------------------


def parse_index_lines(data: bytes) -> pa.Table:
    """JSONL index rows -> a table in INDEX_SCHEMA (rows that break the layout left out: `read_index_lines`)."""
    return read_index_lines(data)[0]


def read_index_lines(data: bytes) -> tuple[pa.Table, int]:
    """JSONL index rows -> (a table in INDEX_SCHEMA, how many lines were left out).

    A line is left out when it is not JSON, or its episode id is malformed, or its `path` is not the record path of
    the layout for that id (`rollouts/<YYYY-MM-DD>/<episode_id>.json`): a planted row must never point a reader at
    another file. Arrow's JSON reader does the work (a 100k-row index reads in a fraction of a second); a file it
    refuses (a bad line, a value of the wrong type) is read line by line instead, keeping every readable row.
    """
    if not data.strip():
        return INDEX_SCHEMA.empty_table(), 0
    lines = sum(1 for line in data.splitlines() if line.strip())
    try:
        table = pa_json.read_json(io.BytesIO(data), read_options=pa_json.ReadOptions(block_size=1 << 22),
                                  parse_options=pa_json.ParseOptions(explicit_schema=INDEX_SCHEMA,
                                                                     unexpected_field_behavior="ignore"))
        table = table.select(INDEX_SCHEMA.names)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        table = _parse_slowly(data)
    table = _valid_rows(table)
    return table, max(0, lines - table.num_rows)


def _parse_slowly(data: bytes) -> pa.Table:
    rows = []
    for line in data.splitlines():
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(row, dict):
            rows.append({name: coerce_cell(row.get(name), kind) for name, kind in COLUMNS.items()})
    return pa.Table.from_pylist(rows, schema=INDEX_SCHEMA)


# A row's own record path: the layout's pattern, with the row's episode id in it.
_ROW_PATH = rf"^rollouts/\d{{4}}-\d{{2}}-\d{{2}}/(?P<id>{EPISODE_ID.pattern})\.json$"


def _valid_rows(table: pa.Table) -> pa.Table:
    ids = table.column("episode_id")
    keep = pc.fill_null(pc.match_substring_regex(ids, f"^{EPISODE_ID.pattern}$"), False)
    named = pc.struct_field(pc.extract_regex(pc.fill_null(table.column("path"), ""), _ROW_PATH), [0])
    keep = pc.and_(keep, pc.fill_null(pc.equal(named, ids), False))
    if pc.all(keep).as_py() is not False:
        return table
    return table.filter(keep)


def concat_tables(tables: list[pa.Table]) -> pa.Table:
    tables = [t for t in tables if t.num_rows]
    return pa.concat_tables(tables) if tables else INDEX_SCHEMA.empty_table()




def arrow_type(kind: type) -> pa.DataType:
    return _ARROW[kind]


__all__ = ["INDEX_SCHEMA", "Loaded", "SourceError", "arrow_type", "concat_tables", "parse_index_lines", "read_index_lines"]
