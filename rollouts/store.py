"""The rollout store: every finished rollout lands in a local folder before `save` returns, then (optionally) on the Hub.

Layout: rollouts.layout (the same in the folder and in the Hub dataset):

    README.md                                 the dataset card (rollouts.card), written when missing
    rollouts/<YYYY-MM-DD>/<episode_id>.json   the record, on one line (see rollouts.card for why)
    index/<YYYY-MM-DD>/<writer_id>.jsonl      one flat row per rollout (rollouts.schema), appended
    index/<YYYY-MM-DD>/<writer_id>.parquet    the same rows, compacted (rollouts.index.compaction)
    traces/<YYYY-MM-DD>/<episode_id>.jsonl    the record as an agent trace (rollouts.traces), written with it
    .push/                                    the push log and locks (never pushed, never read by datasets)
    .push/running/                            the records of episodes still running (rollouts.journal)
    .set-aside/                               records the schema refused, each with its reason (never pushed)

A record file is written whole (temp file, fsync, rename, fsync of the folder), so a crash leaves either the old state
or the new file, never half a record. Each process appends only to its own index file (`writer_id`), with one write
call per row, so processes never interleave; a row torn by a crash is skipped on read and cut off on the next open,
and a record whose row was lost gets its row rebuilt then.

The Hub side (rollouts.hub_push) runs in a background thread and reads only what is already on disk: a Hub that is
slow, down or refusing never delays or fails `save`.
"""

from __future__ import annotations

import atexit
import fcntl
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from rollouts import card as dataset_card
from rollouts.index.compaction import rewrite_parquet_rows
from rollouts.index.ledger import Ledger
from rollouts.journal import RunningJournal
from rollouts.jsonio import append_line, atomic_write, encode_record, json_line, rewrite_lines
from rollouts.layout import (
    CARD,
    INDEX_GLOB,
    PUSH_DIR,
    RECORD_GLOB,
    TRACES_DIR,
    WRITER_ID,
    index_rel,
    inside,
    locate_record,
    record_rel,
)
from rollouts.record import Record
from rollouts.schema import (
    ANNOTATIONS,
    COLUMNS,
    RecordError,
    index_row,
    parse_record,
    record_problem,
    valid_episode_id,
)
from rollouts.traces import save_trace

log = logging.getLogger(__name__)


# Leftovers younger than this may belong to another process that is still writing them; older ones are repaired.
RECOVER_GRACE_S = 120.0
AT_EXIT_FLUSH_S = 20.0
SET_ASIDE_DIR = ".set-aside"  # records refused by the schema, kept with the reason (never pushed)

_writer_ids: dict[int, str] = {}


def default_writer_id() -> str:
    """A short random id for this process, stable for its lifetime (a forked child gets its own)."""
    return _writer_ids.setdefault(os.getpid(), secrets.token_hex(4))


class NotStarted(ValueError):
    """A record of an episode that ended before its player's first turn (rollouts.record.STARTED_SQL's rule):
    not a rollout, so it is not saved. The message is words for the person who started it."""


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
        (self.root / PUSH_DIR).mkdir(exist_ok=True)
        self._lock = threading.RLock()  # one save (and one index refresh) at a time in this process
        self._shared = FileLock(self.root / PUSH_DIR / "store.lock")  # card rewrites and repairs, across processes
        self._index = Ledger(self.root)
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
        # Episodes a dead process was playing become `interrupted` records (after the pusher starts, so they go
        # to the Hub too).
        self.running = RunningJournal(self.root, self.writer_id)
        with self._shared:
            self.running.recover(self.save, self.has, self._set_aside)

    # -- writing ---------------------------------------------------------------------------------------------------

    def save(self, record: dict) -> SavedRollout:
        """Write `record` durably, then index it. Saving the same record again is a no-op; a different record under
        an id that is already saved is refused (ValueError). A record that breaks the schema is refused with a
        RecordError naming the field, and kept in `.set-aside/` with the reason, never lost. A record of an episode
        that ended before its first turn is no rollout: NotStarted, and nothing is written."""
        problem = record_problem(record)
        if problem is not None:
            self._set_aside(record, problem)
            raise RecordError(f"rollout not saved: {problem}")
        if not Record(record).started:
            raise NotStarted("The episode ended before its first turn, so it is not a rollout and nothing was saved.")
        episode_id = record["episode_id"]
        rel = record_rel(record)
        data = encode_record(record)
        path = self.root / rel
        with self._lock:
            existing = self._locate(episode_id)
            if existing is not None:
                if existing != path or existing.read_bytes() != data:
                    raise ValueError(f"episode {episode_id} is already saved ({existing.relative_to(self.root)}) "
                                     "with different content")
                if episode_id in self._index:
                    return SavedRollout(path, episode_id)
                # The record made it to disk before, its row did not: add the row.
            else:
                new_fields = set(record) - self._card_fields
                if new_fields:
                    self._extend_card(new_fields)
                atomic_write(path, data)
            # Before the row: a rollout that is indexed has its trace (a crash before the row is mended at the next
            # start, trace included).
            trace = save_trace(self.root, record, rel)
            self._append_row(index_row(record, rel), rel)
        if self._pusher:
            self._pusher.notify(rel)
            if trace:
                self._pusher.notify(trace)
        return SavedRollout(path, episode_id)

    def _append_row(self, row: dict, rel: str) -> None:
        file = self.root / index_rel(rel.split("/")[1], self.writer_id)
        append_line(file, json_line(row))
        self._index.add(row, file)

    def annotate(self, field: str, values: dict[str, Any]) -> int:
        """Add (or replace) the top-level field `field`, one of schema.ANNOTATIONS, in the records of the episode
        ids in `values`, and bring their index rows up to date; the number of records changed. The fields a rollout
        was recorded with are never touched. An id not in the folder raises KeyError, before anything is written."""
        if field not in ANNOTATIONS:
            raise ValueError(f"{field!r} is not a field added after the fact ({', '.join(ANNOTATIONS)})")
        with self._lock:
            self._index.refresh()  # the rows as they are now, wherever a compaction put them
            records = {}
            for episode_id, value in values.items():
                record = self.load(episode_id)
                if record is None:
                    raise KeyError(f"no rollout {episode_id} in {self.root}")
                if record.get(field) != value:
                    records[episode_id] = {**record, field: value}
            if records and field not in self._card_fields:
                self._extend_card({field})
            rows = {}
            for episode_id, record in records.items():
                path = self._locate(episode_id)
                rel = path.relative_to(self.root).as_posix()
                old_row = self._index.row(episode_id)
                if old_row is not None:
                    # Only the cells the new field changes are replaced; every other value stays as indexed.
                    before, after = index_row({k: v for k, v in record.items() if k != field}, rel), \
                        index_row(record, rel)
                    rows[episode_id] = {**after, **old_row, **{k: v for k, v in after.items() if before[k] != v}}
                atomic_write(path, encode_record(record))
                if self._pusher:
                    self._pusher.notify(rel)
            self._update_rows(rows)
        return len(records)

    def fill_index(self) -> int:
        """Fill in the columns that index rows written by an older version lack, from their records; the number of
        rows filled. Rows keep every value they have (and their place); a row whose record cannot be read stays as
        it is. Safe while other processes save into the folder (rollouts.jsonio.rewrite_lines)."""
        with self._lock:
            self._index.refresh()
            stale = self._index.stale_rows()
        filled = 0
        for rows in stale.values():  # one index file at a time: a few thousand records in memory at most
            fresh = {}
            for row in rows:
                path = inside(self.root, row["path"])
                try:
                    record = json.loads(path.read_bytes()) if path is not None else None
                    fresh[row["episode_id"]] = {**index_row(record, row["path"]), **row}
                except (OSError, ValueError, TypeError, AttributeError) as exc:
                    log.warning("cannot fill in the index row of %s: %s", row["episode_id"], exc)
            with self._lock:
                filled += self._update_rows(fresh, only_stale=True)
        if filled:
            log.info("filled in the new index columns of %d rollout(s) from their records", filled)
        return filled

    def _update_rows(self, rows: dict[str, dict], *, only_stale: bool = False) -> int:
        """Replace the index rows of these episodes, in place, in the files that hold them (called under _lock).
        A compaction may move a row from its JSONL file into Parquet between the look-up and the rewrite: a row
        not found where it was looked up is looked up again."""
        left = {episode_id: _in_column_order(row) for episode_id, row in rows.items()}
        changed = 0
        for _ in range(3):
            self._index.refresh()
            by_file: dict[Path, dict[str, dict]] = {}
            for episode_id, row in left.items():
                file = self._index.file_of(episode_id)
                if file is not None:
                    by_file.setdefault(file, {})[episode_id] = row
            seen: set[str] = set()
            for file, wanted in by_file.items():
                change = _replacer(wanted, only_stale=only_stale, seen=seen)
                if file.suffix == ".parquet":  # compacted (rollouts.index.compaction): the Parquet file is swapped whole
                    count = rewrite_parquet_rows(self.root, file, change)
                else:
                    count = rewrite_lines(file, change)
                if count and self._pusher:
                    self._pusher.notify(file.relative_to(self.root).as_posix())
                changed += count
            left = {eid: row for wanted in by_file.values() for eid, row in wanted.items() if eid not in seen}
            if not left:
                break
        self._index.refresh()
        return changed

    def _set_aside(self, record: Any, problem: str) -> None:
        """Keep a refused record where nothing reads or pushes it, with the reason, so it can be mended by hand."""
        try:
            data = encode_record(record) if isinstance(record, dict) else repr(record).encode()
        except ValueError:
            data = repr(record).encode()
        name = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{secrets.token_hex(4)}"
        folder = self.root / SET_ASIDE_DIR
        atomic_write(folder / f"{name}.json", data)
        atomic_write(folder / f"{name}.why.txt", problem.encode() + b"\n")
        log.error("a rollout record was refused and set aside as %s/%s.json: %s", SET_ASIDE_DIR, name, problem)

    # -- reading ---------------------------------------------------------------------------------------------------

    def load(self, episode_id: str) -> dict | None:
        """The record, or None when this folder has no rollout with that id (or the id could not name one).

        A record file that cannot be read or breaks the schema raises RecordError naming the problem; the file
        stays as it is.
        """
        if not valid_episode_id(episode_id):
            return None
        path = self._locate(episode_id)
        if path is None:
            return None
        try:
            data = path.read_bytes()
        except OSError:
            data = b""
        record = parse_record(data, episode_id)
        problem = record_problem(record)
        if problem is not None:
            raise RecordError(f"the record of {episode_id} breaks the schema: {problem}")
        return record

    def has(self, episode_id: str) -> bool:
        return valid_episode_id(episode_id) and self._locate(episode_id) is not None

    def rows(self) -> list[dict]:
        """Every index row in the folder, from every writer, one per episode (first row wins)."""
        with self._lock:
            self._index.refresh()
            return [dict(row) for row in self._index.rows()]

    def find(self, **filters: Any) -> list[dict]:
        """Rows whose columns equal every filter, e.g. `find(run="r1", model="openai:gpt-x", task_id="dock-...")`."""
        unknown = set(filters) - set(COLUMNS)
        if unknown:
            raise ValueError(f"unknown index column(s): {', '.join(sorted(unknown))}")
        return [row for row in self.rows() if all(row.get(k) == v for k, v in filters.items())]

    def _locate(self, episode_id: str) -> Path | None:
        with self._lock:
            rel = self._index.path_of(episode_id)
            if rel is None:
                self._index.refresh()
                rel = self._index.path_of(episode_id)
        # Not indexed (yet): a record whose row was lost, or one another process is saving right now.
        return locate_record(self.root, episode_id, rel)

    # -- pushing ---------------------------------------------------------------------------------------------------

    def notify(self, rel: str) -> None:
        """Another file of the folder changed (`rel`, e.g. a match file, rollouts.matches): the pusher takes it
        with the next push. A MatchBook's `on_write`."""
        if self._pusher:
            self._pusher.notify(rel)

    def hold_back(self, withheld: Callable[[], Collection[str]]) -> None:
        """Keep the files of the episodes `withheld()` names (asked before each push) off the Hub until they are
        public: their records, traces and index and match rows (rollouts.withheld), pushed once it no longer names
        them. Nothing is held back for a local-only store, which pushes nothing."""
        if self._pusher:
            self._pusher.withheld = withheld

    def status(self) -> dict:
        """{"saved", "waiting", "last_push", "last_error", "dataset"} for the UI: saved = rollouts in the folder,
        waiting = of those, not yet on the Hub."""
        pushed = self._pusher.status() if self._pusher else {"waiting": 0, "last_push": None, "last_error": None}
        return {"saved": len(self._index), "waiting": pushed["waiting"], "last_push": pushed["last_push"],
                "last_error": pushed["last_error"] or self._offline_note, "dataset": self.dataset}

    def flush(self, timeout: float = 60.0) -> bool:
        """Push everything now and wait; True when nothing is left to push but what `hold_back` withholds (always
        True for a local-only store)."""
        return self._pusher.flush(timeout) if self._pusher else True

    def close(self, timeout: float = 10.0) -> None:
        """Stop the pusher (an in-flight commit may finish). Unpushed files stay in the folder for the next start."""
        self.running.close()
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
        readme = self.root / CARD
        current = readme.read_text(encoding="utf-8") if readme.is_file() else ""
        extras = dataset_card.record_fields(current) - set(dataset_card.RECORD_FEATURES)
        wanted = dataset_card.render(extras)
        if current != wanted:
            atomic_write(readme, wanted.encode())
        return set(dataset_card.RECORD_FEATURES) | extras

    def _extend_card(self, fields: set[str]) -> None:
        with self._shared:
            readme = self.root / CARD
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
        for file in self.root.glob(INDEX_GLOB):
            stat = file.stat()
            if file.name != own and now - stat.st_mtime < RECOVER_GRACE_S:
                continue
            with open(file, "rb+") as f:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX)  # the lock appends and rewrites take
                stat = os.fstat(f.fileno())
                if not stat.st_size or os.pread(f.fileno(), 1, stat.st_size - 1) == b"\n":
                    continue
                data = f.read()
                keep = data.rfind(b"\n") + 1
                f.truncate(keep)
                os.fsync(f.fileno())
                log.warning("cut a torn index line (%d bytes) off %s", len(data) - keep, file)
        for tmp in [*self.root.glob("rollouts/*/.*.tmp"), *self.root.glob(f"{TRACES_DIR}/*/.*.tmp"),
                    *self.root.glob(".*.tmp")]:
            # Another writer may rename its temp file between the glob and the stat.
            if now - _mtime(tmp, default=now) >= RECOVER_GRACE_S:
                tmp.unlink(missing_ok=True)

    def _repair_missing_rows(self) -> None:
        now = time.time()
        for path in self.root.glob(RECORD_GLOB):
            if path.stem in self._index or now - _mtime(path, default=now) < RECOVER_GRACE_S:
                continue
            if inside(self.root, path.relative_to(self.root).as_posix()) is None:
                log.error("not indexing %s: it is a link out of the store", path)
                continue
            try:
                record = json.loads(path.read_bytes())
                rel = path.relative_to(self.root).as_posix()
                save_trace(self.root, record, rel)  # the crash that lost the row may have lost the trace too
                self._append_row(index_row(record, rel), rel)
                log.warning("rebuilt the lost index row of %s", rel)
            except (ValueError, OSError) as exc:
                log.error("cannot index %s: %s", path, exc)


# -- files -------------------------------------------------------------------------------------------------------


def _replacer(wanted: dict[str, dict], *, only_stale: bool, seen: set[str]):
    """What `rewrite_lines` does to each line: the wanted row for its episode (only for a row lacking columns, when
    `only_stale`: a row filled in meanwhile is left alone), else nothing. Adds each wanted episode met to `seen`."""
    def change(old: Any) -> dict | None:
        if not isinstance(old, dict) or old.get("episode_id") not in wanted:
            return None
        seen.add(old["episode_id"])
        if only_stale and COLUMNS.keys() <= old.keys():
            return None
        return wanted[old["episode_id"]]

    return change


def _in_column_order(row: dict) -> dict:
    """The index columns first, in COLUMNS order, then any other keys the row has (from a newer version)."""
    return {**{name: row.get(name) for name in COLUMNS}, **row}


def _mtime(path: Path, *, default: float) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return default


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
