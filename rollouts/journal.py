"""Episodes in progress, journalled so that a crash never loses one: `.push/running/<episode_id>.json`.

The worker playing an episode writes its record as it stands the moment the episode starts, and again as events
stream (at most once every `UPDATE_EVERY_S`); the entry is removed once the real record is saved. Each writing
process holds an exclusive `flock` on `.push/running/<writer_id>.lock` for as long as it lives, and the kernel
drops that lock when the process dies, even by `kill -9`. So the next store to open the folder can tell a
leftover of a dead writer from an episode another process is still playing: it closes each leftover whose
writer's lock is free as a record with `end_reason: interrupted`, holding what had streamed, and saves it, so it
shows in Browse like any other rollout; an entry whose player had not taken a turn yet is no rollout and just goes.

Entries are replaced whole (temp file, rename) without fsync: a killed process leaves its last write in the page
cache, and a journal fsync per streamed step would cost more than it protects (a power cut loses at most the
entries of the episodes that were running).

The journal recovers only entries it wrote: each carries a MAC of its writer, time and record under a key kept in
the folder (`.push/running/.key`, made once, readable by its owner only), its file is named by its record's episode
id, and it is at most MAX_ENTRY_BYTES. A file that fails any of these (planted, say, by anything that could write
into the folder) is never saved as a rollout: it is set aside with the reason, as the store sets aside a record it
refuses.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import logging
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rollouts.layout import PUSH_DIR, WRITER_ID
from rollouts.record import Record
from rollouts.schema import RecordError, started_at, valid_episode_id

log = logging.getLogger(__name__)

RUNNING_DIR = f"{PUSH_DIR}/running"
UPDATE_EVERY_S = 1.0
MAX_ENTRY_BYTES = 64 << 20  # the largest record this app writes is about 7 MB (ten checks' answers, twice)
KEY_FILE = ".key"
# The disk room an episode needs before it starts: its record, its journal entry and its trace (each about 7 MB
# at the largest), with room to spare; and what is kept free beyond that for the index, the pusher and the rest.
EPISODE_ROOM = 32 << 20
DISK_MARGIN = 256 << 20
INTERRUPTED_NOTE = ("The app stopped (a crash or a restart) while this episode was running; the record holds what "
                    "had streamed until then.")


class NoRoom(OSError):
    """The disk cannot hold the records of the episodes asked for; the message says how much is free and needed."""


class RunningJournal:
    """The running episodes of one writer process, and the recovery of those a dead writer left behind."""

    def __init__(self, root: Path, writer_id: str) -> None:
        self.root = Path(root)
        self.folder = self.root / RUNNING_DIR
        # The free bytes on the rollout folder's disk (a test puts its own reading here).
        self.free_bytes: Callable[[], int] = lambda: shutil.disk_usage(self.root).free
        self.writer_id = writer_id
        self._held: int | None = None  # the fd of our writer lock, taken at the first write
        self._written: dict[str, float] = {}  # episode id -> when its entry was last written (monotonic)
        self._mutex = threading.Lock()
        self._key_bytes: bytes | None = None

    def check_room(self, episodes: int = 1, running: int = 0) -> None:
        """Before episodes start: NoRoom unless the disk can hold their records and those of the `running` ones
        still writing (EPISODE_ROOM each) and still keep DISK_MARGIN free, so a run is refused up front rather than
        played and then lost unsaved."""
        free, needed = self.free_bytes(), (episodes + running) * EPISODE_ROOM + DISK_MARGIN
        if free < needed:
            raise NoRoom(f"The disk that keeps the rollouts has {free >> 20} MB free, too little to keep "
                         f"{'this run' if episodes == 1 else f'these {episodes} runs'} (it keeps {needed >> 20} MB "
                         "free for them): nothing was started. Try again once the Space has pushed or made room.")

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
            entry["mac"] = _mac(self._key(), entry)
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

    def recover(self, save: Callable[[dict], Any], saved: Callable[[str], bool],
                set_aside: Callable[[Any, str], None] | None = None) -> int:
        """Close every entry a dead writer left as an `interrupted` record through `save`; the number saved.
        `saved(episode_id)` tells an episode whose record made it to the store before its writer died; an entry this
        journal did not write goes to `set_aside(entry, why)`, never to `save`."""
        if not self.folder.is_dir():
            return 0
        closed, gone = 0, set()
        for entry_path in sorted(self.folder.glob("*.json")):
            entry, why = self._read_own(entry_path)
            writer = str(entry.get("writer") or "") if entry else ""
            if why is None and (writer == self.writer_id or not self._writer_gone(writer)):
                continue
            gone.add(writer)
            if why is not None:
                log.error("journal entry %s is not one the journal wrote (%s): set aside, not saved",
                          entry_path.name, why)
                if set_aside is not None:
                    set_aside(entry if entry is not None else repr(entry_path.name), f"journal entry: {why}")
            elif not Record(entry["record"]).started:
                # Its player never took a turn: nothing was played, so there is no rollout to close.
                log.warning("episode %s died before its first turn: not a rollout, not saved", entry_path.stem)
            elif not saved(entry_path.stem):
                try:
                    save(interrupted_record(entry["record"], entry.get("updated")))
                    closed += 1
                    log.warning("episode %s was running when its process died: saved as interrupted",
                                entry_path.stem)
                except (RecordError, ValueError, OSError) as exc:  # a schema refusal is set aside by `save`
                    log.error("cannot close the interrupted episode %s: %s", entry_path.stem, exc)
                    if isinstance(exc, OSError):
                        continue  # keep the entry for the next start
            entry_path.unlink(missing_ok=True)
        self._drop_leftovers(gone)
        return closed

    def _read_own(self, path: Path) -> tuple[dict | None, str | None]:
        """(the entry, None) when this journal wrote it; (what could be read, why not) otherwise."""
        try:
            if path.stat().st_size > MAX_ENTRY_BYTES:
                return None, f"larger than {MAX_ENTRY_BYTES >> 20} MB"
        except FileNotFoundError:
            return None, "gone"
        entry = _read_entry(path)
        if entry is None or not isinstance(entry.get("record"), dict):
            return None, "unreadable"
        if entry["record"].get("episode_id") != path.stem:
            return entry, "its record names another episode than its file"
        mac = entry.pop("mac", None)
        if not isinstance(mac, str) or not hmac.compare_digest(mac, _mac(self._key(), entry)):
            return entry, "no valid mark of this journal"
        return entry, None

    def _drop_leftovers(self, gone: set[str]) -> None:
        for tmp in self.folder.glob(".*.tmp"):  # a write cut short by a kill; a live writer's is a moment old
            if time.time() - _mtime(tmp) > 60:
                tmp.unlink(missing_ok=True)
        for writer in gone:
            if WRITER_ID.fullmatch(writer):
                (self.folder / f"{writer}.lock").unlink(missing_ok=True)

    def _key(self) -> bytes:
        """The folder's journal key, made by the first writer (O_EXCL: two writers agree on one)."""
        if self._key_bytes is None:
            self._key_bytes = self._read_key()
        return self._key_bytes

    def _read_key(self) -> bytes:
        path = self.folder / KEY_FILE
        try:
            return path.read_bytes()
        except FileNotFoundError:
            self.folder.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                return path.read_bytes()
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(32))
                f.flush()
                os.fsync(f.fileno())
            return path.read_bytes()

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


def _mac(key: bytes, entry: dict) -> str:
    """The entry's mark: an HMAC of its content, as JSON with sorted keys."""
    body = json.dumps(entry, sort_keys=True, default=str).encode()
    return hmac.new(key, body, hashlib.sha256).hexdigest()


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
