"""The background check of a large source's Parquet rows: the rows that lose with no JSONL row to say so.

A planted row (one that does not name its own record) and a row of an episode an earlier Parquet file already has
both lose (rollouts.index.format's rules). Finding them reads every id of every file, a second at a million rows,
so it runs in a thread while pages are answered, once per set of file versions; the engine then leaves them out.
A planted row is visible until then, and harmless: a record is only ever read from the path its id names
(rollouts.layout.locate_record).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from rollouts.index.format import sql_file_list, valid_sql

FileVersions = frozenset[tuple[Path, int, int]]
Losers = list[tuple[str, str]]  # (episode id, file)


class ParquetChecks:
    """Each large source's losing Parquet rows, found in a thread on a cursor of the engine's connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection, lock: threading.RLock,
                 on_found: Callable[[], None]) -> None:
        self._con, self._lock, self._on_found = con, lock, on_found  # on_found is called under the lock
        self._found: dict[str, tuple[FileVersions, Losers, int]] = {}  # source -> (files, losers, planted)
        self._due: dict[str, tuple[FileVersions, list[Path]]] = {}
        self._thread: threading.Thread | None = None
        self.running: dict[str, Any] = {}  # "cursor" of the check under way, "stop" once the engine goes

    def losers(self, source: str, versions: FileVersions) -> Losers:
        found = self._found.get(source)
        return found[1] if found is not None and found[0] == versions else []

    def planted(self, source: str) -> int:
        return self._found.get(source, (None, [], 0))[2]

    def want(self, due: dict[str, tuple[FileVersions, list[Path]]]) -> None:
        """Check these sources' files (those not checked at these versions yet), under the engine's lock."""
        self._due = {s: v for s, v in due.items() if self._found.get(s, (None,))[0] != v[0]}
        for source in [s for s in self._found if s not in due]:
            del self._found[source]
        if self._due and (self._thread is None or not self._thread.is_alive()):
            self._thread = threading.Thread(target=self._run, name="index-check", daemon=True)
            self._thread.start()

    def wait(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        cursor = self._con.cursor()
        self.running["cursor"] = cursor
        try:
            while not self.running.get("stop"):
                with self._lock:
                    if not self._due:
                        return
                    source, (versions, paths) = next(iter(self._due.items()))
                try:
                    losers, planted = _losers(cursor, paths)
                except duckdb.Error:
                    if self.running.get("stop"):
                        return
                    losers, planted = [], 0  # a file replaced meanwhile: checked again under its new version
                with self._lock:
                    if self._due.get(source, (None,))[0] == versions:
                        del self._due[source]
                    self._found[source] = (versions, losers, planted)
                    if losers:
                        self._on_found()
        finally:
            self.running.pop("cursor", None)
            cursor.close()


def _losers(cursor: duckdb.DuckDBPyConnection, paths: list[Path]) -> tuple[Losers, int]:
    """((episode id, file) of every Parquet row that loses, how many of them are planted) among these files."""
    scan = f"read_parquet({sql_file_list(paths)}, filename = true, union_by_name = true)"
    planted = cursor.execute(f"SELECT episode_id, filename FROM {scan} WHERE NOT {valid_sql()}").fetchall()
    repeated = cursor.execute(f"""SELECT episode_id, filename FROM {scan} WHERE episode_id IN
        (SELECT episode_id FROM {scan} WHERE {valid_sql()} GROUP BY episode_id HAVING count(*) > 1)
        AND {valid_sql()} ORDER BY episode_id, filename""").fetchall()
    seen: set[str] = set()
    later = []
    for episode_id, filename in repeated:  # files in path order: the first file's row counts
        if episode_id in seen:
            later.append((episode_id, filename))
        seen.add(episode_id)
    return [*planted, *later], len(planted)


def stop(running: dict[str, Any]) -> None:
    """Interrupt the check under way (at exit: a DuckDB query left running in a daemon thread while the interpreter
    shuts down aborts the process)."""
    running["stop"] = True
    cursor = running.get("cursor")
    if cursor is not None:
        with contextlib.suppress(duckdb.Error):
            cursor.interrupt()
