"""How many rollouts one visitor may save in an hour: one sliding window that model runs (live/runs.py) and
hand-played episodes (live/hand_play.py) both draw on, so a visitor's Run, Play and API calls share one budget.
The same window, with its own count, caps what else a visitor adds by the hour: arena votes (live/match_runs.py)
and flags on a step (live/flags.py, per signed-in account), each refusal saying what it counts.

Every rollout is public, so without a budget one address saved 178 `human` rollouts in 22 s. A slot is taken
when an episode starts, before anything runs (a refusal comes at once, with the wait), and given back when the
episode ends without a saved rollout (nothing played, a server that was never reached). The caps on episodes at
once stay with each registry; this counts what a visitor adds to the dataset. A start that plays two episodes (a
match between two models) takes two slots at once.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable

WINDOW_S = 3600.0
_SWEEP_EVERY = 256  # takes between two sweeps of visitors whose window has emptied


class QuotaExceeded(RuntimeError):
    """A visitor's rollouts in the last hour are at the cap; the message says when the next may start."""


class SaveQuota:
    """At most `per_hour` rollouts per visitor in any `window_s` (0: no cap). Thread-safe. `noun` and `done` name
    what is counted in a refusal (`rollout`, `saved`: "You have saved 3 rollouts in the last hour")."""

    def __init__(self, per_hour: int, *, window_s: float = WINDOW_S,
                 clock: Callable[[], float] = time.monotonic, noun: str = "rollout", done: str = "saved",
                 counted: str = "visitor, every tab and API client of one address or account together",
                 then: str = "The next one can start") -> None:
        self.per_hour, self.window_s, self._clock = per_hour, window_s, clock
        self.noun, self.done, self.counted, self.then = noun, done, counted, then
        self._taken: dict[str, deque[float]] = {}
        self._lock = threading.Lock()
        self._takes = 0

    def take(self, visitor: str, count: int = 1) -> None:
        """Count `count` rollouts for `visitor` now; QuotaExceeded (nothing taken) when that would pass the cap."""
        if self.per_hour <= 0:
            return
        with self._lock:
            now = self._clock()
            stamps = self._recent(visitor, now)
            if len(stamps) + count > self.per_hour:
                # The oldest slots free up first: the wait is until enough of them are an hour old.
                needed = len(stamps) + count - self.per_hour
                wait = stamps[needed - 1] + self.window_s - now if needed <= len(stamps) else self.window_s
                raise QuotaExceeded(
                    f"You have {self.done} {len(stamps)} {self.noun}{'s' * (len(stamps) != 1)} in the last hour (the "
                    f"limit is {self.per_hour} per {self.counted}). "
                    f"{self.then} in {math.ceil(max(wait, 1.0) / 60)} min.")
            stamps.extend([now] * count)
            self._takes += 1
            if self._takes % _SWEEP_EVERY == 0:
                self._sweep(now)

    def give_back(self, visitor: str, count: int = 1) -> None:
        """An episode that saved nothing: its slots are free again (the latest ones taken)."""
        if self.per_hour <= 0:
            return
        with self._lock:
            stamps = self._taken.get(visitor)
            for _ in range(min(count, len(stamps or ()))):
                stamps.pop()  # type: ignore[union-attr]

    def used(self, visitor: str) -> int:
        """The rollouts counted for `visitor` in the last window."""
        with self._lock:
            return len(self._recent(visitor, self._clock()))

    def _recent(self, visitor: str, now: float) -> deque[float]:
        stamps = self._taken.setdefault(visitor, deque())
        while stamps and stamps[0] <= now - self.window_s:
            stamps.popleft()
        return stamps

    def _sweep(self, now: float) -> None:
        for visitor in [v for v, s in self._taken.items() if not s or s[-1] <= now - self.window_s]:
            del self._taken[visitor]
