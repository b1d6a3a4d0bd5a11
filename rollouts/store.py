"""The rollout store: every finished rollout lands in a local folder before `save` returns, then (optionally) on the Hub.

Layout (the same in the folder and in the Hub dataset, DESIGN.md "The rollout dataset"):

    README.md                                 the dataset card (rollouts.card), written when missing
    rollouts/<YYYY-MM-DD>/<episode_id>.json   the record, on one line (see rollouts.card for why)
    index/<YYYY-MM-DD>/<writer_id>.jsonl      one flat row per rollout (rollouts.schema), appended
    .push/                                    the push journal and locks (never pushed, never read by datasets)

A record file is written whole (temp file, fsync, rename, fsync of the folder), so a crash leaves either the old state
or the new file, never half a record. Each process appends only to its own index file (`writer_id`), with one write
call per row, so processes never interleave; a row torn by a crash is skipped on read and cut off on the next open,
and a record whose row was lost gets its row rebuilt then.

The Hub side (rollouts.hub_push) runs in a background thread and reads only what is already on disk: a Hub that is
slow, down or refusing never delays or fails `save`.
"""

from __future__ import annotations

import atexit
import json
import logging
import math
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from rollouts import card as dataset_card
from rollouts.schema import COLUMNS, index_row, record_path

log = logging.getLogger(__name__)

# Ids name files, so they are checked with fullmatch (`$` would let a trailing newline through).
EPISODE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
WRITER_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
# Leftovers younger than this may belong to another process that is still writing them; older ones are repaired.
RECOVER_GRACE_S = 120.0
AT_EXIT_FLUSH_S = 20.0

_writer_ids: dict[int, str] = {}


def default_writer_id() -> str:
    """A short random id for this process, stable for its lifetime (a forked child gets its own)."""
    return _writer_ids.setdefault(os.getpid(), secrets.token_hex(4))


@dataclass(frozen=True, slots=True)
class SavedRollout:
    path: Path  # the record file in the local folder
    episode_id: str


class RolloutStore:
    """A local rollout folder, pushed to the Hub dataset `dataset` in the background when a token is available."""

    def __init__(self, root: str | os.PathLike, *, writer_id: str | None = None, dataset: str | None = None,
                 token: str | None = None, endpoint: str | None = None, push_every_s: float = 300,
                 push_every_n: int = 50, retry_base_s: float = 2.0, retry_max_s: float = 600.0) -> None:
        self.root = Path(root).resolve()
        self.writer_id = default_writer_id() if writer_id is None else writer_id
        if not WRITER_ID.fullmatch(self.writer_id):
            raise ValueError(f"writer_id must match {WRITER_ID.pattern}")
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / ".push").mkdir(exist_ok=True)
        self._lock = threading.RLock()  # one save (and one index refresh) at a time in this process
        self._shared = FileLock(self.root / ".push" / "store.lock")  # card rewrites and repairs, across processes
        self._index = _IndexFiles(self.root)
        with self._shared:
            self._card_fields = self._sync_card()
            self._repair_torn_rows()
            self._index.refresh()
            self._repair_missing_rows()
        self._pusher = None
        self._offline_note: str | None = None
        if dataset:
            self._pusher, self._offline_note = _start_pusher(
                self.root, dataset, token=token, endpoint=endpoint, every_s=push_every_s, every_n=push_every_n,
                retry_base_s=retry_base_s, retry_max_s=retry_max_s)
        self.dataset = dataset if self._pusher else None
        if self._pusher:
            atexit.register(self._flush_at_exit)

    # -- writing ---------------------------------------------------------------------------------------------------

    def save(self, record: dict) -> SavedRollout:
        """Write `record` durably, then index it. Saving the same record again is a no-op; a different record under
        an id that is already saved is refused (ValueError), as is a record without a valid id or `started`."""
        if not isinstance(record, dict):
            raise ValueError(f"a rollout record is a dict, not {type(record).__name__}")
        episode_id = record.get("episode_id")
        if not isinstance(episode_id, str) or not EPISODE_ID.fullmatch(episode_id):
            raise ValueError(f"episode_id must match {EPISODE_ID.pattern}, got {str(episode_id)[:80]!r}")
        rel = record_path(record)
        data = _encode(record)
        path = self.root / rel
        with self._lock:
            existing = self._locate(episode_id)
            if existing is not None:
                if existing != path or existing.read_bytes() != data:
                    raise ValueError(f"episode {episode_id} is already saved ({existing.relative_to(self.root)}) "
                                     "with different content")
                if episode_id in self._index.by_id:
                    return SavedRollout(path, episode_id)
                # The record made it to disk before, its row did not: add the row.
            else:
                new_fields = set(record) - self._card_fields
                if new_fields:
                    self._extend_card(new_fields)
                atomic_write(path, data)
            self._append_row(index_row(record, rel), rel)
        if self._pusher:
            self._pusher.notify(rel)
        return SavedRollout(path, episode_id)

    def _append_row(self, row: dict, rel: str) -> None:
        file = self.root / "index" / rel.split("/")[1] / f"{self.writer_id}.jsonl"
        append_line(file, json.dumps(row, ensure_ascii=False).encode() + b"\n")
        self._index.add(row)

    # -- reading ---------------------------------------------------------------------------------------------------

    def load(self, episode_id: str) -> dict | None:
        """The record, or None when this folder has no rollout with that id (or the id could not name one)."""
        if not isinstance(episode_id, str) or not EPISODE_ID.fullmatch(episode_id):
            return None
        path = self._locate(episode_id)
        return json.loads(path.read_bytes()) if path else None

    def has(self, episode_id: str) -> bool:
        valid = isinstance(episode_id, str) and EPISODE_ID.fullmatch(episode_id)
        return bool(valid) and self._locate(episode_id) is not None

    def rows(self) -> list[dict]:
        """Every index row in the folder, from every writer, one per episode (first row wins)."""
        with self._lock:
            self._index.refresh()
            return [dict(row) for row in self._index.rows]

    def find(self, **filters: Any) -> list[dict]:
        """Rows whose columns equal every filter, e.g. `find(run="r1", model="openai:gpt-x", task_id="dock-...")`."""
        unknown = set(filters) - set(COLUMNS)
        if unknown:
            raise ValueError(f"unknown index column(s): {', '.join(sorted(unknown))}")
        return [row for row in self.rows() if all(row.get(k) == v for k, v in filters.items())]

    def _locate(self, episode_id: str) -> Path | None:
        with self._lock:
            row = self._index.by_id.get(episode_id)
            if row is None:
                self._index.refresh()
                row = self._index.by_id.get(episode_id)
        if row is not None and (self.root / row["path"]).is_file():
            return self.root / row["path"]
        # Not indexed (yet): a record whose row was lost, or one another process is saving right now.
        return next(iter(self.root.glob(f"rollouts/*/{episode_id}.json")), None)

    # -- pushing ---------------------------------------------------------------------------------------------------

    def status(self) -> dict:
        """{"saved", "waiting", "last_push", "last_error", "dataset"} for the UI: saved = rollouts in the folder,
        waiting = of those, not yet on the Hub."""
        pushed = self._pusher.status() if self._pusher else {"waiting": 0, "last_push": None, "last_error": None}
        return {"saved": len(self._index.by_id), "waiting": pushed["waiting"], "last_push": pushed["last_push"],
                "last_error": pushed["last_error"] or self._offline_note, "dataset": self.dataset}

    def flush(self, timeout: float = 60.0) -> bool:
        """Push everything now and wait; True when nothing is left to push (always True for a local-only store)."""
        return self._pusher.flush(timeout) if self._pusher else True

    def close(self, timeout: float = 10.0) -> None:
        """Stop the pusher (an in-flight commit may finish). Unpushed files stay in the folder for the next start."""
        if self._pusher:
            atexit.unregister(self._flush_at_exit)
            self._pusher.close(timeout)

    def __enter__(self) -> RolloutStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _flush_at_exit(self) -> None:
        if self._pusher and self._pusher.status()["waiting"]:
            self._pusher.flush(AT_EXIT_FLUSH_S)

    # -- card and repairs (called under the cross-process lock) ----------------------------------------------------

    def _sync_card(self) -> set[str]:
        """Write the card if it is missing or stale; the record fields it declares."""
        readme = self.root / "README.md"
        current = readme.read_text(encoding="utf-8") if readme.is_file() else ""
        extras = dataset_card.record_fields(current) - set(dataset_card.RECORD_FEATURES)
        wanted = dataset_card.render(extras)
        if current != wanted:
            atomic_write(readme, wanted.encode())
        return set(dataset_card.RECORD_FEATURES) | extras

    def _extend_card(self, fields: set[str]) -> None:
        with self._shared:
            readme = self.root / "README.md"
            current = readme.read_text(encoding="utf-8") if readme.is_file() else ""
            declared = dataset_card.record_fields(current) | set(dataset_card.RECORD_FEATURES)
            extras = (declared | fields) - set(dataset_card.RECORD_FEATURES)
            atomic_write(readme, dataset_card.render(extras).encode())
            self._card_fields = declared | fields
        log.info("dataset card extended with record field(s) %s", ", ".join(sorted(fields)))

    def _repair_torn_rows(self) -> None:
        """Cut a torn last line (a writer killed mid-append) off index files nobody is appending to any more, and
        drop temp files of killed writers, so the folder loads cleanly with `datasets`."""
        now = time.time()
        own = f"{self.writer_id}.jsonl"
        for file in self.root.glob("index/*/*.jsonl"):
            stat = file.stat()
            if file.name != own and now - stat.st_mtime < RECOVER_GRACE_S:
                continue
            with open(file, "rb+") as f:
                if not stat.st_size or os.pread(f.fileno(), 1, stat.st_size - 1) == b"\n":
                    continue
                data = f.read()
                keep = data.rfind(b"\n") + 1
                f.truncate(keep)
                os.fsync(f.fileno())
                log.warning("cut a torn index line (%d bytes) off %s", len(data) - keep, file)
        for tmp in [*self.root.glob("rollouts/*/.*.tmp"), *self.root.glob(".*.tmp")]:
            # Another writer may rename its temp file between the glob and the stat.
            if now - _mtime(tmp, default=now) >= RECOVER_GRACE_S:
                tmp.unlink(missing_ok=True)

    def _repair_missing_rows(self) -> None:
        now = time.time()
        for path in self.root.glob("rollouts/*/*.json"):
            if path.stem in self._index.by_id or now - _mtime(path, default=now) < RECOVER_GRACE_S:
                continue
            try:
                record = json.loads(path.read_bytes())
                rel = path.relative_to(self.root).as_posix()
                self._append_row(index_row(record, rel), rel)
                log.warning("rebuilt the lost index row of %s", rel)
            except (ValueError, OSError) as exc:
                log.error("cannot index %s: %s", path, exc)


class _IndexFiles:
    """The rows of index/*/*.jsonl, read incrementally (each file from where the last read stopped)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.rows: list[dict] = []
        self.by_id: dict[str, dict] = {}
        self._read_to: dict[Path, int] = {}

    def add(self, row: dict) -> None:
        if row.get("episode_id") not in self.by_id:
            self.by_id[row["episode_id"]] = row
            self.rows.append(row)

    def refresh(self) -> None:
        for file in sorted(self.root.glob("index/*/*.jsonl")):
            start = self._read_to.get(file, 0)
            if file.stat().st_size <= start:
                continue
            with open(file, "rb") as f:
                f.seek(start)
                data = f.read()
            end = data.rfind(b"\n") + 1  # a line without its newline is torn or still being written
            for line in data[:end].splitlines():
                try:
                    row = json.loads(line)
                except ValueError:
                    log.warning("skipping an unreadable index line in %s", file)
                    continue
                if isinstance(row, dict) and isinstance(row.get("episode_id"), str) and \
                        isinstance(row.get("path"), str):
                    self.add(row)
            self._read_to[file] = start + end


# -- files -------------------------------------------------------------------------------------------------------


def _mtime(path: Path, *, default: float) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return default


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that readers and crashes see the old file or the new one, nothing between."""
    folder = path.parent
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        _fsync_dir(folder.parent)
    tmp = folder / f".{path.name}.{secrets.token_hex(4)}.tmp"
    try:
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(folder)


def append_line(path: Path, line: bytes) -> None:
    """Append one whole line with a single write; on a short write (disk full) put the file back as it was."""
    if not path.parent.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
        _fsync_dir(path.parent.parent)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        try:
            if os.write(fd, line) != len(line):
                raise OSError(f"short write to {path}")
            os.fsync(fd)
        except OSError:
            os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _encode(record: dict) -> bytes:
    """The record as one line of UTF-8 JSON; NaN and infinities (not JSON) become null rather than losing the record."""
    try:
        try:
            text = json.dumps(record, ensure_ascii=False, allow_nan=False)
        except ValueError:
            text = json.dumps(_finite(record), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"record is not plain JSON data: {exc}") from None
    return text.encode()


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _start_pusher(root: Path, dataset: str, *, token: str | None, endpoint: str | None, **options: Any):
    """(pusher, None), or (None, why not) when this store can only be local."""
    from huggingface_hub import constants, get_token

    if constants.HF_HUB_OFFLINE:
        return None, "HF_HUB_OFFLINE is set: rollouts stay in the local folder"
    token = token or get_token()
    if not token:
        return None, f"no Hugging Face token: rollouts stay in the local folder, not pushed to {dataset}"
    from rollouts.hub_push import HubPusher

    pusher = HubPusher(root, dataset, token=token, endpoint=endpoint, **options)
    pusher.start()
    return pusher, None
