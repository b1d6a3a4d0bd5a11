"""Ending an episode from outside: a user's Stop or the wall clock, checked cooperatively and by closing streams."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any


class Interrupted(Exception):
    """The episode was stopped by its user or ran out of wall-clock time."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Interrupt:
    """Ends an episode from outside: a user's Stop or the wall clock.

    A blocked read of a provider stream can't poll, so the watcher thread also closes whatever stream is open.
    """

    def __init__(self, stop: threading.Event | None, wall_clock_s: float):
        self._stop = stop or threading.Event()
        self.deadline = time.monotonic() + wall_clock_s
        self.reason: str | None = None
        self._closers: list[Callable[[], Any]] = []
        self._lock = threading.Lock()
        self._finished = threading.Event()
        threading.Thread(target=self._watch, name="episode-interrupt", daemon=True).start()

    def _watch(self) -> None:
        while not self._finished.is_set():
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                self.trigger("wall_clock")
                return
            if self._stop.wait(timeout=min(remaining, 0.25)):
                self.trigger("stopped")
                return

    def trigger(self, reason: str) -> None:
        with self._lock:
            if self.reason is None:
                self.reason = reason
            closers = list(self._closers)
        for close in closers:
            # The stream may already be closed; the reader sees the interruption anyway.
            with suppress(Exception):
                close()

    def check(self) -> None:
        if self.reason is None:
            if self._stop.is_set():
                self.trigger("stopped")
            elif time.monotonic() >= self.deadline:
                self.trigger("wall_clock")
        if self.reason is not None:
            raise Interrupted(self.reason)

    def sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while True:
            self.check()
            left = end - time.monotonic()
            if left <= 0:
                return
            self._stop.wait(timeout=min(left, 0.25))

    @contextmanager
    def closing(self, close: Callable[[], Any]) -> Iterator[None]:
        """While inside, a Stop or the wall clock closes the open stream at once."""
        with self._lock:
            self._closers.append(close)
        try:
            if self.reason is not None:
                close()
            yield
        finally:
            with self._lock:
                self._closers.remove(close)

    def finish(self) -> None:
        self._finished.set()
