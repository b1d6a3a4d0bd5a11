"""The few records the page has open: Browse's rollout and its compare partner, a share page, an arena's two sides.

Fetching a record may mean a Hub download; a small cache (most recent first) keeps the slider, compare and the share
pages from fetching the same ones again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from rollouts.archive import REMOTE_WAIT_S, Archive

RECORDS_KEPT = 16


class RecordCache:
    def __init__(self, archive: Archive) -> None:
        self.archive = archive
        self._cache: OrderedDict[str, tuple[dict, dict]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, episode_id: str, wait: float = REMOTE_WAIT_S) -> tuple[dict, dict]:
        """(record, index row); RolloutNotFound or SourceError (both with a message for the page) otherwise."""
        episode_id = (episode_id or "").strip()
        with self._lock:
            if episode_id in self._cache:
                self._cache.move_to_end(episode_id)
                return self._cache[episode_id]
        found = self.archive.record(episode_id, wait=wait)
        with self._lock:
            self._cache[episode_id] = found
            while len(self._cache) > RECORDS_KEPT:
                self._cache.popitem(last=False)
        return found
