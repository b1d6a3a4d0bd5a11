"""Files the page offers for download (a rollout's JSON, an export of the list), in one folder the app owns.

A download's name is made here, never taken from a record: a record from a Hub dataset is anyone's text, and an
`episode_id` that is a path must not choose where a file is written. Each file goes in a folder of its own (so two
downloads never share a name) and is removed once KEEP_S has passed, when the next one is made; the whole folder goes
at exit.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rollouts.jsonio import atomic_write
from rollouts.schema import valid_episode_id

KEEP_S = 600.0  # long enough for a slow download to finish; Gradio serves its own copy of each file meanwhile


class Downloads:
    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or Path(tempfile.mkdtemp(prefix="arena-downloads-"))
        self.folder.mkdir(parents=True, exist_ok=True)
        atexit.register(shutil.rmtree, self.folder, ignore_errors=True)
        self._lock = threading.Lock()

    def new_folder(self) -> Path:
        """An empty folder for one download (the old ones swept first)."""
        self._sweep()
        return Path(tempfile.mkdtemp(dir=self.folder))

    def make(self, name: str, write: Callable[[Path], None]) -> Path:
        """A new file called `name` (letters, digits, '.', '-', '_' only), written by `write(path)`."""
        if not name or any(not (c.isascii() and (c.isalnum() or c in ".-_")) for c in name) or name.startswith("."):
            raise ValueError(f"not a download name: {name[:80]!r}")
        path = self.new_folder() / name
        write(path)
        return path

    def record_json(self, episode_id: str, record: dict) -> Path:
        """A rollout's record as a JSON file named by its (checked) episode id."""
        name = f"{episode_id}.json" if valid_episode_id(episode_id) else "rollout.json"
        return self.make(name, lambda path: atomic_write(
            path, json.dumps(record, ensure_ascii=False, indent=1).encode()))

    def _sweep(self) -> None:
        """Remove the downloads older than KEEP_S."""
        cutoff = time.time() - KEEP_S
        with self._lock:
            for folder in self.folder.iterdir():
                try:
                    if folder.is_dir() and folder.stat().st_mtime < cutoff:
                        shutil.rmtree(folder, ignore_errors=True)
                except FileNotFoundError:
                    continue
