"""Browse's rows as DuckDB queries over the index files where they lie, so a million rollouts stay on disk.

`IndexEngine` holds one DuckDB connection and a view, `rollouts`, over every source's index rows: a source is
either a list of index files (`index/<day>/<writer>.parquet`, read in place with `read_parquet`, and `.jsonl`,
parsed once per file version with `read_json` and explicit columns into a small table) or an Arrow table scanned
where it lies (upstream's rows, the Hub's, a test's). A query reads only the columns it needs and hands back only
what is asked for: a page of 50 rows, a count, a leaderboard.

Rows are deduplicated by episode id across sources and file forms (a rollout both in a JSONL file and in the
Parquet file compaction made of it, or both in the local folder and on the Hub): the first source in SOURCES
order keeps it, Parquet before JSONL, and a local row also on the Hub is labelled `local+hub`. Duplicates are
looked for when the files change (`set_files`, `set_table`), never per query: the ids of every row outside the
local Parquet files are looked up among all ids (a source's Parquet files are unique among themselves: each writer
folds its own rows). Duplicated and malformed ids go in a small table the view leaves out, and the kept copy of
each duplicated id in another small table the view adds back; with none, the view is a plain union.

The view's columns and order match rollouts.index_pandas's frame: the index row with its `source` as
`played_in`, `source` the label, `reward` 0 and `submitted`/`feasible` false when missing, `tokens` and `date`;
newest first, rows without a start time last (then source order and id, so pages never overlap).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rollouts.index_copy import COPY_ROWS, ParquetCopies
from rollouts.query import PAGE_SIZE, SORTABLE, SOURCE_LABELS, SOURCES, Filters
from rollouts.schema import COLUMNS, EPISODE_ID, TIERS
from rollouts.search import TranscriptIndex

_SQL_TYPES = {str: "VARCHAR", int: "BIGINT", float: "DOUBLE", bool: "BOOLEAN"}
JSON_COLUMNS = "{" + ", ".join(f"'{name}': '{_SQL_TYPES[kind]}'" for name, kind in COLUMNS.items()) + "}"
# Newest first, rows without a start time last; then source order, then id, so every answer is reproducible.
FRAME_ORDER = "started DESC NULLS LAST, grp, episode_id"
# A row read from an index file must name its own record in the layout (rollouts.sources.read_index_lines's
# rule: a planted row must never point a reader at another file); a source's table was checked by the source.
def _valid(group: str) -> str:
    return (f"({group} % 3 = 2 OR regexp_full_match(episode_id, '{EPISODE_ID.pattern}') AND "
            "path = concat('rollouts/', substr(path, 10, 10), '/', episode_id, '.json') AND "
            r"regexp_full_match(substr(path, 10, 10), '\d{4}-\d{2}-\d{2}'))")


_VALID = _valid("grp")


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _file_list(paths: Sequence[Path]) -> str:
    return "[" + ", ".join(_quote(str(p)) for p in paths) + "]"


_ARROW_NAMES = {str: ("string", "large_string"), int: ("int64",), float: ("double",), bool: ("bool",)}


def _columns(scan: str, group: int, present: set[str] | dict[str, str]) -> str:
    """The index columns of a scan, in order: as they are when the file has the right type, cast when not (a
    value that does not fit becomes null, as rollouts.schema.coerce_cell makes it), null when absent."""
    cells = []
    for name, kind in COLUMNS.items():
        if name not in present:
            cells.append(f"NULL::{_SQL_TYPES[kind]} AS {name}")
        elif isinstance(present, dict) and present[name] in _ARROW_NAMES[kind]:
            cells.append(name)
        else:
            cells.append(f"TRY_CAST({name} AS {_SQL_TYPES[kind]}) AS {name}")
    where = "filename" if "filename = true" in scan else "NULL::VARCHAR"
    return f"SELECT {', '.join(cells)}, {group} AS grp, {where} AS filename FROM {scan}"


def _version(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except FileNotFoundError:
        return (0, 0)
    return (st.st_mtime_ns, st.st_size)


def _file_versions(paths: Sequence[Path]) -> frozenset[tuple[Path, int, int]]:
    """What a copy of these files' rows must match to stand for them (index_copy.FileVersions)."""
    return frozenset((path, *_version(path)) for path in paths)


def order_by(sort: str = "started", descending: bool = True) -> str:
    """rollouts.query.sort_rows's order: by a SORTABLE column, missing values last, ties newest first."""
    if sort not in SORTABLE:
        raise ValueError(f"cannot sort by {sort!r}: use one of {', '.join(SORTABLE)}")
    if sort == "started" and descending:
        return FRAME_ORDER
    return f"{sort} {'DESC' if descending else 'ASC'} NULLS LAST, {FRAME_ORDER}"


class IndexEngine:
    """Every source's index rows as one DuckDB view; thread-safe (one connection, one lock)."""

    def __init__(self, *, threads: int = 2, memory_limit: str = "256MB", copy_rows: int = COPY_ROWS) -> None:
        self._con = duckdb.connect(config={"threads": threads, "memory_limit": memory_limit})
        self._con.execute("SET parquet_metadata_cache = true")  # footers read once, not once per query
        self._footers: dict[tuple, tuple[tuple, int]] = {}
        self._checked: dict[tuple, list[str]] = {}  # (parquet file, mtime, size) -> its malformed rows' ids
        self._values: dict[str, list[str]] | None = None
        self._checker: threading.Thread | None = None
        self._jsonl: dict[tuple, str] = {}  # (JSONL file, group, mtime, size) -> the table of its rows
        self._jsonl_names: list[str] = []
        self.on_change: Callable[[], None] = lambda: None  # rows changed outside set_files/set_table
        self._lock = threading.RLock()
        self._parts: dict[str, dict[str, Any]] = {}  # source -> {"parquet": [...], "jsonl": [...]} or {"table": t}
        self.skipped: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        self._copy_rows = copy_rows
        self._copies = ParquetCopies(self._con, self._lock, self._build)
        self._build()

    # -- the sources ---------------------------------------------------------------------------------------------

    def set_files(self, source: str, paths: Sequence[Path]) -> None:
        """A source's rows are these index files (Parquet and JSONL, read in place)."""
        paths = sorted(Path(p) for p in paths)
        part = {"parquet": [p for p in paths if p.suffix == ".parquet"],
                "jsonl": [p for p in paths if p.suffix == ".jsonl"]}
        with self._lock:
            self._parts[source] = part
            self._build()

    def set_table(self, source: str, table: pa.Table | None) -> None:
        """A source's rows are this Arrow table (kept by reference: DuckDB scans it where it lies)."""
        with self._lock:
            if table is None or not table.num_rows:
                self._parts.pop(source, None)
            else:
                self._parts[source] = {"table": table}
            self._build()

    def _select_part(self, source: str, part: dict[str, Any]) -> list[str]:
        """One SELECT per form of the source's rows, each with the index columns and its group number."""
        base = SOURCES.index(source) * 3
        selects = []
        if "table" in part:
            name = f"src_{source}"
            self._con.register(name, part["table"])
            selects.append(_columns(name, base + 2, set(part["table"].column_names)))
        selects += self._parquet_part(source, part.get("parquet", []), base)
        selects += [f"SELECT * FROM {self._jsonl_rows(path, base + 1)}" for path in part.get("jsonl", ())]
        return selects

    def _parquet_part(self, source: str, paths: list[Path], group: int) -> list[str]:
        """The SELECTs of a source's Parquet rows: its copy when one holds these files, else the files in place
        (and a copy asked for, when they hold enough rows to gain from one)."""
        files = _file_versions(paths)
        copy = self._copies.table(source, files)
        if copy is not None:
            return [f"SELECT * FROM {copy}"]
        self._parquet_in_place = self._parquet_in_place or bool(paths)
        rows = {path: self._footer(path)[1] for path in paths}
        worth_a_copy = bool(paths) and sum(rows.values()) >= self._copy_rows
        self._copies.want(source, files, rows, (lambda some: " UNION ALL ".join(self._parquet_scans(some, group)))
                          if worth_a_copy else None)
        return self._parquet_scans(paths, group)

    def _parquet_scans(self, paths: Sequence[Path], group: int) -> list[str]:
        # Files of one schema are one scan: DuckDB reads the first file's footer to plan it, not every file's.
        by_schema: dict[tuple, list[Path]] = {}
        for path in paths:
            by_schema.setdefault(self._footer(path)[0], []).append(path)
        return [_columns(f"read_parquet({_file_list(same)}, filename = true)", group, dict(schema))
                for schema, same in by_schema.items()]

    def _jsonl_rows(self, path: Path, group: int) -> str:
        """A JSONL index file's rows as a DuckDB table, parsed once per file version: JSON is slow to parse on
        every query, and these files are the small, growing part (compaction folds them into Parquet)."""
        key = (path, group, *_version(path))
        name = self._jsonl.get(key)
        if name is None:
            name = self._jsonl[key] = f"jsonl_rows_{len(self._jsonl_names)}"
            self._jsonl_names.append(name)
            scan = (f"read_json({_file_list([path])}, format = 'newline_delimited', "
                    f"columns = {JSON_COLUMNS}, ignore_errors = true, filename = true)")
            self._con.execute(f"CREATE OR REPLACE TABLE {name} AS {_columns(scan, group, set(COLUMNS))}")
        return name

    def _drop_stale_jsonl(self) -> None:
        """Forget the tables of JSONL files that changed or went away (after the views stopped naming them)."""
        current = {(p, SOURCES.index(source) * 3 + 1, *_version(p)) for source, part in self._parts.items()
                   for p in part.get("jsonl", ())}
        for key in [k for k in self._jsonl if k not in current]:
            self._con.execute(f"DROP TABLE IF EXISTS {self._jsonl.pop(key)}")

    def _footer(self, path: Path) -> tuple[tuple, int]:
        """((column, type) of a Parquet file's index columns, its row count), read once per file version."""
        key = (path, *_version(path))
        if key not in self._footers:
            meta = pq.read_metadata(path)
            schema = meta.schema.to_arrow_schema()
            self._footers[key] = (tuple((f.name, str(f.type)) for f in schema if f.name in COLUMNS), meta.num_rows)
        return self._footers[key]

    def _build(self) -> None:
        """The views over the current sources, and the small tables of duplicated and malformed ids."""
        con = self._con
        self._parquet_in_place = False
        selects = [s for source in SOURCES if source in self._parts
                   for s in self._select_part(source, self._parts[source])]
        if not selects:
            selects = [_columns("(SELECT 1 WHERE false)", 0, set())]
        con.execute("CREATE OR REPLACE VIEW every_row AS " + " UNION ALL ".join(selects))
        self._find_odd_ids()
        label = "CASE grp // 3 WHEN 0 THEN 'local' WHEN 1 THEN 'hub' ELSE 'upstream' END"
        columns = ", ".join(c if c != "source" else "source AS played_in" for c in COLUMNS)
        finish = (f"{columns}, grp, filename, coalesce(reward, 0.0) AS reward_filled, coalesce(submitted, false) AS sub, "
                  "coalesce(feasible, false) AS fea, coalesce(input_tokens, 0) + coalesce(output_tokens, 0) AS tokens,"
                  " substr(started, 1, 10) AS date")
        odd = con.execute("SELECT count(*) FROM odd_ids").fetchall()[0][0]
        if odd:  # the ids seen twice or malformed left out, and each duplicated id's kept copy added back
            body = f"""SELECT {finish}, {label} AS label FROM every_row
                WHERE episode_id IS NOT NULL AND episode_id NOT IN (SELECT episode_id FROM odd_ids)
                UNION ALL
                SELECT {finish}, CASE WHEN grp // 3 = 0 AND on_hub THEN 'local+hub' ELSE {label} END AS label
                FROM kept_copies"""
        else:
            body = f"SELECT {finish}, {label} AS label FROM every_row WHERE episode_id IS NOT NULL"
        con.execute(f"CREATE OR REPLACE VIEW base_rows AS {body}")
        outer = ", ".join("reward_filled AS reward" if c == "reward" else "sub AS submitted" if c == "submitted"
                          else "fea AS feasible" if c == "feasible" else c
                          for c in [*(c if c != "source" else "played_in" for c in COLUMNS)])
        con.execute(f"CREATE OR REPLACE VIEW rollouts AS SELECT {outer}, label AS source, tokens, date, grp, "
                    "filename FROM base_rows")
        self._values = None
        self._drop_stale_jsonl()
        self._copies.drop_unwanted(set(self._parts))
        self._count_sources()

    def _find_odd_ids(self) -> None:
        """Ids seen twice, and ids on a row that does not name its own record, as small tables.

        Rows in a source's Parquet files are checked once per file version (compaction writes new files rather than
        changing old ones), and among themselves they are unique (each writer folds its own rows); so the costly
        pass is a lookup of the other rows' ids (JSONL, tables, the Hub's) among all ids, not a grouping of all."""
        con = self._con
        if self._unchecked():
            self._check_in_background()
        planted = sorted({i for part in self._parts.values() for p in part.get("parquet", ())
                          for i in self._checked.get((p, *_version(p)), []) if i is not None})
        con.execute("CREATE OR REPLACE TEMP TABLE planted AS SELECT unnest(?::VARCHAR[]) AS episode_id", [planted])
        con.execute(f"""CREATE OR REPLACE TABLE odd_ids AS
            WITH others AS (SELECT episode_id FROM every_row WHERE grp <> 0),
                 candidates AS (SELECT episode_id FROM every_row WHERE episode_id IN (SELECT episode_id FROM others)
                                GROUP BY episode_id HAVING count(*) > 1
                                UNION SELECT episode_id FROM every_row WHERE grp % 3 <> 0 AND NOT
                                      coalesce({_VALID}, false) AND episode_id IS NOT NULL
                                UNION SELECT episode_id FROM planted)
            SELECT episode_id, count(*) AS copies, bool_and(coalesce({_VALID}, false)) AS all_valid,
                   bool_or({_VALID} AND grp // 3 = 1) AS on_hub
            FROM every_row WHERE episode_id IN (SELECT episode_id FROM candidates) GROUP BY episode_id""")
        con.execute(f"""CREATE OR REPLACE TABLE kept_copies AS
            SELECT e.*, o.on_hub FROM every_row e JOIN odd_ids o USING (episode_id)
            WHERE coalesce({_VALID}, false)
            QUALIFY row_number() OVER (PARTITION BY episode_id ORDER BY grp) = 1""")

    def _unchecked(self) -> list[Path]:
        return [p for part in self._parts.values() for p in part.get("parquet", ())
                if (p, *_version(p)) not in self._checked]

    def _check_in_background(self) -> None:
        """Check new Parquet files' rows (a regex per row: a second at a million rows) while pages are answered;
        a planted row is visible until then, and harmless: a record is only ever read from the path its id
        names (LocalSource.locate, HubSource.record check the path again)."""
        if self._checker is not None and self._checker.is_alive():
            return

        def check() -> None:
            cursor = self._con.cursor()
            while True:
                with self._lock:
                    fresh = self._unchecked()
                if not fresh:
                    return
                try:
                    bad = cursor.execute(
                        f"SELECT filename, episode_id FROM read_parquet({_file_list(fresh)}, filename = true, "
                        f"union_by_name = true) WHERE NOT coalesce({_valid('0')}, false)").fetchall()
                except duckdb.Error:
                    bad = []  # a file replaced meanwhile: checked again under its new version
                with self._lock:
                    for path in fresh:
                        self._checked[(path, *_version(path))] = [i for f, i in bad if f == str(path)]
                    if bad:
                        self._build()
                        self.on_change()

        self._checker = threading.Thread(target=check, name="index-check", daemon=True)
        self._checker.start()

    def wait_checked(self, timeout: float = 30.0) -> None:
        """Wait for the background check of new Parquet files (tests, benchmarks)."""
        if self._checker is not None:
            self._checker.join(timeout)

    def wait_copied(self, timeout: float = 60.0) -> None:
        """Wait for the background copies of large sources' Parquet rows (tests, benchmarks)."""
        self._copies.wait(timeout)

    def copied(self, source: str) -> bool:
        """Whether the source's Parquet rows are read from a copy now, not from the files."""
        with self._lock:
            paths = self._parts.get(source, {}).get("parquet", [])
            return self._copies.table(source, _file_versions(paths)) is not None

    def _count_sources(self) -> None:
        rows = self._con.execute(
            "SELECT grp // 3, count(episode_id), count(*) FROM every_row GROUP BY 1").fetchall()
        odd, repeated = {}, {}
        if self._con.execute("SELECT count(*) FROM odd_ids").fetchall()[0][0]:
            odd = dict(self._con.execute(
                "SELECT e.grp // 3, count(*) FROM every_row e WHERE episode_id IN (SELECT episode_id FROM odd_ids) "
                "AND NOT coalesce(" + _VALID + ", false) GROUP BY 1").fetchall())
            repeated = dict(self._con.execute(
                "SELECT grp, sum(n - 1) FROM (SELECT grp // 3 AS grp, count(*) AS n FROM every_row "
                "WHERE episode_id IN (SELECT episode_id FROM odd_ids) AND coalesce(" + _VALID + ", false) "
                "GROUP BY 1, episode_id) GROUP BY 1").fetchall())
        self.counts, self.skipped = {}, {}
        for group, named, total in rows:
            source = SOURCES[int(group)]
            self.skipped[source] = int(total - named + odd.get(group, 0))
            self.counts[source] = int(named - odd.get(group, 0) - (repeated.get(group) or 0))

    # -- queries -------------------------------------------------------------------------------------------------

    def sql(self, query: str, params: Sequence[Any] = ()) -> duckdb.DuckDBPyConnection:
        """Run a query on the engine's connection (hold `lock` while reading its answer)."""
        return self._con.execute(query, list(params))

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    def where(self, filters: Filters, transcripts: TranscriptIndex | None = None) -> tuple[str, list[Any]]:
        """The SQL condition for the filters and the search, and its parameters (values never enter the text)."""
        clauses, params = ["true"], []
        for column, chosen in (("model", filters.models), ("task_id", filters.tasks), ("difficulty", filters.tiers),
                               ("quay", filters.quays)):
            if chosen:
                clauses.append(f"{column} = ANY(?::VARCHAR[])")
                params.append(list(chosen))
        for op, value in ((">=", filters.reward_min), ("<=", filters.reward_max)):
            if value is not None:
                clauses.append(f"reward {op} ?")
                params.append(float(value))
        for column, value in (("submitted", filters.submitted), ("feasible", filters.feasible)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(bool(value))
        if filters.date_from or filters.date_to:
            clauses.append("date IS NOT NULL")
        for op, value in ((">=", filters.date_from), ("<=", filters.date_to)):
            if value:
                clauses.append(f"date {op} ?")
                params.append(value)
        if filters.sources:
            clauses.append("list_contains(?, source)")
            params.append([lb for lb in SOURCE_LABELS if set(lb.split("+")) & set(filters.sources)])
        values = self.values() if filters.search else {}
        for term in filters.search.lower().split():
            # Model, task and run are matched on their distinct values (a few thousand), as pandas matched
            # categories: the rows are then compared by equality, not searched one by one.
            hit, said = ["lower(episode_id) LIKE ? ESCAPE '\\'"], []
            params.append(term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
            for column in ("model", "task_id", "run"):
                found = [v for v in values[column] if term in v.lower()]
                if found:
                    hit.append(f"{column} = ANY(?::VARCHAR[])")
                    params.append(found)
            if transcripts is not None and len(transcripts):
                said = sorted(transcripts.matching(term))
            if said:
                hit.append("episode_id = ANY(?::VARCHAR[])")
                params.append(said)
            clauses.append("(" + " OR ".join(hit) + ")")
        return " AND ".join(clauses), params

    def count_where(self, where: str, params: Sequence[Any] = ()) -> int:
        with self._lock:
            return int(self.sql(f"SELECT count(*) FROM rollouts WHERE {where}", params).fetchall()[0][0])

    def count(self, filters: Filters | None = None, transcripts: TranscriptIndex | None = None) -> int:
        where, params = self.where(filters or Filters(), transcripts)
        with self._lock:
            return int(self.sql(f"SELECT count(*) FROM rollouts WHERE {where}", params).fetchall()[0][0])

    def page(self, filters: Filters, transcripts: TranscriptIndex | None = None, *, sort: str = "started",
             descending: bool = True, page: int = 1, size: int = PAGE_SIZE) -> tuple[pd.DataFrame, int, int, int]:
        """(the page's rows, how many match, the page number used, the number of pages): only the page is read
        whole; finding it reads the filter and sort columns."""
        order = order_by(sort, descending)
        where, params = self.where(filters, transcripts)
        size = max(1, int(size))
        with self._lock:
            total = int(self.sql(f"SELECT count(*) FROM rollouts WHERE {where}", params).fetchall()[0][0])
            pages = max(1, math.ceil(total / size))
            page = min(max(1, int(page or 1)), pages)
            # The page's ids and files from the filter and sort columns; then its rows whole (_page_rows).
            found = self.sql(f"SELECT episode_id, filename FROM rollouts WHERE {where} ORDER BY {order} "
                             f"LIMIT {size} OFFSET {(page - 1) * size}", params).fetchall()
            ids = [episode_id for episode_id, _ in found]
            parts = self._page_rows(found) if ids else []
        self._copies.go()  # a page was answered: the copies may have the cores now
        rows = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0] if parts else self.empty()
        rank = {episode_id: i for i, episode_id in enumerate(ids)}
        rows = rows.sort_values("episode_id", key=lambda c: c.map(rank), kind="stable", ignore_index=True)
        return rows, total, page, pages

    def _page_rows(self, found: list[tuple[str, str | None]]) -> list[pd.DataFrame]:
        """The whole rows of a page's (episode id, file) pairs."""
        ids = [episode_id for episode_id, _ in found]
        if not self._parquet_in_place:  # every row is in a DuckDB table: found by the ids' index, or a scan
            return [self.fetch("episode_id = ANY(?::VARCHAR[])", [ids], order="episode_id")]
        # From the page's files only: DuckDB skips a Parquet file by its name before opening it.
        files = sorted({name for _, name in found if name is not None})
        parts = []
        if files:
            parts.append(self.fetch("filename = ANY(?::VARCHAR[]) AND episode_id = ANY(?::VARCHAR[])",
                                    [files, ids], order="episode_id"))
        if any(name is None for _, name in found):
            parts.append(self.fetch("filename IS NULL AND episode_id = ANY(?::VARCHAR[])", [ids], order="episode_id"))
        return parts

    def fetch(self, where: str = "true", params: Sequence[Any] = (), *, order: str = FRAME_ORDER,
              columns: str = "*", limit: int | None = None) -> pd.DataFrame:
        """Whole rows (every column of the view) that match `where`, as a frame."""
        tail = f" LIMIT {int(limit)}" if limit is not None else ""
        with self._lock:
            table = self._con.sql(f"SELECT {columns} FROM rollouts WHERE {where} ORDER BY {order}{tail}",
                                  params=list(params)).to_arrow_table()
        return table.to_pandas().drop(columns=["grp", "filename"], errors="ignore")

    def empty(self) -> pd.DataFrame:
        return self.fetch("false")

    def values(self) -> dict[str, list[str]]:
        """The distinct values of the columns Browse offers as choices or searches, once per change of the rows."""
        with self._lock:
            if self._values is None:
                names = ("model", "task_id", "run", "quay", "difficulty")
                lists = self.sql("SELECT " + ", ".join(f"list(DISTINCT {c}) FILTER (WHERE {c} IS NOT NULL)"
                                                       for c in names) + " FROM rollouts").fetchall()[0]
                self._values = {c: sorted(str(v) for v in (values or [])) for c, values in zip(names, lists,
                                                                                              strict=True)}
            return self._values

    def options(self) -> dict[str, list[str]]:
        """The values each choice filter offers: what the rows hold (rollouts.query.options, in SQL)."""
        values = self.values()
        return {"models": values["model"], "tasks": values["task_id"], "quays": values["quay"],
                "tiers": [t for t in TIERS if t in set(values["difficulty"])] or list(TIERS)}
