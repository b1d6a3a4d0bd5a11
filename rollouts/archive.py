"""The archive: the read side of every rollout there is, for Browse, the share pages and the commands that only read.

Rows are index rows (one flat row per rollout), never records, read by the index engine (rollouts.index.engine)
from the local folder's index files in place and from the Hub sources' tables; a record is fetched from whichever
source has it only when someone opens it. A row's `source` says where it came from: `local` (this Space's folder),
`hub`, `local+hub` (both), or `upstream`; the record's own `source` (`space` or `cli`) is kept as `played_in`.

`Archive` looks at the local folder cheaply when asked (a stat of its index files, at most once a second), loads
the Hub sources in the background so a slow Hub never holds up a page, and bumps `version` whenever the rows
change. It never writes to the folder: `Archive.of_folder(root)` is what `python -m agent board` reads.

The flags on steps (rollouts.annotations) are the local folder's, read with the same cheap look: the shown ones (not
hidden) go to the engine's `flags` table, for the "flagged" filter and a page's `flags` count, and `flags_of` gives
one rollout's, for its pages.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from rollouts import board as boards
from rollouts import board_trust
from rollouts import ratings as arena_ratings
from rollouts.annotations import read_flags
from rollouts.board_trust import Standard, Trust
from rollouts.convergence import convergence
from rollouts.filters import PAGE_SIZE, Filters, order_by
from rollouts.index.copies import COPY_ROWS
from rollouts.index.engine import HOLD_ROWS, IndexEngine
from rollouts.index.format import index_files
from rollouts.layout import ANNOTATION_GLOB, RECORDS_DIR
from rollouts.schema import COLUMNS, valid_episode_id
from rollouts.search import TranscriptWords
from rollouts.sources import Loaded, SourceError
from rollouts.sources.hub import HubSource
from rollouts.sources.local import LocalSource
from rollouts.sources.upstream import UpstreamSource

log = logging.getLogger(__name__)

CONVERGENCE_ROWS = 20_000  # the convergence curves' rows at most (an even sample past that)
LOCAL_EVERY_S = 1.0      # the folder is looked at (stat of its index files) at most this often
REMOTE_WAIT_S = 15.0
EXPORT_COLUMNS = [*COLUMNS, "played_in"]  # the index row, with `source` saying where the row came from
# A spreadsheet runs a cell that starts with one of these as a formula (OWASP "CSV injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


@dataclass
class SourceStatus:
    name: str
    label: str
    rows: int = 0
    error: str | None = None
    note: str | None = None
    loading: bool = False
    loaded_at: float | None = None
    skipped: int = 0  # index lines left out (unreadable, or pointing outside the layout)


class RolloutNotFound(LookupError):
    """No source has the rollout (or the id cannot name one); the message is for the page."""


class Archive:
    """Every source's index rows as one view, kept fresh cheaply; records fetched on demand."""

    def __init__(self, local: LocalSource, remotes: Sequence[HubSource | UpstreamSource] = (), *,
                 local_every_s: float = LOCAL_EVERY_S, copy_rows: int = COPY_ROWS, hold_rows: int = HOLD_ROWS) -> None:
        self.local = local
        self.remotes = list(remotes)
        # What a verified model is played under (rollouts.board_trust); set by whoever opens the archive, since its
        # values are the agent's and the catalog's (catalog.standard). None: no board line is marked verified.
        self.standard: Standard | None = None
        self.local_every_s = local_every_s
        self.version = 0
        self._tables: dict[str, pa.Table | None] = {}
        self.engine = IndexEngine(copy_rows=copy_rows, hold_rows=hold_rows)
        self.engine.on_change = self._changed
        self._local_files: tuple | None = None  # (path, inode, size, mtime) of each local index file, last look
        self._flag_files: tuple | None = None  # the same of each annotation file
        self._flags: dict[str, list[dict]] = {}  # episode id -> its flags shown (not hidden), in step order
        self._status = {s.name: SourceStatus(s.name, s.label) for s in [local, *self.remotes]}
        self._lock = threading.RLock()
        self._local_checked = 0.0
        self._remote_thread: threading.Thread | None = None
        self._remote_done = threading.Event()
        self._remote_done.set()
        self._answers: OrderedDict[tuple, Any] = OrderedDict()
        self.transcripts = TranscriptWords()
        self._reader: threading.Thread | None = None
        # The episodes not public yet (an undecided random match's, live.match_runs): no query or record shows them.
        self.withheld: Callable[[], Collection[str]] = frozenset

    @classmethod
    def from_settings(cls, rollout_dir: Any, *, dataset: str | None = None, public_rollouts: str | None = None,
                      token: str | None = None, endpoint: str | None = None, cache_dir: Any = None) -> Archive:
        remotes: list[HubSource | UpstreamSource] = []
        options = {"endpoint": endpoint, "token": token, "cache_dir": cache_dir}
        if dataset:
            remotes.append(HubSource(dataset, **options))
        if public_rollouts:
            remotes.append(UpstreamSource(public_rollouts, **options))
        return cls(LocalSource(rollout_dir), remotes)

    @classmethod
    def of_folder(cls, root: Path) -> Archive:
        """A rollout folder alone, read now (what commands that only read open; nothing is written)."""
        archive = cls(LocalSource(root))
        archive.refresh_local(force=True)
        return archive

    # -- loading -----------------------------------------------------------------------------------------------

    def total(self) -> int:
        """How many rows there are (after a cheap look at the local folder)."""
        self.refresh_local()
        return self._remembered(("total", self.version), self.engine.count_where)

    def options(self) -> dict[str, list[str]]:
        """The values each choice filter offers (by filter name): what the rows hold."""
        self.refresh_local()
        return self.engine.options()

    def _look(self, paths: Iterable[Path] | None = None) -> tuple:
        seen = []
        for path in index_files(self.local.root) if paths is None else paths:
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            seen.append((path, st.st_ino, st.st_size, st.st_mtime_ns))
        return tuple(seen)

    def refresh_local(self, force: bool = False) -> bool:
        """Pick up rows added to the local folder; True when the rows changed."""
        with self._lock:
            now = time.monotonic()
            if not force and now - self._local_checked < self.local_every_s:
                return False
            self._local_checked = now
            flagged = self._look_flags()
            files = self._look()
            if files == self._local_files:
                if flagged:
                    self._changed()
                return flagged
            self._local_files = files
            changed = self.engine.set_files("local", [f[0] for f in files])
            self._count("local")
            self._status["local"].loaded_at = time.time()
            if changed:
                self._changed()
            self._read_transcripts()
            return changed

    def _look_flags(self) -> bool:
        """Read the folder's flags again when their files changed; True when the flags shown changed."""
        files = self._look(sorted(self.local.root.glob(ANNOTATION_GLOB)))
        if files == self._flag_files:
            return False
        self._flag_files = files
        shown: dict[str, list[dict]] = {}
        for row in read_flags(self.local.root):
            if not row["hidden"]:
                shown.setdefault(row["episode_id"], []).append(row)
        for rows in shown.values():
            rows.sort(key=lambda r: (r["step_kind"], r["step"], r["time"]))
        self._flags = shown
        return self.engine.set_flags([(r["episode_id"], r["label"]) for rows in shown.values() for r in rows])

    def flags_of(self, episode_id: str, *, refresh: bool = True) -> list[dict]:
        """The flags shown on one rollout's steps (none while it is withheld), drafts then turns, each in order;
        `refresh` False: as last read, without a look at the folder (the flags this process adds are read at once)."""
        if refresh:
            self.refresh_local()
        if episode_id in self.withheld():
            return []
        with self._lock:
            return list(self._flags.get(episode_id, ()))

    def _count(self, name: str) -> None:
        status = self._status[name]
        status.rows, status.skipped = self.engine.counts.get(name, 0), self.engine.skipped.get(name, 0)

    def _read_transcripts(self) -> None:
        """Index the words of local records not indexed yet, in the background (the rows answer meanwhile)."""
        if self._reader is not None and self._reader.is_alive():
            return
        folder = self.local.root / RECORDS_DIR

        def read() -> None:
            # The record files on disk, not the index rows: a folder of a million rows without their records
            # (a copy of the index) costs one listing, not a million failed opens.
            for episode_id, path in _record_files(folder):
                if episode_id in self.transcripts:
                    continue
                try:
                    self.transcripts.add(episode_id, self.local.record({"episode_id": episode_id, "path": path}))
                except SourceError:
                    continue  # a record that cannot be read is reported when someone opens it

        self._reader = threading.Thread(target=read, name="browse-transcripts", daemon=True)
        self._reader.start()

    def start_remote(self) -> bool:
        """Load the Hub sources in the background (unless a load is running); False when there are none."""
        if not self.remotes:
            return False
        with self._lock:
            if self._remote_thread is not None and self._remote_thread.is_alive():
                return True
            for source in self.remotes:
                self._status[source.name].loading = True
            self._remote_done.clear()
            self._remote_thread = threading.Thread(target=self._load_remotes, name="browse-remote", daemon=True)
            self._remote_thread.start()
            return True

    def wait_remote(self, timeout: float = REMOTE_WAIT_S) -> bool:
        """Wait for a background load; True when none is running any more."""
        return self._remote_done.wait(timeout)

    def refresh(self, *, remote: bool = True, wait: float | None = None) -> None:
        """Local now; the Hub sources in the background, waiting up to `wait` seconds for them."""
        self.refresh_local(force=True)
        if remote and self.start_remote() and wait:
            self.wait_remote(wait)

    def _load_remotes(self) -> None:
        try:
            threads = [threading.Thread(target=self._load_one, args=(s,), daemon=True) for s in self.remotes]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            self._remote_done.set()

    def _load_one(self, source: HubSource | UpstreamSource) -> None:
        try:
            loaded = source.load()
        except Exception as exc:  # a bug in a loader must not take the page down: say so and go on
            log.exception("loading %s failed", source.label)
            loaded = Loaded(source.name, source.label, error=f"could not be read ({type(exc).__name__})",
                            changed=False)
        with self._lock:
            status = self._status[source.name]
            status.rows, status.error, status.note = loaded.rows, loaded.error, loaded.note
            status.skipped, status.loading = loaded.skipped, False
            if loaded.table is not None:
                status.loaded_at = loaded.at
            if loaded.changed or (loaded.table is not None and source.name not in self._tables):
                self._tables[source.name] = loaded.table
                self.engine.set_table(source.name, loaded.table)
                self._changed()

    def _changed(self) -> None:
        with self._lock:
            self.version += 1
            self._answers.clear()

    def statuses(self) -> list[SourceStatus]:
        with self._lock:
            return [SourceStatus(**vars(s)) for s in self._status.values()]

    @property
    def loading(self) -> bool:
        return not self._remote_done.is_set()

    # -- queries -----------------------------------------------------------------------------------------------

    def where(self, filters: Filters) -> tuple[str, list[Any]]:
        """The SQL condition of the filters and the search (after a cheap look at the local folder)."""
        self.refresh_local()
        return self.engine.where(filters, self.transcripts, self.withheld())

    def _remembered(self, key: tuple, make: Any) -> Any:
        """An answer remembered per key until the rows change (64 at most)."""
        with self._lock:
            if key in self._answers:
                return self._answers[key]
        value = make()
        with self._lock:
            self._answers[key] = value
            while len(self._answers) > 64:
                self._answers.popitem(last=False)
        return value

    def _key(self, *parts: Any, filters: Filters) -> tuple:
        # A search's answer grows as transcripts are read, so their count is part of its key.
        return (*parts, self.version, filters.key(), len(self.transcripts) if filters.search else 0,
                frozenset(self.withheld()))

    def query(self, filters: Filters, *, sort: str = "started", descending: bool = True, page: int = 1,
              size: int = PAGE_SIZE) -> tuple[pa.Table, int, int, int]:
        """(the page's rows, how many rows match, the page number used, the number of pages)."""
        self.refresh_local()
        return self.engine.page(filters, self.transcripts, sort=sort, descending=descending, page=page, size=size,
                                hidden=self.withheld())

    def board(self, filters: Filters, *, same_tasks: bool = False, run: str | None = None) -> list[dict]:
        """The leaderboard over the filtered rows (rollouts.board) with the arena's figures joined (the ratings
        over the same rows, every task two models both played whatever `same_tasks` says), remembered per filter
        set until rows change. `run`: only that run's rows (`python -m agent board --run`)."""
        where, params = self._where_run(filters, run)
        return self._remembered(self._key("board", same_tasks, run, filters=filters),
                                lambda: boards.board(self.engine, where, params, same_tasks=same_tasks,
                                                     rated=self.ratings(filters, run=run), standard=self.standard))

    def trust(self, filters: Filters, *, same_tasks: bool = False, run: str | None = None) -> dict[str, Trust]:
        """Each model's reproducibility card (rollouts.board_trust) over the board's rows; empty without a
        standard."""
        if self.standard is None:
            return {}
        where, params = self._where_run(filters, run)
        battles = {r.model: r.battles for r in self.ratings(filters, run=run)}
        head = boards.matched(where, same_tasks, None)
        return self._remembered(self._key("trust", same_tasks, run, filters=filters),
                                lambda: board_trust.trust(self.engine, head, params, self.standard, battles))

    def ratings(self, filters: Filters, *, run: str | None = None) -> list[arena_ratings.Rating]:
        """The arena ratings (rollouts.ratings) over the filtered rows: one query of task x model cells in the
        engine, then the Bradley–Terry fit; remembered per filter set until the rows change, as the board is."""
        return self._remembered(self._key("ratings", run, filters=filters),
                                lambda: arena_ratings.ratings(self.cells(filters, run=run)))

    def cells(self, filters: Filters, *, run: str | None = None) -> dict[str, Any]:
        """The task x model cells (rollouts.ratings.cells_sql) over the filtered rows: what the ratings are fitted
        to and the battles (rollouts.ratings.battles) are made of."""
        where, params = self._where_run(filters, run)
        with self.engine.lock:
            return self.engine.sql(arena_ratings.cells_sql(where), params).fetchnumpy()

    def _where_run(self, filters: Filters, run: str | None) -> tuple[str, list[Any]]:
        where, params = self.where(filters)
        return (f"({where}) AND run = ?", [*params, run]) if run is not None else (where, params)

    def heatmap(self, filters: Filters) -> boards.Heatmap:
        """Mean reward per task and model over the filtered rows; each cell knows its best rollout."""
        where, params = self.where(filters)
        return self._remembered(self._key("heatmap", filters=filters),
                                lambda: boards.heatmap(self.engine, where, params))

    def matching(self, filters: Filters, *, sort: str = "started", descending: bool = True) -> pa.Table:
        """Every row that passes the filters and the search, newest first (or in the order asked)."""
        where, params = self.where(filters)
        return self.engine.fetch(where, params, order=order_by(sort, descending))

    def convergence(self, filters: Filters) -> pa.Table:
        """rollouts.convergence's curves over the filtered rows (remembered per filter set until the rows change).
        Past CONVERGENCE_ROWS rows they are drawn from an even sample of them (by id hash, the same sample every
        time): quartiles of a large sample are the quartiles of the whole to the figure's eye."""
        where, params = self.where(filters)

        def curves() -> pa.Table:
            where_costs = f"({where}) AND check_costs IS NOT NULL"
            count = self.engine.count_where(where_costs, params)
            step = max(1, math.ceil(count / CONVERGENCE_ROWS))
            sample = f"{where_costs} AND hash(episode_id) % {step} = 0" if step > 1 else where_costs
            return convergence(self.engine.fetch(sample, params, columns="model, check_costs, optimal_cost, "
                                                 "naive_cost, grp"))

        return self._remembered(self._key("convergence", filters=filters), curves)

    def export(self, filters: Filters, folder: Path, *, fmt: str, sort: str = "started",
               descending: bool = True) -> Path:
        """The filtered rows (every index column) as a CSV or Parquet file in `folder`; in a CSV a text cell that a
        spreadsheet would run as a formula starts with a quote instead."""
        if fmt not in ("csv", "parquet"):
            raise ValueError(f"export format must be csv or parquet, not {fmt!r}")
        rows = self.matching(filters, sort=sort, descending=descending)
        table = rows.select([c for c in EXPORT_COLUMNS if c in rows.column_names])
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"rollouts-{table.num_rows}-{time.strftime('%Y%m%dT%H%M%S')}.{fmt}"
        if fmt == "csv":
            pa_csv.write_csv(inert_cells(table), path)
        else:
            pq.write_table(table, path)
        return path

    def row(self, episode_id: str) -> dict | None:
        self.refresh_local()
        rows = self.engine.fetch("episode_id = ?", [episode_id], limit=1).to_pylist()
        return _plain(rows[0]) if rows else None

    def same_task(self, task_id: str, *, exclude: str | None = None, limit: int = 200) -> list[dict]:
        """Other rollouts of one task, best reward first (for picking a comparison)."""
        self.refresh_local()
        hidden = set(self.withheld())
        rows = self.engine.fetch("task_id = ? AND episode_id IS DISTINCT FROM ?", [task_id, exclude],
                                 order=order_by("reward"), limit=limit + len(hidden)).to_pylist()
        return [_plain(r) for r in rows if r["episode_id"] not in hidden][:limit]

    def record(self, episode_id: str, *, wait: float = REMOTE_WAIT_S) -> tuple[dict, dict]:
        """(record, index row) of a rollout from whichever source has it.

        A local file is found even before its index row is read; a Hub or upstream rollout waits up to `wait`
        seconds for a load in progress (a deep link opened right after the Space started).
        """
        episode_id = (episode_id or "").strip()
        if not valid_episode_id(episode_id):
            raise RolloutNotFound("That rollout id is malformed: ids are 1-64 letters, digits, '-' or '_'.")
        if episode_id in self.withheld():  # as any id no source has
            raise RolloutNotFound(f"No rollout `{episode_id}` in {self._where()}.")
        row = self.row(episode_id)
        if row is None and self.local.locate(episode_id) is not None:
            self.refresh_local(force=True)
            row = self.row(episode_id) or {"episode_id": episode_id, "source": "local"}
        if row is None and self.remotes:
            if not self.loading and not any(s.loaded_at for s in self.statuses() if s.name != "local"):
                self.start_remote()
            if self.loading:
                self.wait_remote(wait)
            row = self.row(episode_id)
        if row is None:
            raise RolloutNotFound(f"No rollout `{episode_id}` in {self._where()}.")
        record = self._fetch(row)
        self.transcripts.add(episode_id, record)
        return record, row

    def _fetch(self, row: dict) -> dict:
        """The record of a row from its source; a record that is not the row's own episode is damaged."""
        source = str(row.get("source") or "local")
        record = None
        if "local" in source.split("+"):
            try:
                record = self.local.record(row)
            except SourceError:
                if source == "local":
                    raise
        for remote in self.remotes:
            if record is None and remote.name in source.split("+"):
                record = remote.record(row)
        if record is None:
            raise SourceError(f"the source of {row.get('episode_id')} ({source}) is not configured here")
        if record.get("episode_id") != row.get("episode_id"):
            raise SourceError(f"The record of {row.get('episode_id')} is damaged: it names another episode.")
        return record

    def _where(self) -> str:
        parts = []
        for status in self.statuses():
            text = status.label
            if status.error:
                text += f" (unavailable: {status.error})"
            elif status.loading:
                text += " (still loading)"
            parts.append(text)
        return ", ".join(parts)


def inert_cells(table: pa.Table) -> pa.Table:
    """The table with every text cell that starts like a formula prefixed with a quote."""
    for i, field in enumerate(table.schema):
        if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            column = table.column(i)
            risky = pc.fill_null(pc.starts_with(column, FORMULA_STARTS[0]), False)
            for start in FORMULA_STARTS[1:]:
                risky = pc.or_(risky, pc.fill_null(pc.starts_with(column, start), False))
            table = table.set_column(i, field, pc.if_else(risky, pc.binary_join_element_wise("'", column, ""), column))
    return table


def _record_files(folder: Path) -> Iterable[tuple[str, str]]:
    """(episode id, record path) of every record file under `rollouts/<day>/`."""
    if not folder.is_dir():
        return
    for day in sorted(os.scandir(folder), key=lambda e: e.name):
        if not day.is_dir():
            continue
        for entry in os.scandir(day.path):
            if entry.name.endswith(".json"):
                episode_id = entry.name[:-5]
                if valid_episode_id(episode_id):
                    yield episode_id, f"{RECORDS_DIR}/{day.name}/{entry.name}"


def _plain(row: dict) -> dict:
    """A row as JSON-ready Python values (NaN as None)."""
    return {key: None if isinstance(value, float) and math.isnan(value) else value for key, value in row.items()}
