"""The few records Browse has open: the open rollout, a compare partner, the drafts the slider steps through.

Fetching a record may mean a Hub download; a small cache (most recent first) keeps the slider and compare from
fetching the same ones again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from rollouts.index import REMOTE_WAIT_S, BrowseIndex

RECORDS_KEPT = 16


class RecordCache:
    def __init__(self, index: BrowseIndex) -> None:
        self.index = index
        self._cache: OrderedDict[str, tuple[dict, dict]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, episode_id: str, wait: float = REMOTE_WAIT_S) -> tuple[dict, dict]:
        """(record, index row); RolloutNotFound or SourceError (both with a message for the page) otherwise."""
        episode_id = (episode_id or "").strip()
        with self._lock:
            if episode_id in self._cache:
                self._cache.move_to_end(episode_id)
                return self._cache[episode_id]
        found = self.index.record(episode_id, wait=wait)
        with self._lock:
            self._cache[episode_id] = found
            while len(self._cache) > RECORDS_KEPT:
                self._cache.popitem(last=False)
        return found
