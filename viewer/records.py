"""The one door that loads a rollout by id, and the few records the page has open.

`RecordCache.find` is how every part of the viewer opens an episode by id (Browse's rollout and its compare
partner, a share page, an arena's two sides, a Run link, the API): the episode this process is running (the live
registry, read from its events so far), else the stored rollout, the local folder's before the Hub's (the
archive's precedence). Fetching a stored record may mean a Hub download; a small cache (most recent first) keeps the
slider, compare and the share pages from fetching the same ones again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any

from rollouts.archive import REMOTE_WAIT_S, Archive, RolloutNotFound
from rollouts.record import Record

RECORDS_KEPT = 16


class Found:
    """An episode found by id: the run while this process holds it, and its record and index row, looked up once
    asked for (a stored one may mean a Hub download)."""

    def __init__(self, episode_id: str, run: Any, stored: Callable[[], tuple[Record, Mapping[str, Any]]]) -> None:
        self.episode_id = episode_id
        self.run = run  # live.runs.EpisodeRun: running, or finished and still held by the registry; else None
        self._stored = stored

    @property
    def running(self) -> bool:
        return self.run is not None and not self.run.finished

    @cached_property
    def _found(self) -> tuple[Record, Mapping[str, Any]]:
        if self.running:
            return Record.from_events(list(self.run.events)), {}
        try:
            return self._stored()
        except RolloutNotFound:
            if self.run is None:
                raise
            return Record(self.run.record), {}  # finished here a moment ago, not stored yet

    @property
    def record(self) -> Record:
        """The episode's record: as it stands while it runs, else stored; RolloutNotFound or SourceError."""
        return self._found[0]

    @property
    def row(self) -> Mapping[str, Any]:
        """The index row that found the stored record ({} for an episode of this process not stored yet)."""
        return self._found[1]


class RecordCache:
    def __init__(self, archive: Archive, running: Callable[[str], Any] | None = None) -> None:
        self.archive = archive
        self.running = running  # the live registry's lookup by id (live.runs.RunRegistry.get)
        self._cache: OrderedDict[str, tuple[Record, dict]] = OrderedDict()
        self._lock = threading.Lock()

    def find(self, episode_id: str, wait: float = REMOTE_WAIT_S, *, running: bool = True) -> Found:
        """The episode with this id: running here, else stored (local, then remote); its record is looked up when
        first asked for (RolloutNotFound or SourceError then, both with a message for the page). `running=False`:
        stored rollouts only (what Browse and its API show)."""
        episode_id = (episode_id or "").strip()
        run = self.running(episode_id) if running and self.running is not None else None
        return Found(episode_id, run, lambda: self._stored(episode_id, wait))

    def _stored(self, episode_id: str, wait: float) -> tuple[Record, dict]:
        with self._lock:
            if episode_id in self._cache:
                self._cache.move_to_end(episode_id)
                return self._cache[episode_id]
        record, row = self.archive.record(episode_id, wait=wait)
        found = (Record(record), row)
        with self._lock:
            self._cache[episode_id] = found
            while len(self._cache) > RECORDS_KEPT:
                self._cache.popitem(last=False)
        return found
