"""Browse's rows as DuckDB queries over the index files where they lie, so a million rollouts stay on disk.

`IndexEngine` holds one DuckDB connection and a view, `rollouts`, over every source's index rows: a source is
either a list of index files (`index/<day>/<writer>.parquet` and `.jsonl`, read in place with `read_parquet` and
`read_json` with explicit columns) or a small Arrow table (upstream's rows, a test's). A query reads only the
columns it needs and hands back only what is asked for: a page of 50 rows, a count, a leaderboard.

Rows are deduplicated by episode id across sources and file forms (a rollout both in a JSONL file and in the
Parquet file compaction made of it, or both in the local folder and on the Hub): the first source in SOURCES
order keeps it, Parquet before JSONL, and a local row also on the Hub is labelled `local+hub`. Finding duplicates
costs one pass over the ids, so it is done when the files change (`set_files`, `set_table`), never per query:
duplicated and malformed ids go in a small table the view leaves out, and the kept copy of each duplicated id in
another small table the view adds back.

The view's columns and order match rollouts.index's pandas frame: the index row with its `source` as
`played_in`, `source` the label, `reward` 0 and `submitted`/`feasible` false when missing, `tokens` and `date`;
newest first, rows without a start time last.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa

from rollouts.query import PAGE_SIZE, SORTABLE, SOURCE_LABELS, SOURCES, Filters
from rollouts.schema import COLUMNS, EPISODE_ID, TIERS
from rollouts.search import TranscriptIndex

_SQL_TYPES = {str: "VARCHAR", int: "BIGINT", float: "DOUBLE", bool: "BOOLEAN"}
JSON_COLUMNS = "{" + ", ".join(f"'{name}': '{_SQL_TYPES[kind]}'" for name, kind in COLUMNS.items()) + "}"
# Newest first, rows without a start time last; then source order, then id, so every answer is reproducible.
FRAME_ORDER = "started DESC NULLS LAST, grp, episode_id"
# A row read from an index file must name its own record in the layout (rollouts.sources.read_index_lines's
# rule: a planted row must never point a reader at another file); a source's table was checked by the source.
_VALID = (f"(grp % 3 = 2 OR regexp_full_match(episode_id, '{EPISODE_ID.pattern}') AND "
          r"regexp_full_match(path, 'rollouts/\d{4}-\d{2}-\d{2}/[A-Za-z0-9_-]{1,64}\.json') AND "
          "ends_with(path, '/' || episode_id || '.json'))")


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _file_list(paths: Sequence[Path]) -> str:
    return "[" + ", ".join(_quote(str(p)) for p in paths) + "]"


def order_by(sort: str = "started", descending: bool = True) -> str:
    """rollouts.query.sort_rows's order: by a SORTABLE column, missing values last, ties newest first."""
    if sort not in SORTABLE:
        raise ValueError(f"cannot sort by {sort!r}: use one of {', '.join(SORTABLE)}")
    if sort == "started" and descending:
        return FRAME_ORDER
    return f"{sort} {'DESC' if descending else 'ASC'} NULLS LAST, {FRAME_ORDER}"


class IndexEngine:
    """Every source's index rows as one DuckDB view; thread-safe (one connection, one lock)."""

    def __init__(self, *, threads: int = 2, memory_limit: str = "768MB") -> None:
        self._con = duckdb.connect(config={"threads": threads, "memory_limit": memory_limit})
        self._lock = threading.RLock()
        self._parts: dict[str, dict[str, Any]] = {}  # source -> {"parquet": [...], "jsonl": [...]} or {"table": t}
        self.skipped: dict[str, int] = {}
        self.counts: dict[str, int] = {}
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
            selects.append(self._columns(name, base + 2, set(part["table"].column_names)))
        if part.get("parquet"):
            scan = f"read_parquet({_file_list(part['parquet'])}, union_by_name = true)"
            present = {row[0] for row in self._con.execute(f"DESCRIBE SELECT * FROM {scan}").fetchall()}
            selects.append(self._columns(scan, base, present))
        if part.get("jsonl"):
            scan = (f"read_json({_file_list(part['jsonl'])}, format = 'newline_delimited', "
                    f"columns = {JSON_COLUMNS}, ignore_errors = true)")
            selects.append(self._columns(scan, base + 1, set(COLUMNS)))
        return selects

    @staticmethod
    def _columns(scan: str, group: int, present: set[str]) -> str:
        cells = [f"TRY_CAST({name} AS {_SQL_TYPES[kind]}) AS {name}" if name in present
                 else f"NULL::{_SQL_TYPES[kind]} AS {name}" for name, kind in COLUMNS.items()]
        return f"SELECT {', '.join(cells)}, {group} AS grp FROM {scan}"

    def _build(self) -> None:
        """The views over the current sources, and the small tables of duplicated and malformed ids."""
        con = self._con
        selects = [s for source in SOURCES if source in self._parts
                   for s in self._select_part(source, self._parts[source])]
        if not selects:
            selects = [self._columns("(SELECT 1 WHERE false)", 0, set())]
        con.execute("CREATE OR REPLACE VIEW every_row AS " + " UNION ALL ".join(selects))
        # One pass over the ids: those seen twice, and those a row must not carry (they point outside the layout).
        con.execute(f"""CREATE OR REPLACE TABLE odd_ids AS
            SELECT episode_id, count(*) AS copies, bool_and(coalesce({_VALID}, false)) AS all_valid,
                   bool_or({_VALID} AND grp // 3 = 1) AS on_hub
            FROM every_row WHERE episode_id IS NOT NULL GROUP BY episode_id
            HAVING count(*) > 1 OR NOT bool_and(coalesce({_VALID}, false))""")
        con.execute(f"""CREATE OR REPLACE TABLE kept_copies AS
            SELECT e.*, o.on_hub FROM every_row e JOIN odd_ids o USING (episode_id)
            WHERE coalesce({_VALID}, false)
            QUALIFY row_number() OVER (PARTITION BY episode_id ORDER BY grp) = 1""")
        label = "CASE grp // 3 WHEN 0 THEN 'local' WHEN 1 THEN 'hub' ELSE 'upstream' END"
        columns = ", ".join(c if c != "source" else "source AS played_in" for c in COLUMNS)
        finish = (f"{columns}, grp, coalesce(reward, 0.0) AS reward_filled, coalesce(submitted, false) AS sub, "
                  "coalesce(feasible, false) AS fea, coalesce(input_tokens, 0) + coalesce(output_tokens, 0) AS tokens,"
                  " substr(started, 1, 10) AS date")
        con.execute(f"""CREATE OR REPLACE VIEW base_rows AS
            SELECT {finish}, {label} AS label FROM every_row
            WHERE episode_id IS NOT NULL AND episode_id NOT IN (SELECT episode_id FROM odd_ids)
            UNION ALL
            SELECT {finish}, CASE WHEN grp // 3 = 0 AND on_hub THEN 'local+hub' ELSE {label} END AS label
            FROM kept_copies""")
        outer = ", ".join("reward_filled AS reward" if c == "reward" else "sub AS submitted" if c == "submitted"
                          else "fea AS feasible" if c == "feasible" else c
                          for c in [*(c if c != "source" else "played_in" for c in COLUMNS)])
        con.execute(f"CREATE OR REPLACE VIEW rollouts AS SELECT {outer}, label AS source, tokens, date, grp "
                    "FROM base_rows")
        self._count_sources()

    def _count_sources(self) -> None:
        rows = self._con.execute(
            "SELECT grp // 3, count(*) FILTER (WHERE episode_id IS NOT NULL), count(*) FROM every_row GROUP BY 1"
        ).fetchall()
        bad = dict(self._con.execute(
            "SELECT e.grp // 3, count(*) FROM every_row e JOIN odd_ids o USING (episode_id) "
            "WHERE NOT o.all_valid AND NOT coalesce(" + _VALID + ", false) GROUP BY 1").fetchall())
        self.counts, self.skipped = {}, {}
        for group, named, total in rows:
            source = SOURCES[int(group)]
            self.skipped[source] = int(total - named + bad.get(group, 0))
            self.counts[source] = int(named - bad.get(group, 0))

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
                clauses.append(f"list_contains(?, {column})")
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
        for term in filters.search.lower().split():
            said = sorted(transcripts.matching(term)) if transcripts is not None and len(transcripts) else []
            hit = ["starts_with(lower(episode_id), ?)"] + [
                f"coalesce(contains(lower({c}), ?), false)" for c in ("model", "task_id", "run")]
            params += [term] * 4
            if said:
                hit.append("list_contains(?, episode_id)")
                params.append(said)
            clauses.append("(" + " OR ".join(hit) + ")")
        return " AND ".join(clauses), params

    def count(self, filters: Filters | None = None, transcripts: TranscriptIndex | None = None) -> int:
        where, params = self.where(filters or Filters(), transcripts)
        with self._lock:
            return int(self.sql(f"SELECT count(*) FROM rollouts WHERE {where}", params).fetchone()[0])

    def page(self, filters: Filters, transcripts: TranscriptIndex | None = None, *, sort: str = "started",
             descending: bool = True, page: int = 1, size: int = PAGE_SIZE) -> tuple[pd.DataFrame, int, int, int]:
        """(the page's rows, how many match, the page number used, the number of pages): only the page is read
        whole; finding it reads the filter and sort columns."""
        order = order_by(sort, descending)
        where, params = self.where(filters, transcripts)
        size = max(1, int(size))
        with self._lock:
            total = int(self.sql(f"SELECT count(*) FROM rollouts WHERE {where}", params).fetchone()[0])
            pages = max(1, math.ceil(total / size))
            page = min(max(1, int(page or 1)), pages)
            ids = [r[0] for r in self.sql(f"SELECT episode_id FROM rollouts WHERE {where} ORDER BY {order} "
                                          f"LIMIT {size} OFFSET {(page - 1) * size}", params).fetchall()]
            rows = self.fetch("episode_id IN (SELECT unnest(?::VARCHAR[]))", [ids]) if ids else self.empty()
        rank = {episode_id: i for i, episode_id in enumerate(ids)}
        rows = rows.sort_values("episode_id", key=lambda s: s.map(rank), kind="stable", ignore_index=True)
        return rows, total, page, pages

    def fetch(self, where: str = "true", params: Sequence[Any] = (), *, order: str = FRAME_ORDER,
              columns: str = "*", limit: int | None = None) -> pd.DataFrame:
        """Whole rows (every column of the view) that match `where`, as a frame."""
        tail = f" LIMIT {int(limit)}" if limit is not None else ""
        with self._lock:
            table = self._con.sql(f"SELECT {columns} FROM rollouts WHERE {where} ORDER BY {order}{tail}",
                                  params=list(params)).to_arrow_table()
        return table.to_pandas().drop(columns=["grp"], errors="ignore")

    def empty(self) -> pd.DataFrame:
        return self.fetch("false")

    def options(self) -> dict[str, list[str]]:
        """The values each choice filter offers: what the rows hold (rollouts.query.options, in SQL)."""
        out = {}
        with self._lock:
            for key, column in (("models", "model"), ("tasks", "task_id"), ("quays", "quay"),
                                ("tiers", "difficulty")):
                out[key] = sorted(str(r[0]) for r in self.sql(
                    f"SELECT DISTINCT {column} FROM rollouts WHERE {column} IS NOT NULL").fetchall())
        out["tiers"] = [t for t in TIERS if t in set(out["tiers"])] or list(TIERS)
        return out
