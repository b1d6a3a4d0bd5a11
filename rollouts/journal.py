"""Episodes in progress, journalled so that a crash never loses one: `.push/running/<episode_id>.json`.

The worker playing an episode writes its record as it stands the moment the episode starts, and again as events
stream (at most once every `UPDATE_EVERY_S`); the entry is removed once the real record is saved. Each writing
process holds an exclusive `flock` on `.push/running/<writer_id>.lock` for as long as it lives, and the kernel
drops that lock when the process dies, even by `kill -9`. So the next store to open the folder can tell a
leftover of a dead writer from an episode another process is still playing: it closes each leftover whose
writer's lock is free as a record with `end_reason: interrupted`, holding what had streamed, and saves it, so it
shows in Browse like any other rollout.

Entries are replaced whole (temp file, rename) without fsync: a killed process leaves its last write in the page
cache, and a journal fsync per streamed step would cost more than it protects (a power cut loses at most the
entries of the episodes that were running).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rollouts.layout import PUSH_DIR, WRITER_ID
from rollouts.schema import RecordError, started_at, valid_episode_id

log = logging.getLogger(__name__)

RUNNING_DIR = f"{PUSH_DIR}/running"
UPDATE_EVERY_S = 1.0
INTERRUPTED_NOTE = ("The app stopped (a crash or a restart) while this episode was running; the record holds what "
                    "had streamed until then.")


class RunningJournal:
    """The running episodes of one writer process, and the recovery of those a dead writer left behind."""

    def __init__(self, root: Path, writer_id: str) -> None:
        self.folder = Path(root) / RUNNING_DIR
        self.writer_id = writer_id
        self._held: int | None = None  # the fd of our writer lock, taken at the first write
        self._written: dict[str, float] = {}  # episode id -> when its entry was last written (monotonic)
        self._mutex = threading.Lock()

    def write(self, record: dict, *, force: bool = False) -> None:
        """Journal `record` as it stands; skipped when its entry was written less than UPDATE_EVERY_S ago, unless
        `force`. Called from the episode's own worker, so the record does not change while it is encoded."""
        episode_id = record.get("episode_id")
        if not valid_episode_id(episode_id):
            return
        now = time.monotonic()
        with self._mutex:
            last = self._written.get(episode_id)
            if not force and last is not None and now - last < UPDATE_EVERY_S:
                return
            self._written[episode_id] = now
            self._hold_lock()
        entry = {"writer": self.writer_id, "pid": os.getpid(), "updated": time.time(), "record": record}
        try:
            _replace(self.folder / f"{episode_id}.json", json.dumps(entry, default=str).encode())
        except (OSError, ValueError) as exc:  # a full disk must not end the episode; the save at the end still runs
            log.warning("cannot journal the running episode %s: %s", episode_id, exc)

    def end(self, episode_id: str) -> None:
        """The episode's record is saved (or set aside): its entry goes."""
        with self._mutex:
            self._written.pop(episode_id, None)
        if valid_episode_id(episode_id):
            (self.folder / f"{episode_id}.json").unlink(missing_ok=True)

    def running(self) -> list[str]:
        """Episode ids with an entry in the folder, from any writer."""
        return sorted(p.stem for p in self.folder.glob("*.json")) if self.folder.is_dir() else []

    def recover(self, save: Callable[[dict], Any], saved: Callable[[str], bool]) -> int:
        """Close every entry a dead writer left as an `interrupted` record through `save`; the number saved.
        `saved(episode_id)` tells an episode whose record made it to the store before its writer died."""
        if not self.folder.is_dir():
            return 0
        closed, gone = 0, set()
        for entry_path in sorted(self.folder.glob("*.json")):
            entry = _read_entry(entry_path)
            writer = str(entry.get("writer") or "") if entry else ""
            if writer == self.writer_id or not self._writer_gone(writer):
                continue
            gone.add(writer)
            if entry is not None and isinstance(entry.get("record"), dict) and not saved(entry_path.stem):
                record = interrupted_record(entry["record"], entry.get("updated"))
                try:
                    save(record)
                    closed += 1
                    log.warning("episode %s was running when its process died: saved as interrupted",
                                entry_path.stem)
                except (RecordError, ValueError, OSError) as exc:  # a schema refusal is set aside by `save`
                    log.error("cannot close the interrupted episode %s: %s", entry_path.stem, exc)
                    if isinstance(exc, OSError):
                        continue  # keep the entry for the next start
            elif entry is None:
                log.error("the journal entry %s is unreadable; it is removed", entry_path.name)
            entry_path.unlink(missing_ok=True)
        for tmp in self.folder.glob(".*.tmp"):  # a write cut short by a kill; a live writer's is a moment old
            if time.time() - _mtime(tmp) > 60:
                tmp.unlink(missing_ok=True)
        for writer in gone:
            if WRITER_ID.fullmatch(writer):
                (self.folder / f"{writer}.lock").unlink(missing_ok=True)
        return closed

    def close(self) -> None:
        """Let go of the writer lock (a store closed in a process that goes on)."""
        with self._mutex:
            if self._held is not None:
                os.close(self._held)
                self._held = None

    def _hold_lock(self) -> None:
        if self._held is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.folder / f"{self.writer_id}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._held = fd

    def _writer_gone(self, writer: str) -> bool:
        """True when no live process holds `writer`'s lock (flock locks die with their process)."""
        if not WRITER_ID.fullmatch(writer):
            return True
        try:
            fd = os.open(self.folder / f"{writer}.lock", os.O_RDWR)
        except FileNotFoundError:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        finally:
            os.close(fd)  # also releases the lock if we took it
        return True


def interrupted_record(record: dict, updated: Any = None) -> dict:
    """The record as it stood when its process died, closed as `interrupted`, its time up to the last entry."""
    record = dict(record)
    record["end_reason"] = "interrupted"
    record["errors"] = [*(e for e in record.get("errors") or [] if isinstance(e, str)), INTERRUPTED_NOTE]
    try:
        if isinstance(updated, int | float):
            record["seconds"] = round(max(0.0, float(updated) - started_at(record).timestamp()), 1)
    except ValueError:
        pass  # no readable start time: the schema check of `save` names the problem
    return record


def _read_entry(path: Path) -> dict | None:
    try:
        entry = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return entry if isinstance(entry, dict) else None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return time.time()


def _replace(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
