"""Files the page offers for download (a rollout's JSON, an export of the list), in one folder the app owns, within
bounds.

A download's name is made here, never taken from a record: a record from a Hub dataset is anyone's text, and an
`episode_id` that is a path must not choose where a file is written. Each file goes in a folder of its own (so two
downloads never share a name).

Downloads share the disk with the rollout folder, so they are bounded here, the one place that makes them: a
visitor may have AT_ONCE being written at a time and VISITOR_BYTES held, the app TOTAL_BYTES held; a file goes
once it has been served whole (`RemoveWhenServed`, around the app) or once KEEP_S has passed, whichever comes first;
the whole folder goes at exit. A download past a bound is refused with a DownloadRefused saying which bound and
what to do. The folder lies inside Gradio's own file cache, so Gradio serves this copy instead of keeping one more.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from gradio.utils import get_upload_folder

from rollouts.jsonio import atomic_write
from rollouts.schema import valid_episode_id

KEEP_S = 300.0  # long enough to click a download button after it is offered; a fetched file goes at once
AT_ONCE = 2  # downloads one visitor may have being written at the same time
VISITOR_BYTES = 96 << 20  # what one visitor's downloads may hold on disk together (a single file too)
TOTAL_BYTES = 1 << 30  # what every download together may hold
SHARED = "page"  # the visitor of a download made without one (a rollout's JSON, opened by any page)


_FULL = "The Space is holding as many downloads as it may right now: try again in a few minutes."


class DownloadRefused(RuntimeError):
    """A download past one of the bounds; the message says which, for the visitor."""


@dataclass
class _Held:
    visitor: str
    made: float
    size: int = 0


def _mb(size: int) -> str:
    """A size as a visitor reads it: KB under a megabyte, else MB (one decimal under ten)."""
    if size < 1 << 20:
        return f"{-(-size // 1024)} KB"
    megabytes = size / (1 << 20)
    return f"{megabytes:.1f} MB" if megabytes < 10 else f"{megabytes:.0f} MB"


class Downloads:
    def __init__(self, folder: Path | None = None, *, keep_s: float = KEEP_S, at_once: int = AT_ONCE,
                 visitor_bytes: int = VISITOR_BYTES, total_bytes: int = TOTAL_BYTES) -> None:
        if folder is None:
            Path(get_upload_folder()).mkdir(parents=True, exist_ok=True)
            folder = Path(tempfile.mkdtemp(prefix="arena-downloads-", dir=get_upload_folder()))
        self.folder = folder.resolve()
        self.folder.mkdir(parents=True, exist_ok=True)
        atexit.register(shutil.rmtree, self.folder, ignore_errors=True)
        self.keep_s, self.at_once = keep_s, at_once
        self.visitor_bytes, self.total_bytes = visitor_bytes, total_bytes
        self._lock = threading.Lock()
        self._held: dict[Path, _Held] = {}  # each download's own folder -> whose, when made, its size
        self._writing: dict[str, int] = {}  # visitor -> downloads being written now
        self._records: dict[str, Path] = {}  # visitor -> the folder of the rollout JSON their page offers now

    def make(self, name: str, write: Callable[[Path], None], *, visitor: str = SHARED) -> Path:
        """A new file called `name` (letters, digits, '.', '-', '_' only), written by `write(path)`, for `visitor`.
        DownloadRefused when a bound would be passed (the file is then not kept)."""
        if not name or any(not (c.isascii() and (c.isalnum() or c in ".-_")) for c in name) or name.startswith("."):
            raise ValueError(f"not a download name: {name[:80]!r}")

        def write_in(folder: Path) -> Path:
            write(folder / name)
            return folder / name

        return self.make_in(write_in, visitor=visitor)

    def make_in(self, write: Callable[[Path], Path], *, visitor: str = SHARED) -> Path:
        """A new file that `write(folder)` writes in an empty folder of its own, naming it (and returning its
        path), as `make` does."""
        folder = self._reserve(visitor)
        try:
            path = write(folder)
            if path.resolve().parent != folder:
                raise ValueError(f"a download is written in the folder it is given, not at {path}")
            size = path.stat().st_size
            with self._lock:
                self._held[folder].size = size
                held = self._bytes(visitor)
                # Again now that the size is known: downloads written at the same time each saw the others' as 0.
                total = sum(h.size for h in self._held.values())
            if size > self.visitor_bytes:
                raise DownloadRefused(f"This download would be {_mb(size)}, more than the {_mb(self.visitor_bytes)} "
                                      "one download may be: narrow the filters, or take the Parquet form, which is "
                                      "smaller.")
            if held > self.visitor_bytes:
                raise DownloadRefused(f"Your downloads already hold {_mb(held - size)} here (up to "
                                      f"{_mb(self.visitor_bytes)} per visitor): each is removed once fetched or "
                                      f"after {self.keep_s / 60:.0f} minutes. Fetch or wait, then try again.")
            if total > self.total_bytes:
                raise DownloadRefused(_FULL)
        except BaseException:
            self._drop(folder)
            raise
        finally:
            with self._lock:
                self._writing[visitor] -= 1
        return path

    def record_json(self, episode_id: str, record: dict, *, visitor: str = SHARED) -> Path:
        """A rollout's record as a JSON file named by its (checked) episode id. A visitor's page offers one open
        rollout's JSON at a time, so their previous one goes (rollouts opened one after another hold one file)."""
        name = f"{episode_id}.json" if valid_episode_id(episode_id) else "rollout.json"
        with self._lock:
            previous = self._records.pop(visitor, None) if visitor != SHARED else None
        if previous is not None:
            self._drop(previous)
        path = self.make(name, lambda path: atomic_write(
            path, json.dumps(record, ensure_ascii=False, indent=1).encode()), visitor=visitor)
        if visitor != SHARED:
            with self._lock:
                self._records[visitor] = path.parent
        return path

    def served(self, path: str | Path) -> None:
        """`path` has been sent whole to whoever fetched it: the file goes (a path outside the folder is ignored)."""
        try:
            folder = Path(path).resolve().parent
        except (OSError, ValueError):
            return
        if folder.parent == self.folder:
            self._drop(folder)

    def held_bytes(self) -> int:
        with self._lock:
            return sum(h.size for h in self._held.values())

    def _reserve(self, visitor: str) -> Path:
        """A new folder for one of `visitor`'s downloads, counted as being written; refused past a bound."""
        self._sweep()
        with self._lock:
            if self._writing.get(visitor, 0) >= self.at_once:
                raise DownloadRefused(f"You have {self.at_once} downloads being prepared already: wait for them to "
                                      "finish, then try again.")
            if self._bytes(visitor) >= self.visitor_bytes:
                raise DownloadRefused(f"Your downloads already hold {_mb(self._bytes(visitor))} here (up to "
                                      f"{_mb(self.visitor_bytes)} per visitor): each is removed once fetched or "
                                      f"after {self.keep_s / 60:.0f} minutes. Fetch or wait, then try again.")
            if sum(h.size for h in self._held.values()) >= self.total_bytes:
                raise DownloadRefused(_FULL)
            folder = Path(tempfile.mkdtemp(dir=self.folder))
            self._held[folder] = _Held(visitor, time.monotonic())
            self._writing[visitor] = self._writing.get(visitor, 0) + 1
        return folder

    def _bytes(self, visitor: str) -> int:
        return sum(h.size for h in self._held.values() if h.visitor == visitor)

    def _drop(self, folder: Path) -> None:
        with self._lock:
            self._held.pop(folder, None)
        shutil.rmtree(folder, ignore_errors=True)

    def _sweep(self) -> None:
        """Remove the downloads older than keep_s."""
        cutoff = time.monotonic() - self.keep_s
        with self._lock:
            old = [folder for folder, held in self._held.items() if held.made < cutoff]
        for folder in old:
            self._drop(folder)


class RemoveWhenServed:
    """ASGI middleware: once Gradio's file route has sent a download whole (`/file=<path>`, status 200, its last
    body part), the file goes, so a download is held only until it is fetched."""

    def __init__(self, app: Any, downloads: Downloads) -> None:
        self.app, self.downloads = app, downloads

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        path = scope.get("path", "") if scope.get("type") == "http" and scope.get("method") == "GET" else ""
        if "/file=" not in path:
            await self.app(scope, receive, send)
            return
        fetched = unquote(path.split("/file=", 1)[1])
        status: list[int] = []

        async def watched(message: dict) -> None:
            await send(message)
            if message["type"] == "http.response.start":
                status.append(message["status"])
            elif message["type"] == "http.response.body" and not message.get("more_body") and status == [200]:
                self.downloads.served(fetched)

        await self.app(scope, receive, watched)
