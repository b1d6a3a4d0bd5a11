"""A source's Parquet index rows copied, in the background, into a DuckDB database file of the engine's own.

Read in place, a query over a million rows in 120 Parquet files decodes the filter, search and sort columns of every
file each time (50 ms for the episode ids alone); DuckDB's own storage, with its light compression, per-block
min/max and an index on the episode id, answers the same page two to three times sooner. So once a source's Parquet
files hold `COPY_ROWS` rows or more, the index engine (rollouts.index.engine) asks for a copy of them. Until the copy is ready,
and whenever the files change again (compaction writes a new file, the Hub gives new ones), the files are read in
place, so an answer is never stale or held up: a copy only ever makes it sooner.

The copy is made on a cursor of the engine's connection, in a thread that starts once the first page is answered
(or after COPY_AFTER_S), so the first page has the cores to itself. Rows go in newest first, a few days at a time:
then a page of the newest rows reads the first blocks only (DuckDB's top-N skips a block whose start times cannot
make the page), and sorting a chunk, not the million, keeps the peak memory down. A copy holds exactly the files
(path, mtime, size) it was made from and is used only while the source's files are those; a new copy is a new
table, swapped in under the engine's lock, the old one dropped. The database file lives in a temporary folder
(resident memory: the blocks DuckDB keeps cached, about 115 MB at a million rows, against 290 MB for an in-memory
table) and goes with the engine.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path

import duckdb

log = logging.getLogger(__name__)

COPY_ROWS = 20_000  # below this, reading the files in place is as quick as a copy would be
COPY_AFTER_S = 5.0  # a copy starts when a page has been answered, or after this long
CHUNK_ROWS = 100_000  # rows sorted and inserted at a time
CATALOG = "copies"
ORDER = "started DESC NULLS LAST"

FileVersions = frozenset[tuple[Path, int, int]]  # (path, mtime_ns, size) of each file a copy holds
SelectOf = Callable[[Sequence[Path]], str]  # the SELECT of some of the files' rows, as the engine reads them


class ParquetCopies:
    """The copies of each source's Parquet rows, made one at a time in a background thread."""

    def __init__(self, con: duckdb.DuckDBPyConnection, lock: threading.RLock, on_ready: Callable[[], None],
                 folder: Path) -> None:
        self._con = con
        self._lock = lock  # the engine's: a copy is swapped in, and the old one dropped, while no query runs
        self._on_ready = on_ready  # called under the lock when a copy can be used
        self._ready: dict[str, tuple[str, FileVersions]] = {}  # source -> (table, the files it holds)
        self._wanted: dict[str, tuple[FileVersions, dict[Path, int], SelectOf]] = {}  # source -> files, rows, SELECT
        self._given_up: dict[str, FileVersions] = {}  # source -> files whose copy failed: not tried again
        self._go = threading.Event()
        self._thread: threading.Thread | None = None
        self._made = 0
        self._folder = folder  # the engine's: it goes with the engine
        self._attached = False
        # At exit the copy under way is interrupted and waited for: a DuckDB query left running in a daemon thread
        # while the interpreter shuts down aborts the process.
        self._running: dict[str, object] = {}  # "thread", "cursor" of the copy under way
        weakref.finalize(self, _stop, self._running)

    def table(self, source: str, files: FileVersions) -> str | None:
        """The copy holding exactly these files' rows, if one is ready."""
        ready = self._ready.get(source)
        return ready[0] if ready is not None and ready[1] == files else None

    def want(self, source: str, files: FileVersions, rows: dict[Path, int], select_of: SelectOf | None) -> None:
        """Copy these files' rows (`rows`: each file's row count); select_of None: the source needs no copy."""
        with self._lock:
            if select_of is None or self._given_up.get(source) == files:
                self._wanted.pop(source, None)
                return
            self._wanted[source] = (files, rows, select_of)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._copy_wanted, name="index-copy", daemon=True)
                self._thread.start()

    def go(self) -> None:
        """A page has been answered: copies may start."""
        self._go.set()

    def wait(self, timeout: float = 60.0) -> None:
        """Wait for the copies under way, started now if they were waiting (tests, benchmarks)."""
        self._go.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def drop_unwanted(self, sources: set[str]) -> None:
        """Drop the copies of sources that went, or whose files hold fewer than COPY_ROWS rows now (under the
        engine's lock)."""
        for source in [s for s in self._wanted if s not in sources]:
            del self._wanted[source]
        for source in [s for s in self._ready if s not in self._wanted]:
            name, _ = self._ready.pop(source)
            self._con.execute(f"DROP TABLE IF EXISTS {name}")

    def _attach(self) -> None:
        # A catalog of its own: its CHECKPOINT after each copy then never waits on the engine's other tables.
        if not self._attached:
            self._con.execute(f"ATTACH '{self._folder / 'copies.duckdb'}' AS {CATALOG}")
            self._attached = True

    def _next_job(self) -> tuple[str, FileVersions, dict[Path, int], SelectOf] | None:
        with self._lock:
            for source, (files, rows, select_of) in self._wanted.items():
                if self.table(source, files) is None:
                    return source, files, rows, select_of
            return None

    def _copy_wanted(self) -> None:
        self._go.wait(COPY_AFTER_S)
        while not self._running.get("stop") and (job := self._next_job()) is not None:
            source, files, rows, select_of = job
            with self._lock:
                self._attach()
                self._made += 1
                name = f"{CATALOG}.rows_{source}_{self._made}"
            cursor = self._con.cursor()
            self._running.update(thread=threading.current_thread(), cursor=cursor)
            try:
                for k, chunk in enumerate(_newest_first(rows)):
                    head = f"CREATE TABLE {name} AS" if k == 0 else f"INSERT INTO {name}"
                    cursor.execute(f"{head} SELECT * FROM ({select_of(chunk)}) ORDER BY {ORDER}")
                # A page's rows are then fetched by id in 20 ms rather than 110 (a scan of every row's id).
                cursor.execute(f"CREATE INDEX {name.split('.')[1]}_ids ON {name} (episode_id)")
                cursor.execute(f"CHECKPOINT {CATALOG}")  # the rows compressed into blocks, out of the WAL
            except duckdb.Error as exc:  # a file replaced or removed mid-copy: the next look asks again
                if self._running.get("stop"):
                    return
                log.info("index copy of %s not made: %s", source, exc)
                cursor.execute(f"DROP TABLE IF EXISTS {name}")
                with self._lock:
                    self._give_up(source, files)
                continue
            finally:
                self._running.pop("cursor", None)
                cursor.close()
            self._swap_in(source, files, name)

    def _give_up(self, source: str, files: FileVersions) -> None:
        """No copy of these files again (under the lock): a rebuild would ask for it, and fail the same way, in a
        loop. Files that change are new files, and are copied."""
        self._given_up[source] = files
        if self._wanted.get(source, (None,))[0] == files:
            del self._wanted[source]

    def _swap_in(self, source: str, files: FileVersions, name: str) -> None:
        with self._lock:
            if self._wanted.get(source, (None,))[0] != files:  # the files changed while copying
                self._con.execute(f"DROP TABLE IF EXISTS {name}")
                return
            old = self._ready.get(source)
            self._ready[source] = (name, files)
            try:
                self._on_ready()
            except duckdb.Error:  # the view could not be made over the copy: keep reading what was read before
                log.exception("index copy of %s not used", source)
                if old is None:
                    self._ready.pop(source)
                else:
                    self._ready[source] = old
                self._give_up(source, files)
                self._con.execute(f"DROP TABLE IF EXISTS {name}")
                self._on_ready()
                return
            if old is not None:
                self._con.execute(f"DROP TABLE IF EXISTS {old[0]}")


def _stop(running: dict[str, object]) -> None:
    """Interrupt the copy under way and wait for its thread (at exit, or when the engine goes)."""
    running["stop"] = True
    cursor, thread = running.get("cursor"), running.get("thread")
    if cursor is not None:
        with contextlib.suppress(duckdb.Error):
            cursor.interrupt()
    if isinstance(thread, threading.Thread) and thread is not threading.current_thread():
        thread.join(10)


def _newest_first(rows: dict[Path, int]) -> list[list[Path]]:
    """The files in chunks of about CHUNK_ROWS rows, newest day folder first (`index/<day>/<writer>.parquet`)."""
    chunks: list[list[Path]] = [[]]
    count = 0
    for path in sorted(rows, key=lambda p: (p.parent.name, p.name), reverse=True):
        if count >= CHUNK_ROWS:
            chunks.append([])
            count = 0
        chunks[-1].append(path)
        count += rows[path]
    return chunks
