"""The index's one engine: every source's index rows as one DuckDB view, `rollouts`, whatever their size.

A source is either index files (the local folder) or an Arrow table (the Hub's rows, upstream's, a test's). How a
file source is read depends on its size:

- small (its Parquet files hold fewer than HOLD_ROWS rows): every file is read once per version with the index's
  readers and its rows held in one DuckDB table (rollouts.index.held), one row per episode by the precedence rule;
- large: its JSONL files are held so, and its Parquet files are read in place (`read_parquet`) until a background
  copy of their rows into DuckDB's own format is ready (rollouts.index.copies), then from the copy.

The engine's database is a file in a temporary folder, so held rows and copies live in DuckDB's compressed blocks and
past its memory cap go to disk rather than failing.

One row per episode, by one order: the sources in SOURCES order, then within a source JSONL before Parquet, each in
path order, and a file's first row (rollouts.index.format's precedence rule). Held tables apply it as they are made;
for a large source the few Parquet rows that lose (an episode also in a JSONL file, in an earlier Parquet file, or a
planted row that does not name its own record) are listed in a small table (`odd_<source>`) the view leaves out:
the JSONL ones when the files change, the others in a background check, since that reads every id. Likewise a row
of a later source whose episode an earlier source has goes in `shadowed`; a local row whose episode is also on the
Hub is labelled `local+hub`. Problems are looked for when the files change, never per query.

The view holds rollouts only: rows of episodes that ended before their player's first turn (rollouts.record's
STARTED_SQL) are left out. Its columns: the index row with its `source` as `played_in`, `source` the label, `reward` 0 and
`submitted`/`feasible` false when missing, `tokens` and `date`; newest first, rows without a start time last (then
source order and id, so pages never overlap). Answers are Arrow tables.

Beside the rows, the flags shown on steps (rollouts.annotations, the hidden ones left out) are one small table,
`flags` (episode_id, label), set whole when their files change (`set_flags`): the "flagged" filter narrows the view
by it, and a page's rows carry their count, `flags`, joined for the page's ids alone (never per row of the view, so
no list, board or count over a million rows pays for it).
"""

from __future__ import annotations

import contextlib
import math
import shutil
import tempfile
import threading
import weakref
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rollouts.filters import FRAME_ORDER, PAGE_SIZE, Filters, order_by
from rollouts.index.checks import ParquetChecks
from rollouts.index.checks import stop as stop_checks
from rollouts.index.copies import COPY_ROWS, ParquetCopies
from rollouts.index.format import FORMS, concat_tables, first_per_episode, sql_columns, sql_file_list
from rollouts.index.held import HeldRows
from rollouts.record import STARTED_SQL
from rollouts.schema import COLUMNS, EPISODE_ID, SOURCES, TIERS
from rollouts.search import TranscriptWords

HOLD_ROWS = 100_000  # a source whose Parquet files hold fewer rows is held whole in one table
_PARQUET = FORMS.index(".parquet")
_TABLE = len(FORMS)  # the `form` of a row from an Arrow table source


def _version(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except FileNotFoundError:
        return (0, 0)
    return (st.st_mtime_ns, st.st_size)


def _file_versions(paths: Sequence[Path]) -> frozenset[tuple[Path, int, int]]:
    """What a copy of these files' rows must match to stand for them (rollouts.index.copies.FileVersions)."""
    return frozenset((path, *_version(path)) for path in paths)


class IndexEngine:
    """Every source's index rows as one DuckDB view; thread-safe (one connection, one lock)."""

    def __init__(self, *, threads: int = 2, memory_limit: str = "256MB", copy_rows: int = COPY_ROWS,
                 hold_rows: int = HOLD_ROWS) -> None:
        folder = Path(tempfile.mkdtemp(prefix="arena-index-"))
        self._con = duckdb.connect(str(folder / "index.duckdb"),
                                   config={"threads": threads, "memory_limit": memory_limit})
        self._lock = threading.RLock()
        self._checks = ParquetChecks(self._con, self._lock, self._rebuild_and_tell)
        # At exit (or when the engine goes) the check under way is interrupted and the files removed; the copies'
        # own finaliser, made later, runs first.
        weakref.finalize(self, _close, self._con, folder, self._checks.running)
        self._con.execute("SET parquet_metadata_cache = true")  # footers read once, not once per query
        self._footers: dict[tuple, tuple[tuple, int]] = {}
        self._values: dict[str, list[str]] | None = None
        self._parts: dict[str, dict[str, Any]] = {}  # source -> {"parquet": [...], "jsonl": [...]} or {"table": t}
        self._held: dict[str, HeldRows] = {}
        self._copy_rows, self._hold_rows = copy_rows, hold_rows
        self._copies = ParquetCopies(self._con, self._lock, self._build, folder)
        self._parquet_in_place = False
        self.on_change: Callable[[], None] = lambda: None  # rows changed outside set_files/set_table
        self.skipped: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        self._con.execute("CREATE TABLE flags (episode_id VARCHAR, label VARCHAR)")
        self._build()

    # -- the sources ---------------------------------------------------------------------------------------------

    def set_files(self, source: str, paths: Sequence[Path]) -> bool:
        """A source's rows are these index files; True when its rows changed."""
        paths = [Path(p) for p in paths]
        part = {"parquet": sorted(p for p in paths if p.suffix == ".parquet"),
                "jsonl": sorted(p for p in paths if p.suffix == ".jsonl")}
        with self._lock:
            held = self._held.setdefault(source, HeldRows(self._con, f"held_{source}", SOURCES.index(source)))
            large = sum(self._footer(p)[1] for p in part["parquet"]) >= self._hold_rows
            old = self._parts.get(source)
            changed = held.update(part["jsonl"] if large else part["jsonl"] + part["parquet"])
            changed = changed or old is None or old.get("large") != large or \
                (large and old.get("parquet") != part["parquet"]) or \
                (large and _file_versions(old["parquet"]) != _file_versions(part["parquet"]))
            self._parts[source] = {**part, "large": large}
            if changed:
                self._build()
            return changed

    def set_table(self, source: str, table: pa.Table | None) -> None:
        """A source's rows are this Arrow table (kept by reference: DuckDB scans it where it lies). Rows without a
        well-formed episode id are left out, and an episode's first row counts."""
        with self._lock:
            if table is None or not table.num_rows:
                self._parts.pop(source, None)
            else:
                named = pc.fill_null(pc.match_substring_regex(table.column("episode_id"), f"^{EPISODE_ID.pattern}$"),
                                     False)
                self._parts[source] = {"table": first_per_episode(table.filter(named))}
            self._build()

    def set_flags(self, flags: Sequence[tuple[str, str]]) -> bool:
        """The flags shown, as (episode id, label) pairs; True when they changed."""
        table = pa.table({"episode_id": pa.array([f[0] for f in flags], pa.string()),
                          "label": pa.array([f[1] for f in flags], pa.string())})
        with self._lock:
            before = self._con.execute("SELECT episode_id, label FROM flags ORDER BY ALL").fetchall()
            if before == sorted(tuple(f) for f in flags):
                return False
            self._con.execute("DELETE FROM flags")
            self._con.register("flags_given", table)
            try:
                self._con.execute("INSERT INTO flags SELECT episode_id, label FROM flags_given")
            finally:
                self._con.unregister("flags_given")
            return True

    def _source_selects(self, source: str, part: dict[str, Any]) -> list[str]:
        """The SELECTs of one source's rows, each with the engine's columns."""
        group = SOURCES.index(source)
        if "table" in part:
            self._con.register(f"src_{source}", part["table"])
            return [sql_columns(f"src_{source}", group, _TABLE, set(part["table"].column_names))]
        selects = [f"SELECT * FROM {self._held[source].name}"]
        if part["large"] and part["parquet"]:
            parquet = " UNION ALL ".join(self._parquet_selects(source, part["parquet"], group))
            if self._find_odd(source, parquet):
                parquet = (f"SELECT p.* FROM ({parquet}) p ANTI JOIN odd_{source} o "
                           "ON p.episode_id = o.episode_id AND p.filename = o.filename")
            selects.append(parquet)
        return selects

    def _find_odd(self, source: str, parquet: str) -> bool:
        """odd_<source>: the large source's Parquet rows that lose to a JSONL row of their episode (found now, a
        lookup of the few JSONL ids), and those the background check found (planted, or in an earlier file)."""
        held = self._held[source]
        checked = self._checks.losers(source, _file_versions(self._parts[source]["parquet"]))
        if not held.rows and not checked:
            return False
        self._con.execute(f"""CREATE OR REPLACE TABLE odd_{source} AS
            SELECT p.episode_id, p.filename FROM ({parquet}) p SEMI JOIN {held.name} h ON p.episode_id = h.episode_id
            UNION SELECT unnest(?::VARCHAR[]) AS episode_id, unnest(?::VARCHAR[]) AS filename""",
                          [[i for i, _ in checked], [f for _, f in checked]])
        return bool(self._con.execute(f"SELECT count(*) FROM odd_{source}").fetchall()[0][0])

    def _parquet_selects(self, source: str, paths: list[Path], group: int) -> list[str]:
        """A large source's Parquet rows: its copy when one holds these files, else the files in place (and a
        copy asked for)."""
        files = _file_versions(paths)
        copy = self._copies.table(source, files)
        if copy is not None:
            return [f"SELECT * FROM {copy}"]
        self._parquet_in_place = True
        rows = {path: self._footer(path)[1] for path in paths}
        worth_a_copy = sum(rows.values()) >= self._copy_rows
        self._copies.want(source, files, rows, (lambda some: " UNION ALL ".join(self._parquet_scans(some, group)))
                          if worth_a_copy else None)
        return self._parquet_scans(paths, group)

    def _parquet_scans(self, paths: Sequence[Path], group: int) -> list[str]:
        # Files of one schema are one scan: DuckDB reads the first file's footer to plan it, not every file's.
        by_schema: dict[tuple, list[Path]] = {}
        for path in paths:
            by_schema.setdefault(self._footer(path)[0], []).append(path)
        return [sql_columns(f"read_parquet({sql_file_list(same)}, filename = true)", group, _PARQUET,
                            dict(schema)) for schema, same in by_schema.items()]

    def _footer(self, path: Path) -> tuple[tuple, int]:
        """((column, type) of a Parquet file's index columns, its row count), read once per file version."""
        key = (path, *_version(path))
        if key not in self._footers:
            try:
                meta = pq.read_metadata(path)
                schema = meta.schema.to_arrow_schema()
                self._footers[key] = (tuple((f.name, str(f.type)) for f in schema if f.name in COLUMNS),
                                      meta.num_rows)
            except (OSError, pa.ArrowException):
                self._footers[key] = ((), 0)  # unreadable: its rows count as none (the ledger logs it)
        return self._footers[key]

    # -- the view ------------------------------------------------------------------------------------------------

    def _build(self) -> None:
        """The views over the current sources, and the small tables of the rows they leave out."""
        con = self._con
        self._parquet_in_place = False
        present = [s for s in SOURCES if s in self._parts]
        parts = {s: self._source_selects(s, self._parts[s]) for s in present}
        for source in SOURCES:
            body = " UNION ALL ".join(parts.get(source, [])) or sql_columns("(SELECT 1 WHERE false)", 0, 0, set())
            con.execute(f"CREATE OR REPLACE VIEW part_{source} AS {body}")
        # Only the sources that have rows: a union with empty branches keeps DuckDB from pruning columns.
        con.execute("CREATE OR REPLACE VIEW every_row AS " + (" UNION ALL ".join(
            f"SELECT * FROM part_{s}" for s in present) or "SELECT * FROM part_local"))
        shadowed = self._find_shadowed(present)
        label = "CASE grp " + " ".join(f"WHEN {grp} THEN '{name}'" for grp, name in enumerate(SOURCES)) + " END"
        if shadowed:
            label = (f"CASE WHEN grp = 0 AND episode_id IN (SELECT episode_id FROM shadowed WHERE grp = 1) "
                     f"THEN 'local+hub' ELSE {label} END")
            rows = "every_row e ANTI JOIN shadowed s ON e.episode_id = s.episode_id AND e.grp = s.grp"
        else:
            rows = "every_row"
        columns = ", ".join(c if c != "source" else "source AS played_in" for c in COLUMNS)
        filled = {"reward": "coalesce(reward, 0.0)", "submitted": "coalesce(submitted, false)",
                  "feasible": "coalesce(feasible, false)"}
        outer = ", ".join(f"{filled[c]} AS {c}" if c in filled else c
                          for c in (c if c != "source" else "played_in" for c in COLUMNS))
        # Rows of episodes that ended before their first turn (an older version saved them) are no rollouts: every
        # list, count, board and rating reads this view, so they are left out here, once (rollouts.record's rule).
        con.execute(f"CREATE OR REPLACE VIEW base_rows AS SELECT {columns}, grp, filename, {label} AS label "
                    f"FROM {rows} WHERE episode_id IS NOT NULL AND {STARTED_SQL}")
        con.execute(f"CREATE OR REPLACE VIEW rollouts AS SELECT {outer}, label AS source, "
                    "coalesce(input_tokens, 0) + coalesce(output_tokens, 0) AS tokens, substr(started, 1, 10) AS date, "
                    "grp, filename FROM base_rows")
        self._values = None
        for source in [s for s in self._held if s not in self._parts]:
            self._held.pop(source).drop()
        self._copies.drop_unwanted({s for s in present if self._parts[s].get("large")})
        self._count_sources(present)
        self._checks.want({s: (_file_versions(part["parquet"]), part["parquet"]) for s, part in self._parts.items()
                           if part.get("large") and part["parquet"]})

    def _rebuild_and_tell(self) -> None:
        self._build()
        self.on_change()

    def _find_shadowed(self, present: list[str]) -> bool:
        """`shadowed`: each row of a later source whose episode an earlier source has (none with one source)."""
        with_rows = [s for s in present if self._has_rows(s)]
        if len(with_rows) < 2:
            return False
        unions = []
        for k, later in enumerate(with_rows[1:], start=1):
            earlier = " UNION ALL ".join(f"SELECT episode_id FROM part_{s}" for s in with_rows[:k])
            unions.append(f"SELECT DISTINCT l.episode_id, l.grp FROM part_{later} l JOIN ({earlier}) e "
                          "ON l.episode_id = e.episode_id")
        self._con.execute("CREATE OR REPLACE TABLE shadowed AS " + " UNION ALL ".join(unions))
        return bool(self._con.execute("SELECT count(*) FROM shadowed").fetchall()[0][0])

    def _has_rows(self, source: str) -> bool:
        return bool(self._con.execute(f"SELECT 1 FROM part_{source} LIMIT 1").fetchall())

    def _count_sources(self, present: list[str]) -> None:
        self.counts, self.skipped = {}, {}
        for source in present:
            self.counts[source] = int(self._con.execute(f"SELECT count(*) FROM part_{source}").fetchall()[0][0])
            held = self._held.get(source)
            self.skipped[source] = (held.skipped if held is not None else 0) + self._checks.planted(source)

    # -- background checks and copies ----------------------------------------------------------------------------

    def wait_checked(self, timeout: float = 30.0) -> None:
        """Wait for the background check of large sources' Parquet files (tests, benchmarks)."""
        self._checks.wait(timeout)

    def wait_copied(self, timeout: float = 60.0) -> None:
        """Wait for the background copies of large sources' Parquet rows (tests, benchmarks)."""
        self._copies.wait(timeout)

    def copied(self, source: str) -> bool:
        """Whether the source's Parquet rows are read from a copy now, not from the files."""
        with self._lock:
            paths = self._parts.get(source, {}).get("parquet", [])
            return bool(paths) and self._copies.table(source, _file_versions(paths)) is not None

    def held(self, source: str) -> bool:
        """Whether all the source's rows are held in one table (a small source)."""
        with self._lock:
            part = self._parts.get(source, {})
            return "table" not in part and not part.get("large", True)

    # -- queries -------------------------------------------------------------------------------------------------

    def sql(self, query: str, params: Sequence[Any] = ()) -> duckdb.DuckDBPyConnection:
        """Run a query on the engine's connection (hold `lock` while reading its answer)."""
        return self._con.execute(query, list(params))

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    def where(self, filters: Filters, transcripts: TranscriptWords | None = None,
              hidden: Collection[str] = ()) -> tuple[str, list[Any]]:
        """The SQL condition for the filters and the search, and its parameters (values never enter the text);
        `hidden` episodes (not public yet) are never among the rows."""
        clauses, params = ["true"], []
        if hidden:
            clauses.append("NOT (episode_id = ANY(?::VARCHAR[]))")
            params.append(sorted(hidden))
        for clause, values in filters.where():
            clauses.append(clause)
            params += values
        if filters.search:
            clause, values = self.search_sql(filters.search, transcripts)
            clauses.append(clause)
            params += values
        return " AND ".join(clauses), params

    def search_sql(self, text: str, transcripts: TranscriptWords | None = None) -> tuple[str, list[Any]]:
        """Every word must match an episode-id prefix, part of a model, task or run name (matched on their distinct
        values, so rows are then compared by equality, not searched one by one), or a transcript word."""
        clauses, params = [], []
        values = self.values()
        for term in text.lower().split():
            hit = ["lower(episode_id) LIKE ? ESCAPE '\\'"]
            params.append(term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
            for column in ("model", "task_id", "run"):
                found = [v for v in values[column] if term in v.lower()]
                if found:
                    hit.append(f"{column} = ANY(?::VARCHAR[])")
                    params.append(found)
            said = sorted(transcripts.matching(term)) if transcripts is not None and len(transcripts) else []
            if said:
                hit.append("episode_id = ANY(?::VARCHAR[])")
                params.append(said)
            clauses.append("(" + " OR ".join(hit) + ")")
        return " AND ".join(clauses), params

    def count_where(self, where: str = "true", params: Sequence[Any] = ()) -> int:
        with self._lock:
            return int(self.sql(f"SELECT count(*) FROM rollouts WHERE {where}", params).fetchall()[0][0])

    def count(self, filters: Filters | None = None, transcripts: TranscriptWords | None = None) -> int:
        return self.count_where(*self.where(filters or Filters(), transcripts))

    def page(self, filters: Filters, transcripts: TranscriptWords | None = None, *, sort: str = "started",
             descending: bool = True, page: int = 1, size: int = PAGE_SIZE,
             hidden: Collection[str] = ()) -> tuple[pa.Table, int, int, int]:
        """(the page's rows, how many match, the page number used, the number of pages). The page's ids are found
        first from the filter and sort columns, then its rows are read whole: by the ids' index in DuckDB's tables,
        from the page's files only when Parquet files are read in place (one query for whole rows sorted whole read
        every column of every matching row: twice the time of a filter at a million rows)."""
        order = order_by(sort, descending)
        where, params = self.where(filters, transcripts, hidden)
        size = max(1, int(size))
        with self._lock:
            total = int(self.sql(f"SELECT count(*) FROM rollouts WHERE {where}", params).fetchall()[0][0])
            pages = max(1, math.ceil(total / size))
            page = min(max(1, int(page or 1)), pages)
            found = self.sql(f"SELECT episode_id, filename FROM rollouts WHERE {where} ORDER BY {order} "
                             f"LIMIT {size} OFFSET {(page - 1) * size}", params).fetchall()
            rows = _in_order(self._page_rows(found), [i for i, _ in found]) if found else self.empty()
            rows = self._with_flag_counts(rows)
        self._copies.go()  # a page was answered: the copies may have the cores now
        return rows, total, page, pages

    def _with_flag_counts(self, rows: pa.Table) -> pa.Table:
        """The page's rows with `flags`, how many shown flags each has (0 without)."""
        ids = rows.column("episode_id").to_pylist()
        counts = dict(self.sql("SELECT episode_id, count(*) FROM flags WHERE episode_id = ANY(?::VARCHAR[]) "
                               "GROUP BY episode_id", [ids]).fetchall()) if ids else {}
        return rows.append_column("flags", pa.array([int(counts.get(i, 0)) for i in ids], pa.int64()))

    def _page_rows(self, found: list[tuple[str, str | None]]) -> pa.Table:
        """The whole rows of a page's (episode id, file) pairs."""
        ids = [episode_id for episode_id, _ in found]
        if not self._parquet_in_place:
            return self.fetch("episode_id = ANY(?::VARCHAR[])", [ids], order="episode_id")
        # From the page's files only: DuckDB skips a Parquet file by its name before opening it, when the condition
        # on the name stands alone (with `OR filename IS NULL` it read every file: 0.8 s and 100 MB at a million).
        files = sorted({name for _, name in found if name is not None})
        parts = []
        if files:
            parts.append(self.fetch("filename = ANY(?::VARCHAR[]) AND episode_id = ANY(?::VARCHAR[])", [files, ids],
                                    order="episode_id"))
        if any(name is None for _, name in found):
            parts.append(self.fetch("filename IS NULL AND episode_id = ANY(?::VARCHAR[])", [ids], order="episode_id"))
        return concat_tables(parts) if parts else self.empty()

    def fetch(self, where: str = "true", params: Sequence[Any] = (), *, order: str = FRAME_ORDER,
              columns: str = "*", limit: int | None = None) -> pa.Table:
        """Whole rows (every column of the view but where each came from) that match `where`."""
        tail = f" LIMIT {int(limit)}" if limit is not None else ""
        with self._lock:
            table = self._con.sql(f"SELECT {columns} FROM rollouts WHERE {where} ORDER BY {order}{tail}",
                                  params=list(params)).to_arrow_table()
        return table.drop_columns([c for c in ("grp", "filename") if c in table.column_names])

    def empty(self) -> pa.Table:
        return self.fetch("false")

    def values(self) -> dict[str, list[str]]:
        """The distinct values of the columns Browse offers as choices or searches, once per change of the rows."""
        with self._lock:
            if self._values is None:
                names = ("model", "task_id", "run", "quay", "difficulty")
                lists = self.sql("SELECT " + ", ".join(f"list(DISTINCT {c}) FILTER (WHERE {c} IS NOT NULL)"
                                                       for c in names) + " FROM rollouts").fetchall()[0]
                self._values = {c: sorted(str(v) for v in (found or [])) for c, found in zip(names, lists,
                                                                                            strict=True)}
            return self._values

    def options(self) -> dict[str, list[str]]:
        """The values each choice filter offers: what the rows hold."""
        values = self.values()
        return {"model": values["model"], "task": values["task_id"], "quay": values["quay"],
                "tier": [t for t in TIERS if t in set(values["difficulty"])] or list(TIERS)}


def _in_order(rows: pa.Table, ids: list[str]) -> pa.Table:
    """The rows in the order of `ids` (each id's row, once)."""
    if not rows.num_rows:
        return rows
    rank = {episode_id: i for i, episode_id in enumerate(ids)}
    order = pc.sort_indices(pa.array([rank.get(i, len(rank)) for i in rows.column("episode_id").to_pylist()]))
    return rows.take(order)


def _close(con: duckdb.DuckDBPyConnection, folder: Path, running: dict[str, Any]) -> None:
    """Stop the background check, close the database and remove its files."""
    stop_checks(running)
    with contextlib.suppress(duckdb.Error):
        con.close()
    shutil.rmtree(folder, ignore_errors=True)
