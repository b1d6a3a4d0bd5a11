"""The pusher's log `.push/pushed.jsonl`: which file versions of a store folder are on the Hub (its format and
use: rollouts.hub_push)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from rollouts.jsonio import JsonlTail, atomic_write


class PushedFiles:
    """`.push/pushed.jsonl`: which file versions are on the Hub, read as it grows (rollouts.jsonio.JsonlTail);
    appended only by the holder of the push lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, dict] = {}
        self._lines = 0
        self._tail = JsonlTail(path)

    def get(self, rel: str) -> dict | None:
        return self.entries.get(rel)

    def reload(self) -> None:
        if not self.path.exists():
            self.entries, self._lines, self._tail = {}, 0, JsonlTail(self.path)
            return
        restarts = self._tail.restarts
        values = self._tail.read()  # a torn last line (a pusher killed mid-append) waits, and is never an entry
        if self._tail.restarts != restarts:  # rewritten by another process (`prune`): read from its start
            self.entries, self._lines = {}, 0
        for entry in values:
            if isinstance(entry, dict) and isinstance(entry.get("path"), str):
                self.entries[entry["path"]] = entry
                self._lines += 1

    def append(self, entries: list[dict]) -> None:
        data = b"".join(json.dumps(entry, ensure_ascii=False).encode() + b"\n" for entry in entries)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":  # drop a torn tail rather than glue onto it
                tail = os.pread(fd, size, 0)
                size = tail.rfind(b"\n") + 1
                os.ftruncate(fd, size)
            os.write(fd, data)
            os.fsync(fd)
            self._tail.inode = os.fstat(fd).st_ino
        finally:
            os.close(fd)
        for entry in entries:
            self.entries[entry["path"]] = entry
        self._lines += len(entries)
        self._tail.offset = size + len(data)

    def prune(self) -> None:
        """Rewrite with one line per path once superseded lines dominate (index files are re-pushed often)."""
        if self._lines <= 2 * len(self.entries) + 100:
            return
        data = b"".join(json.dumps(e, ensure_ascii=False).encode() + b"\n" for e in self.entries.values())
        atomic_write(self.path, data)
        stat = self.path.stat()
        self._lines, self._tail.offset, self._tail.inode = len(self.entries), stat.st_size, stat.st_ino
