"""Where everything lives in a rollout dataset: the same layout in the local folder and in the Hub repo.

    README.md                                 the dataset card (rollouts.card)
    rollouts/<YYYY-MM-DD>/<episode_id>.json   one record, on one line
    index/<YYYY-MM-DD>/<writer_id>.jsonl      one flat index row per rollout, appended by one writer
    index/<YYYY-MM-DD>/<writer_id>.parquet    the same rows, compacted (rollouts.index.compaction folds JSONL in)
    traces/<YYYY-MM-DD>/<episode_id>.jsonl    the record as an agent trace for the Hub's viewer (rollouts.traces)
    matches/<YYYY-MM-DD>/<writer_id>.jsonl    one row per arena match, by the day it started (rollouts.matches)
    annotations/<YYYY-MM-DD>/<writer_id>.jsonl  one row per flag on a step, by the day it was made (rollouts.annotations)
    .push/                                    the push log, locks and the journal of running episodes (never pushed)

Every path of the dataset is made or recognised here, so a reader can trust a path only after `record_rel` or
`is_record_rel` said it fits.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rollouts import settings
from rollouts.schema import EPISODE_ID, started_at, valid_episode_id

CARD = "README.md"
RECORDS_DIR = "rollouts"
INDEX_DIR = "index"
TRACES_DIR = "traces"
PUSH_DIR = ".push"
RECORD_GLOB = f"{RECORDS_DIR}/*/*.json"
INDEX_GLOB = f"{INDEX_DIR}/*/*.jsonl"
INDEX_PARQUET_GLOB = f"{INDEX_DIR}/*/*.parquet"
TRACE_GLOB = f"{TRACES_DIR}/*/*.jsonl"
MATCHES_DIR = "matches"
MATCH_GLOB = f"{MATCHES_DIR}/*/*.jsonl"
# Dated snapshots (`python -m agent board --snapshot`): the board of every figure, and the battles its arena
# ratings come from, one JSONL file per UTC day each (JSON, since `datasets` reads the whole repo with one builder).
BOARDS_DIR, BATTLES_DIR = "boards", "battles"
BOARD_GLOB, BATTLE_GLOB = f"{BOARDS_DIR}/*.jsonl", f"{BATTLES_DIR}/*.jsonl"
ANNOTATIONS_DIR = "annotations"
ANNOTATION_GLOB = f"{ANNOTATIONS_DIR}/*/*.jsonl"
WRITER_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
# The rule "a row's path names its own record", written once: the record path of the layout, its day and its
# episode id in named groups (the 1st and 2nd). Python matches it here (`is_record_rel`); the index's readers apply
# the same pattern in Arrow and in SQL (rollouts.index.format), both built from this text. RE2 reads it as Python.
RECORD_PATH_PATTERN = rf"{RECORDS_DIR}/(?P<day>{DAY.pattern})/(?P<episode_id>{EPISODE_ID.pattern})\.json"
RECORD_REL = re.compile(RECORD_PATH_PATTERN)
TRACE_REL = re.compile(rf"{TRACES_DIR}/(?P<day>{DAY.pattern})/(?P<episode_id>{EPISODE_ID.pattern})\.jsonl")


def checked_writer_id(writer_id: str) -> str:
    """A writer id as files are named by it (one path segment); ValueError naming it otherwise."""
    if not WRITER_ID.fullmatch(writer_id or ""):
        raise ValueError(f"writer id must be 1-64 letters, digits, '-' or '_', got {str(writer_id)[:80]!r}")
    return writer_id


def space_storage() -> Path | None:
    """The Space's persistent storage (`/data`), when this runs on a Space that has some."""
    return Path("/data") if settings.SPACE_ID.is_set() and Path("/data").is_dir() else None


def default_rollout_dir() -> Path:
    """ROLLOUT_DIR, else the Space's persistent storage when it has some, else `./data/rollouts`."""
    given = settings.ROLLOUT_DIR.get()
    if given:
        return given
    storage = space_storage()
    return storage / "rollouts" if storage else Path("data/rollouts")


def record_rel(record: dict) -> str:
    """Where the record lives: `rollouts/<YYYY-MM-DD>/<episode_id>.json` (the UTC date it started)."""
    return record_rel_for(record["episode_id"], f"{started_at(record):%Y-%m-%d}")


def record_rel_for(episode_id: str, day: str) -> str:
    if not valid_episode_id(episode_id) or not DAY.fullmatch(day or ""):
        raise ValueError(f"no record path for episode {str(episode_id)[:80]!r} on {str(day)[:20]!r}")
    return f"{RECORDS_DIR}/{day}/{episode_id}.json"


def is_record_rel(path: Any, episode_id: str | None = None) -> bool:
    """True when `path` is a record path of the layout (and, given an id, that episode's)."""
    match = RECORD_REL.fullmatch(path) if isinstance(path, str) else None
    return match is not None and (episode_id is None or match["episode_id"] == episode_id)


def trace_rel(record_rel: str) -> str:
    """The agent trace of the record at `record_rel`, in the record's day folder:
    `rollouts/<YYYY-MM-DD>/<episode_id>.json` -> `traces/<YYYY-MM-DD>/<episode_id>.jsonl`."""
    match = RECORD_REL.fullmatch(record_rel) if isinstance(record_rel, str) else None
    if match is None:
        raise ValueError(f"not a record path of the layout: {str(record_rel)[:120]!r}")
    return f"{TRACES_DIR}/{match['day']}/{match['episode_id']}.jsonl"


def is_trace_rel(path: Any) -> bool:
    """True when `path` is a trace path of the layout."""
    return isinstance(path, str) and TRACE_REL.fullmatch(path) is not None


def index_rel(day: str, writer_id: str) -> str:
    """One writer's index file for one day."""
    return f"{INDEX_DIR}/{day}/{writer_id}.jsonl"


def match_rel(day: str, writer_id: str) -> str:
    """One writer's match rows for one day (the day each match started, UTC), laid out as the index is."""
    return _writer_day_rel(MATCHES_DIR, "match", day, writer_id)


def _writer_day_rel(folder: str, what: str, day: str, writer_id: str) -> str:
    """`<folder>/<day>/<writer_id>.jsonl`, once both name a path segment and nothing else."""
    if not DAY.fullmatch(day or "") or not WRITER_ID.fullmatch(writer_id or ""):
        raise ValueError(f"no {what} file for writer {str(writer_id)[:80]!r} on {str(day)[:20]!r}")
    return f"{folder}/{day}/{writer_id}.jsonl"


def snapshot_rel(folder: str, day: str) -> str:
    """One day's snapshot file in BOARDS_DIR or BATTLES_DIR."""
    if folder not in (BOARDS_DIR, BATTLES_DIR) or not DAY.fullmatch(day or ""):
        raise ValueError(f"no snapshot file {str(folder)[:20]!r} for {str(day)[:20]!r}")
    return f"{folder}/{day}.jsonl"


def annotation_rel(day: str, writer_id: str) -> str:
    """One writer's flags of one day (the day each flag was made, UTC), laid out as the matches are."""
    return _writer_day_rel(ANNOTATIONS_DIR, "annotation", day, writer_id)


def inside(root: Path, rel: str) -> Path | None:
    """`root / rel`, or None when it would resolve outside `root` (a `..`, an absolute path, a symlink out)."""
    path = (root / rel).resolve()
    return path if path.is_relative_to(root.resolve()) else None


def locate_record(root: Path, episode_id: str, rel: Any = None) -> Path | None:
    """The record file of `episode_id` in the folder `root`: at `rel` when that is its own record path, else
    wherever a `rollouts/<day>/` folder holds it (a record whose index row was lost or is not written yet). Never a
    file outside `root`, and None for an id that cannot name one."""
    if not valid_episode_id(episode_id):
        return None
    if is_record_rel(rel, episode_id):
        path = inside(root, rel)
        if path is not None and path.is_file():
            return path
    for found in root.glob(f"{RECORDS_DIR}/*/{episode_id}.json"):
        path = inside(root, found.relative_to(root).as_posix())  # not a link out of the folder
        if path is not None and path.is_file():
            return path
    return None
