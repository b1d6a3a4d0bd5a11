"""Live episodes of this server process, for the viewer's `/api/episodes` routes (PORTSIM_SPEC §6.8).

Each environment session owns its current `Episode` and updates it as tools are called; the store only keeps
references to the most recent ones (200), so the viewer can follow an episode while it runs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

MAX_EPISODES = 200


@dataclass
class Episode:
    """One episode's counters, outcome and check/submit steps."""

    episode_id: str
    task: dict[str, Any]
    started: str = field(default_factory=lambda: datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    checks_used: int = 0
    tool_calls: int = 0
    step_count: int = 0
    done: bool = False
    end_reason: str | None = None
    reward: float | None = None
    grade: dict[str, Any] | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)

    @property
    def task_id(self) -> str:
        return self.task["task_id"]

    def summary(self) -> dict[str, Any]:
        """The episode without its steps (the `/api/episodes` row)."""
        return {"episode_id": self.episode_id, "task_id": self.task_id, "split": self.task.get("split"),
                "started": self.started, "done": self.done, "end_reason": self.end_reason,
                "reward": self.reward, "checks": self.checks_used, "tool_calls": self.tool_calls}

    def detail(self) -> dict[str, Any]:
        """The episode with its steps (the `/api/episodes/{id}` body)."""
        return {"episode_id": self.episode_id, "task_id": self.task_id, "started": self.started,
                "done": self.done, "end_reason": self.end_reason, "steps": list(self.steps),
                "grade": self.grade}


class EpisodeStore:
    """The last `limit` episodes, newest last; safe to use from every session's thread."""

    def __init__(self, limit: int = MAX_EPISODES) -> None:
        self._limit = limit
        self._episodes: OrderedDict[str, Episode] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, episode: Episode) -> None:
        with self._lock:
            self._episodes.pop(episode.episode_id, None)
            self._episodes[episode.episode_id] = episode
            while len(self._episodes) > self._limit:
                self._episodes.popitem(last=False)

    def get(self, episode_id: str) -> Episode | None:
        with self._lock:
            return self._episodes.get(episode_id)

    def recent(self) -> list[Episode]:
        """Newest first."""
        with self._lock:
            return list(reversed(self._episodes.values()))


STORE = EpisodeStore()
"""The process-wide store every environment instance registers its episodes in."""
