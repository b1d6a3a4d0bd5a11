"""This machine's rollout folder as a Browse source: records, found by their episode id.

Its index rows are read by the index engine (rollouts.index.engine) straight from the folder's index files, so this
source only fetches a record when someone opens it, and never from outside the folder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rollouts.layout import locate_record
from rollouts.schema import RecordError, parse_record, valid_episode_id
from rollouts.sources import SourceError


class LocalSource:
    """`ROLLOUT_DIR`: the rollouts this Space (or this machine) played, pushed or not."""

    name = "local"

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root).resolve()
        self.label = "this Space's rollout folder"

    def record(self, row: dict) -> dict:
        """The record of an index row (or of an episode id alone, found by its file name)."""
        episode_id = str(row.get("episode_id") or "")
        if not valid_episode_id(episode_id):
            raise SourceError("malformed episode id")
        path = self.locate(episode_id, row.get("path"))
        if path is None:
            raise SourceError(f"rollout {episode_id} is indexed but its record file is missing from the folder")
        try:
            return parse_record(path.read_bytes(), episode_id)
        except OSError:
            raise SourceError(f"rollout {episode_id} is indexed but its record file is missing from the folder") \
                from None
        except RecordError as exc:
            raise SourceError(str(exc)) from None

    def locate(self, episode_id: str, path: Any = None) -> Path | None:
        """The record file of `episode_id`, never outside the folder."""
        return locate_record(self.root, episode_id, path) if self.root.is_dir() else None
