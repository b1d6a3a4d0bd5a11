"""The Browse tab's data: index rows from every source in one pandas frame, filtered, sorted and paged.

The frame holds only index rows (one flat row per rollout, `rollouts.schema.COLUMNS`), never records, so 100k
rollouts take a few tens of MB. Its `source` column says where a row came from: `local` (this Space's folder,
not on the Hub yet or no Hub configured), `hub`, `local+hub` (both), or `upstream`. The record's own `source`
(`space` or `cli`) is kept as `played_in`.

`filter_mask`, `sort_rows`, `page_of` and `frame_from_tables` are pure; `BrowseIndex` owns the sources, reloads
the local folder cheaply when asked (at most once a second), loads the Hub sources in the background so a slow
Hub never holds up a page, and bumps `version` whenever the rows change.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from rollouts.convergence import convergence
from rollouts.leaderboard import leaderboard
from rollouts.query import PAGE_SIZE, SOURCES, Filters, filter_mask, page_of, sort_rows
from rollouts.schema import COLUMNS, TIERS, valid_episode_id
from rollouts.search import TranscriptIndex
from rollouts.sources import Loaded, SourceError
from rollouts.sources.hub import HubSource
from rollouts.sources.local import LocalSource
from rollouts.sources.upstream import UpstreamSource

log = logging.getLogger(__name__)

CATEGORIES = ("run", "model", "model_name", "task_id", "difficulty", "quay", "end_reason", "played_in",
              "env_url", "source")
LOCAL_EVERY_S = 1.0      # the folder is looked at (stat of its index files) at most this often
REMOTE_WAIT_S = 15.0
EXPORT_COLUMNS = [*COLUMNS, "played_in"]  # the index row, with `source` saying where the row came from     # how long an explicit Refresh or a deep link waits for the Hub sources


# -- the frame -------------------------------------------------------------------------------------------------


def frame_from_tables(tables: dict[str, pa.Table | None]) -> pd.DataFrame:
    """One frame from each source's index table (keys from SOURCES), one row per episode id.

    A rollout both in the local folder and on the Hub is one `local+hub` row (the local row, which is never older).
    Rows are sorted newest first, rows without a start time (upstream's) last.
    """
    tables = {name: t for name, t in tables.items() if t is not None and t.num_rows}
    local, hub = tables.get("local"), tables.get("hub")
    on_hub = None
    if local is not None and hub is not None:
        # In Arrow, not pandas: pandas' isin on Arrow strings walks the value list in Python (0.3 s per 100k ids).
        on_hub = pc.is_in(local.column("episode_id"), value_set=hub.column("episode_id")).to_numpy(
            zero_copy_only=False)
        tables["hub"] = hub.filter(pc.invert(pc.is_in(hub.column("episode_id"),
                                                       value_set=local.column("episode_id"))))
    parts = []
    for name in SOURCES:
        table = tables.get(name)
        if table is None:
            continue
        part = table.to_pandas().rename(columns={"source": "played_in"})
        part["source"] = name
        if name == "local" and on_hub is not None:
            part.loc[on_hub, "source"] = "local+hub"
        parts.append(part)
    if not parts:
        return _empty_frame()
    frame = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    frame = frame.drop_duplicates("episode_id", keep="first")
    return _finish(frame)


def _finish(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.assign(
        submitted=frame["submitted"].fillna(False).astype(bool),
        feasible=frame["feasible"].fillna(False).astype(bool),
        reward=pd.to_numeric(frame["reward"], errors="coerce").fillna(0.0),
        tokens=pd.to_numeric(frame["input_tokens"], errors="coerce").fillna(0)
        + pd.to_numeric(frame["output_tokens"], errors="coerce").fillna(0),
        date=frame["started"].str.slice(0, 10),
    )
    for column in CATEGORIES:
        frame[column] = frame[column].astype("category")
    frame = frame.sort_values("started", ascending=False, na_position="last", kind="stable")
    return frame.reset_index(drop=True)


def _empty_frame() -> pd.DataFrame:
    frame = pd.DataFrame({name: pd.Series(dtype=_DTYPES[kind]) for name, kind in COLUMNS.items()})
    return _finish(frame.rename(columns={"source": "played_in"}).assign(source=pd.Series(dtype="str")))


_DTYPES = {str: "str", int: "float64", float: "float64", bool: "bool"}


# -- the sources, together -------------------------------------------------------------------------------------


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


class BrowseIndex:
    """Every source's index rows as one frame, kept fresh cheaply; records fetched on demand."""

    def __init__(self, local: LocalSource, remotes: Sequence[HubSource | UpstreamSource] = (), *,
                 local_every_s: float = LOCAL_EVERY_S) -> None:
        self.local = local
        self.remotes = list(remotes)
        self.local_every_s = local_every_s
        self.version = 0
        self._tables: dict[str, pa.Table | None] = {}
        self._status: dict[str, SourceStatus] = {
            s.name: SourceStatus(s.name, s.label) for s in [local, *self.remotes]}
        self._frame = _empty_frame()
        self._lock = threading.RLock()
        self._local_checked = 0.0
        self._remote_thread: threading.Thread | None = None
        self._remote_done = threading.Event()
        self._remote_done.set()
        self._boards: OrderedDict[tuple, pd.DataFrame] = OrderedDict()
        self.transcripts = TranscriptIndex()
        self._reader: threading.Thread | None = None

    @classmethod
    def from_settings(cls, rollout_dir: Any, *, dataset: str | None = None, public_rollouts: str | None = None,
                      token: str | None = None, endpoint: str | None = None, cache_dir: Any = None) -> BrowseIndex:
        remotes: list[HubSource | UpstreamSource] = []
        options_ = {"endpoint": endpoint, "token": token, "cache_dir": cache_dir}
        if dataset:
            remotes.append(HubSource(dataset, **options_))
        if public_rollouts:
            remotes.append(UpstreamSource(public_rollouts, **options_))
        return cls(LocalSource(rollout_dir), remotes)

    # -- loading -----------------------------------------------------------------------------------------------

    @property
    def frame(self) -> pd.DataFrame:
        """The rows now, after a cheap look at the local folder (at most once per `local_every_s`)."""
        self.refresh_local()
        return self._frame

    def refresh_local(self, force: bool = False) -> bool:
        """Pick up rows added to the local folder; True when the rows changed."""
        with self._lock:
            now = time.monotonic()
            if not force and now - self._local_checked < self.local_every_s:
                return False
            self._local_checked = now
            loaded = self.local.load()
            self._record(loaded)
            if loaded.changed or "local" not in self._tables:
                self._tables["local"] = loaded.table
                self._rebuild()
                self._read_transcripts()
                return True
            return False

    def _read_transcripts(self) -> None:
        """Index the words of local records not indexed yet, in the background (the rows answer meanwhile)."""
        if self._reader is not None and self._reader.is_alive():
            return
        table = self._tables.get("local")
        if table is None or not table.num_rows:
            return
        wanted = [(e, p) for e, p in zip(table.column("episode_id").to_pylist(), table.column("path").to_pylist(),
                                         strict=True) if e not in self.transcripts]
        if not wanted:
            return

        def read() -> None:
            for episode_id, path in wanted:
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
            self._record(loaded)
            self._status[source.name].loading = False
            if loaded.changed or (loaded.table is not None and source.name not in self._tables):
                self._tables[source.name] = loaded.table
                self._rebuild()

    def _record(self, loaded: Loaded) -> None:
        status = self._status[loaded.name]
        status.rows, status.error, status.note = loaded.rows, loaded.error, loaded.note
        status.skipped = loaded.skipped
        if loaded.table is not None:
            status.loaded_at = loaded.at

    def _rebuild(self) -> None:
        self._frame = frame_from_tables(self._tables)
        self.version += 1
        self._boards.clear()

    def statuses(self) -> list[SourceStatus]:
        with self._lock:
            return [SourceStatus(**vars(s)) for s in self._status.values()]

    @property
    def loading(self) -> bool:
        return not self._remote_done.is_set()

    # -- queries -----------------------------------------------------------------------------------------------

    def query(self, filters: Filters, *, sort: str = "started", descending: bool = True, page: int = 1,
              size: int = PAGE_SIZE) -> tuple[pd.DataFrame, int, int, int]:
        """(the page's rows, how many rows match, the page number used, the number of pages)."""
        frame = self.frame
        matched = frame[filter_mask(frame, filters, self.transcripts)]
        rows, page, pages = page_of(sort_rows(matched, sort, descending), page, size)
        return rows, len(matched), page, pages

    def board(self, filters: Filters, *, same_tasks: bool = False) -> pd.DataFrame:
        """The leaderboard over the filtered rows (remembered per filter set until the rows change)."""
        frame = self.frame
        # A search's answer grows as transcripts are read, so their count is part of its key.
        key = (self.version, filters.key(), same_tasks, len(self.transcripts) if filters.search else 0)
        with self._lock:
            cached = self._boards.get(key)
        if cached is not None:
            return cached
        matched = frame[filter_mask(frame, filters, self.transcripts)]
        matched = matched.assign(model=matched["model"].astype("str"), task_id=matched["task_id"].astype("str"),
                                 difficulty=matched["difficulty"].astype("str"))
        board = leaderboard(matched, same_tasks=same_tasks)
        with self._lock:
            self._boards[key] = board
            while len(self._boards) > 64:
                self._boards.popitem(last=False)
        return board

    def matching(self, filters: Filters) -> pd.DataFrame:
        """Every row that passes the filters and the search, newest first."""
        frame = self.frame
        return frame[filter_mask(frame, filters, self.transcripts)]

    def heatmap(self, filters: Filters) -> Heatmap:
        """Mean reward per task and model over the filtered rows, tasks grouped by tier; each cell knows its best
        rollout (highest reward, the newest of equals) so a click can open it."""
        return heatmap_of(self.matching(filters))

    def export(self, filters: Filters, folder: Path, *, fmt: str, sort: str = "started",
               descending: bool = True) -> Path:
        """The filtered rows (every index column) as a CSV or Parquet file in `folder`."""
        if fmt not in ("csv", "parquet"):
            raise ValueError(f"export format must be csv or parquet, not {fmt!r}")
        rows = sort_rows(self.matching(filters), sort, descending)
        columns = [c for c in EXPORT_COLUMNS if c in rows.columns]
        table = pa.Table.from_pylist(records_of(rows, columns))
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"rollouts-{len(rows)}-{time.strftime('%Y%m%dT%H%M%S')}.{fmt}"
        if fmt == "csv":
            pa_csv.write_csv(table, path)
        else:
            pq.write_table(table, path)
        return path

    def row(self, episode_id: str) -> dict | None:
        frame = self.frame
        hits = np.flatnonzero((frame["episode_id"] == episode_id).to_numpy())
        if not len(hits):
            return None
        return _plain(frame.iloc[int(hits[0])].to_dict())

    def same_task(self, task_id: str, *, exclude: str | None = None, limit: int = 200) -> pd.DataFrame:
        """Other rollouts of one task, best reward first (for picking a comparison)."""
        frame = self.frame
        rows = frame[(frame["task_id"] == task_id).to_numpy() & (frame["episode_id"] != exclude).to_numpy()]
        return rows.sort_values("reward", ascending=False, kind="stable").head(limit)

    def convergence(self, filters: Filters) -> pd.DataFrame:
        """rollouts.convergence's curves over the filtered rows (remembered per filter set until the rows change);
        `viewer.convergence.convergence_figure(curves=...)` draws them."""
        frame = self.frame
        key = ("convergence", self.version, filters.key(), len(self.transcripts) if filters.search else 0)
        with self._lock:
            cached = self._boards.get(key)
        if cached is not None:
            return cached
        curves = convergence(frame[filter_mask(frame, filters, self.transcripts)])
        with self._lock:
            self._boards[key] = curves
            while len(self._boards) > 64:
                self._boards.popitem(last=False)
        return curves

    def record(self, episode_id: str, *, wait: float = REMOTE_WAIT_S) -> tuple[dict, dict]:
        """(record, index row) of a rollout from whichever source has it.

        A local file is found even before its index row is read; a Hub or upstream rollout waits up to `wait`
        seconds for a load in progress (a deep link opened right after the Space started).
        """
        episode_id = (episode_id or "").strip()
        if not valid_episode_id(episode_id):
            raise RolloutNotFound("That rollout id is malformed: ids are 1-64 letters, digits, '-' or '_'.")
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
        return self._fetch(row), row

    def _fetch(self, row: dict) -> dict:
        record = self._fetch_from_source(row)
        self.transcripts.add(str(row.get("episode_id")), record)
        return record

    def _fetch_from_source(self, row: dict) -> dict:
        source = str(row.get("source") or "local")
        if "local" in source.split("+"):
            try:
                return self.local.record(row)
            except SourceError:
                if source == "local":
                    raise
        for remote in self.remotes:
            if remote.name in source.split("+"):
                return remote.record(row)
        raise SourceError(f"the source of {row.get('episode_id')} ({source}) is not configured here")

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


@dataclass
class Heatmap:
    tasks: list[tuple[str, str]]            # (tier, task id), tiers easiest first, then task id
    models: list[str]                       # most rollouts first
    mean: list[list[float | None]]          # [task][model]
    count: list[list[int]]
    best: list[list[str | None]]            # the episode id a click on the cell opens


def heatmap_of(rows: pd.DataFrame) -> Heatmap:
    if rows.empty:
        return Heatmap([], [], [], [], [])
    rows = rows.assign(task_id=rows["task_id"].astype("str"), model=rows["model"].astype("str"),
                       difficulty=rows["difficulty"].astype("str"))
    groups = rows.groupby(["task_id", "model"], sort=False, observed=True)
    stats = groups["reward"].agg(["mean", "size"])
    # The best rollout of a cell: highest reward; rows are newest first, so the first of equals is the newest.
    best = rows.loc[groups["reward"].idxmax().to_numpy(), ["task_id", "model", "episode_id"]]
    best_of = {(r.task_id, r.model): r.episode_id for r in best.itertuples()}
    rank = {tier: i for i, tier in enumerate(TIERS)}
    tiers = rows.groupby("task_id", sort=False)["difficulty"].first()
    tasks = sorted(((str(tiers[t]), t) for t in tiers.index), key=lambda p: (rank.get(p[0], len(rank)), p[1]))
    models = list(rows["model"].value_counts().index)
    cells = stats.to_dict("index")
    mean = [[_plain_number(cells.get((t, m), {}).get("mean")) for m in models] for _, t in tasks]
    count = [[int(cells.get((t, m), {}).get("size", 0)) for m in models] for _, t in tasks]
    best_ids = [[best_of.get((t, m)) for m in models] for _, t in tasks]
    return Heatmap(tasks, models, mean, count, best_ids)


def _plain_number(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _plain(row: dict) -> dict:
    """A frame row as JSON-ready Python values (NaN as None)."""
    out = {}
    for key, value in row.items():
        if hasattr(value, "item") and not isinstance(value, str):
            value = value.item()
        if isinstance(value, float) and math.isnan(value):
            value = None
        out[key] = value
    return out


def records_of(frame: pd.DataFrame, columns: Iterable[str]) -> list[dict]:
    """Frame rows as plain dicts of the given columns (the API's answer)."""
    return [_plain(r) for r in frame[list(columns)].to_dict("records")]
