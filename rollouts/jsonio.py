"""JSON and JSONL on disk, written so that a crash leaves the old state or the new one, never half of either.

- `atomic_write`: a whole file (temp file, fsync, rename, fsync of the folder).
- `append_line`: one whole line with one write; a short write is rolled back.
- `rewrite_lines`: some lines of a JSONL file replaced, the file swapped whole. Appends and rewrites of one file
  take the same lock (`flock` on the file), and an append that waited on a file swapped meanwhile goes to the new
  one, so a rewrite never loses a line appended while it ran.
- `encode_record`: a record as one line of UTF-8 JSON (`datasets` cannot read pretty-printed files once `json`
  features are declared).
- `held_lock`: a JSONL file locked as appends and rewrites lock it (compaction folds it under this lock).
- `JsonlTail`: reads a growing JSONL file from where the last read stopped; a last line without its newline is
  torn or still being written, so it waits for the next read. Unreadable lines are counted, not dropped silently.
"""

from __future__ import annotations

import fcntl
import json
import logging
import math
import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that readers and crashes see the old file or the new one, nothing between."""
    folder = path.parent
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        fsync_dir(folder.parent)
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
    fsync_dir(folder)


def append_line(path: Path, line: bytes) -> None:
    """Append one whole line with a single write; on a short write (disk full) put the file back as it was."""
    if not path.parent.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
        fsync_dir(path.parent.parent)
    while True:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if not _still_at(fd, path):
                continue  # swapped by `rewrite_lines` while we waited: append to the file now at `path`
            size = os.fstat(fd).st_size
            try:
                if os.write(fd, line) != len(line):
                    raise OSError(f"short write to {path}")
                os.fsync(fd)
            except OSError:
                os.ftruncate(fd, size)
                raise
            return
        finally:
            os.close(fd)  # releases the lock


def rewrite_lines(path: Path, change: Callable[[Any], Any]) -> int:
    """Replace each JSON line `value` of `path` for which `change(value)` returns something else than None or the
    value itself; the number of lines replaced. Unreadable lines and a torn last line stay as they are, in place;
    the file is swapped whole (`atomic_write`) only when a line changed. Holds the lock appends take."""
    while True:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return 0
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if not _still_at(fd, path):
                continue  # another rewrite swapped it first: work on the new file
            with os.fdopen(os.dup(fd), "rb") as f:
                data = f.read()
            *lines, tail = data.split(b"\n")
            changed = 0
            for i, line in enumerate(lines):
                try:
                    value = json.loads(line)
                except (ValueError, RecursionError):
                    continue
                new = change(value)
                if new is not None and new != value:
                    lines[i] = json_line(new)[:-1]
                    changed += 1
            if changed:
                atomic_write(path, b"\n".join([*lines, tail]))
            return changed
        finally:
            os.close(fd)


@contextmanager
def held_lock(path: Path) -> Iterator[int | None]:
    """The file at `path` opened for reading and locked as appends and rewrites lock it (None when it does not
    exist): while held, no line is appended to it and it is not swapped."""
    while True:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            yield None
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if not _still_at(fd, path):
                continue  # swapped or removed while we waited: lock the file now at `path`
            yield fd
            return
        finally:
            os.close(fd)


def _still_at(fd: int, path: Path) -> bool:
    """Whether the open file `fd` is still the one at `path` (a rewrite swaps in a new file)."""
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def json_line(value: Any) -> bytes:
    """One JSON value as one line, newline included."""
    return json.dumps(value, ensure_ascii=False).encode() + b"\n"


def encode_record(record: dict) -> bytes:
    """The record as one line of UTF-8 JSON; NaN and infinities (not JSON) become null rather than losing it."""
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


def whole_lines(data: bytes) -> bytes:
    """`data` up to its last newline: a line without one is torn or still being written."""
    return data[: data.rfind(b"\n") + 1]


def read_json_lines(data: bytes, *, where: str = "") -> tuple[list[Any], int]:
    """The JSON values of whole lines in `data`, and how many lines could not be read."""
    values, bad = [], 0
    for line in whole_lines(data).splitlines():
        if not line.strip():
            continue
        try:
            values.append(json.loads(line))
        except (ValueError, RecursionError):
            bad += 1
    if bad:
        log.warning("skipped %d unreadable line(s) in %s", bad, where or "a JSONL file")
    return values, bad


@dataclass
class JsonlTail:
    """A JSONL file read incrementally: `read()` returns the whole lines appended since the last call."""

    path: Path
    offset: int = 0
    inode: int | None = None
    skipped: int = 0  # unreadable lines seen so far
    restarts: int = 0  # times the file was found replaced (or cut short) and read again from its start

    def read_bytes(self) -> bytes:
        """The new whole lines as bytes (b"" when nothing was appended); starts over if the file was replaced."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return b""
        if stat.st_ino != self.inode or stat.st_size < self.offset:
            if self.inode is not None:
                self.restarts += 1
                self.skipped = 0
            self.offset, self.inode = 0, stat.st_ino
        if stat.st_size == self.offset:
            return b""
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = whole_lines(f.read(stat.st_size - self.offset))
        self.offset += len(data)
        return data

    def read(self) -> list[Any]:
        values, bad = read_json_lines(self.read_bytes(), where=str(self.path))
        self.skipped += bad
        return values
