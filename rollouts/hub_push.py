"""The background pusher: takes the store folder's new and changed files to a Hub dataset repo in batched commits.

It only ever reads the folder, so the folder stays the source of truth; the Hub is a copy that catches up.

- When: every `every_s` seconds if anything changed, as soon as `every_n` rollouts were saved, right away for a
  backlog found at start (an earlier run's unpushed files), and on `flush()`.
- How: `HfApi.create_commit` with fewer than 100 files per commit (MAX_FILES_PER_COMMIT) and at most
  MAX_COMMITS_PER_HOUR commits an hour (the Hub allows about 128 per repo). The card and the records go first, then
  the records' agent traces (rollouts.traces), and the index files (append-only, pushed whole each time they grew)
  last, so an index row or a trace on the Hub points at a record that is already there, and a card that declares a
  new record field lands before the record.
- Many writers: several processes and machines may push to one dataset at once. Each writes only its own files
  (records are named by episode id, index files by writer id), so their commits never touch the same path; each
  commit names its parent (`parent_commit`, the head just read) and one refused because another writer committed
  first (HTTP 412/409) is retried on the new head with jittered backoff (CONFLICT_RETRIES times), then counts as
  a failed push like any other.
- Compaction: before a push, a JSONL index file past COMPACT_OVER_BYTES is folded into its Parquet file
  (rollouts.index.compaction); the commit then adds the Parquet file and deletes (or shrinks) the JSONL on the Hub. Only
  index files this folder pushed are ever deleted, and only once they are gone from the folder. Every writer
  pushes the card: before a commit carrying it, the record fields the Hub's card declares are merged in, so a
  field another writer declared is never dropped.
- Failures: any error (429, 5xx, network, auth) keeps everything on disk and retries with exponential backoff from
  `retry_base_s` up to `retry_max_s`, never sooner than a `Retry-After` the Hub sent. `status()["last_error"]` says
  what went wrong (never the token).
- The push log `.push/pushed.jsonl` (rollouts.push_log) records every pushed file version, one JSON line each:
  `{"path": "rollouts/2026-11-29/ab12cd34ef56.json", "size": 20481, "mtime_ns": 1764411300123456789,
  "sha1": "<git blob sha1 of the bytes pushed>", "commit": "<commit oid>", "at": "2026-11-29T10:15:00Z"}`; the last
  line for a path wins. A file whose size and mtime match its entry is not read again; one whose bytes hash to the
  recorded sha1 is not pushed again. The log is appended with one write and an fsync after each commit, so after
  a restart the pusher carries on with exactly what was not yet pushed. If a commit lands but its answer is lost, the
  retry sends the same bytes and the Hub (preupload reports its oids) drops them as unchanged: no second copy.
- Several processes may share one folder: `.push/push.lock` lets one of them push at a time.
- Withheld episodes (not public yet: the app's rule, handed over as `withheld`) stay off the Hub: each commit sends
  only what of its files names none of them (rollouts.withheld), and while anything is held back the pusher looks
  again at every `every_s`, so a held file goes up at the first push after its episode is public.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Collection
from pathlib import Path

from filelock import FileLock, Timeout
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi
from huggingface_hub.errors import (
    EntryNotFoundError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils.sha import git_hash

from rollouts import card as dataset_card
from rollouts.index.compaction import compact
from rollouts.jsonio import atomic_write
from rollouts.layout import (
    ANNOTATION_GLOB,
    BATTLE_GLOB,
    BOARD_GLOB,
    CARD,
    MATCH_GLOB,
    TRACE_GLOB,
    is_trace_rel,
)
from rollouts.push_log import PushedFiles
from rollouts.scrub import scrub
from rollouts.withheld import names_none, public_part

log = logging.getLogger(__name__)

MAX_FILES_PER_COMMIT = 90
MAX_COMMITS_PER_HOUR = 100
COMPACT_OVER_BYTES = 4 << 20  # a JSONL index file this large (about 5,000 rows) is folded into Parquet
CONFLICT_RETRIES = 8
CONFLICT_BASE_S = 0.2
CONFLICT_MAX_S = 10.0


def dataset_files(root: Path) -> list[str]:
    """The folder's files that belong in the dataset repo, card first, then records, traces, matches, flags, the
    board snapshots and their battles, index files."""
    files = ["README.md"] if (root / "README.md").is_file() else []
    for pattern in ("rollouts/*/*.json", TRACE_GLOB, MATCH_GLOB, ANNOTATION_GLOB, BOARD_GLOB, BATTLE_GLOB,
                    "index/*/*.jsonl",
                    "index/*/*.parquet"):
        files += sorted(p.relative_to(root).as_posix() for p in root.glob(pattern) if not p.name.startswith("."))
    return files


def pending_files(root: Path, pushed: PushedFiles) -> list[str]:
    """Files whose size or mtime differ from their entry in the push log (or that have none, or went partly)."""
    pending = []
    for rel in dataset_files(root):
        try:
            stat = (root / rel).stat()
        except FileNotFoundError:
            continue
        entry = pushed.get(rel)
        if entry is None or entry.get("held") or (entry.get("size"), entry.get("mtime_ns")) != (stat.st_size,
                                                                                               stat.st_mtime_ns):
            pending.append(rel)
    return pending + vanished_index_files(root, pushed)


def vanished_index_files(root: Path, pushed: PushedFiles) -> list[str]:
    """Index files pushed from this folder and since removed from it (a compaction folded every row): to delete
    on the Hub, where their rows would otherwise count twice beside the Parquet file."""
    return sorted(rel for rel, entry in pushed.entries.items()
                  if rel.startswith("index/") and not entry.get("deleted") and not (root / rel).exists())


def plan_commits(pending: list[str], limit: int = MAX_FILES_PER_COMMIT) -> list[list[str]]:
    """Split pending files into commits of at most `limit` files, index files in the last ones."""
    head = [rel for rel in pending if not rel.startswith("index/")]
    tail = [rel for rel in pending if rel.startswith("index/")]
    batches = [head[i:i + limit] for i in range(0, len(head), limit)] or [[]]
    room = limit - len(batches[-1])
    batches[-1] += tail[:room]
    batches += [tail[i:i + limit] for i in range(room, len(tail), limit)]
    return [batch for batch in batches if batch]


class _CommitBudget(Exception):
    def __init__(self, wait_s: float) -> None:
        super().__init__(f"commit budget of {MAX_COMMITS_PER_HOUR}/hour used up; next commit in {wait_s:.0f}s")
        self.wait_s = wait_s


class HubPusher:
    """One background thread that keeps a Hub dataset repo in step with a store folder (see the module doc)."""

    def __init__(self, root: Path, repo_id: str, *, token: str, endpoint: str | None = None,
                 every_s: float = 300, every_n: int = 50, retry_base_s: float = 2.0,
                 retry_max_s: float = 600.0) -> None:
        self.root = root
        self.repo_id = repo_id
        self._api = HfApi(endpoint=endpoint, token=token)
        self._token = token
        self._every_s, self._every_n = every_s, max(1, every_n)
        self._retry_base_s, self._retry_max_s = retry_base_s, retry_max_s
        self._pushed = PushedFiles(root / ".push" / "pushed.jsonl")
        self._push_lock = FileLock(root / ".push" / "push.lock")
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="rollout-pusher", daemon=True)
        self._commit_times: deque[float] = deque()
        self._repo_ready = False
        self.withheld: Callable[[], Collection[str]] = frozenset  # episodes whose files may not go yet
        self._holding = False  # this cycle held something back (rollouts.withheld): look again at the timer
        # Everything below is guarded by self._cond.
        self._waiting: set[str] = set()  # rollout files not on the Hub yet
        self._noticed: set[str] = set()  # rollout files saved since the running cycle listed the folder
        self._new = 0  # rollouts saved since the last cycle started
        self._dirty = False  # anything to push at the next timer
        self._backlog = False  # unpushed rollouts found at start: push right away
        self._stop = False
        self._flush_asked = self._flush_tried = self._flush_done = 0
        self._failures = 0
        self._retry_at = self._hold_until = self._next_push = 0.0
        self._last_push: str | None = None
        self._last_error: str | None = None

    # -- the store's side ------------------------------------------------------------------------------------------

    def start(self) -> None:
        """List what an earlier run left unpushed (local disk only, no network) and start the thread."""
        self._pushed.reload()
        pending = pending_files(self.root, self._pushed)
        backlog = {rel for rel in pending if rel.startswith("rollouts/")}
        with self._cond:
            self._waiting |= backlog
            # Traces alone (a `python -m rollouts traces --backfill` since the last push) go out right away too.
            self._backlog = bool(backlog) or any(is_trace_rel(rel) for rel in pending)
            self._next_push = time.monotonic() + self._every_s
        self._thread.start()

    def notify(self, rel: str) -> None:
        """A file was saved (called after it is on disk)."""
        with self._cond:
            self._dirty = True
            if rel.startswith("rollouts/"):
                self._waiting.add(rel)
                self._noticed.add(rel)
                self._new += 1
            self._cond.notify_all()  # the thread re-plans its sleep: the timer now matters

    def status(self) -> dict:
        with self._cond:
            return {"waiting": len(self._waiting), "last_push": self._last_push, "last_error": self._last_error}

    def flush(self, timeout: float) -> bool:
        """Ask for a push now and wait until a push that started after this call leaves nothing behind."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._flush_asked += 1
            mine = self._flush_asked
            self._cond.notify_all()
            while self._flush_done < mine:
                left = deadline - time.monotonic()
                if left <= 0 or self._stop:
                    return False
                self._cond.wait(left)
            return True

    def close(self, timeout: float = 10.0) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)

    # -- the thread ------------------------------------------------------------------------------------------------

    def _due(self, now: float) -> bool:
        if self._stop:
            return True
        if now < self._hold_until:  # the Hub said when to come back
            return False
        if self._flush_asked > self._flush_tried:
            return True
        if self._failures:
            return now >= self._retry_at
        return self._backlog or self._new >= self._every_n or (self._dirty and now >= self._next_push)

    def _sleep_s(self, now: float) -> float:
        times = [self._hold_until, self._retry_at if self._failures else 0.0, self._next_push if self._dirty else 0.0]
        future = [t - now for t in times if t > now]
        return min([60.0, *future])

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._due(time.monotonic()):
                    self._cond.wait(self._sleep_s(time.monotonic()))
                if self._stop:
                    return
                asked = self._flush_tried = self._flush_asked
                self._backlog, self._new, self._dirty = False, 0, False
            clean = self._cycle()
            with self._cond:
                self._next_push = time.monotonic() + self._every_s
                self._dirty = self._dirty or self._holding
                if clean:
                    self._failures = 0
                    self._last_error = None
                    self._flush_done = max(self._flush_done, asked)
                else:
                    self._dirty = True
                self._cond.notify_all()

    def _cycle(self) -> bool:
        """One push of everything pending; False (and a retry scheduled) on any failure."""
        try:
            self._check_repo()
            self._push_lock.acquire(timeout=0)
            try:
                self._pushed.reload()
                self._pushed.prune()
                self._holding = False
                with self._cond:
                    self._noticed = set()
                self._compact_index()
                pending = pending_files(self.root, self._pushed)
                with self._cond:
                    self._waiting = {rel for rel in pending if rel.startswith("rollouts/")} | self._noticed
                for batch in plan_commits(pending):
                    self._commit(batch)
            finally:
                self._push_lock.release()
            return True
        except Exception as exc:  # the thread must survive anything the Hub or the network does
            self._failed(exc)
            return False

    def _check_repo(self) -> None:
        # create_repo once per process; after that a cheap repo_info, which fails fast when the Hub is unreachable
        # (the upload calls retry connection errors inside huggingface_hub for ~20 s before giving up).
        if not self._repo_ready:
            self._api.create_repo(self.repo_id, repo_type="dataset", exist_ok=True)
            self._repo_ready = True
            return
        try:
            self._api.repo_info(self.repo_id, repo_type="dataset")
        except RepositoryNotFoundError:
            self._repo_ready = False
            raise

    def _compact_index(self) -> None:
        """Fold JSONL index files past COMPACT_OVER_BYTES into Parquet; a failure leaves them to the next cycle."""
        try:
            withheld = frozenset(self.withheld())  # rows of those stay in JSONL, sent without them
            compact(self.root, min_bytes=COMPACT_OVER_BYTES,
                    only=lambda jsonl: names_none(jsonl.read_bytes(), withheld))
        except Exception as exc:  # the JSONL rows are still there and still pushed
            log.warning("compacting the index of %s failed: %s", self.root, exc)

    def _commit(self, batch: list[str]) -> None:
        operations: list[CommitOperationAdd | CommitOperationDelete] = []
        entries = []
        versions = [(rel, *_read_version(self.root / rel)) for rel in batch]
        # Asked after reading: a row in those bytes was written after its match began, so its episode is known.
        withheld = frozenset(self.withheld())
        for rel, stat, data in versions:
            known = self._pushed.get(rel)
            if stat is None:
                if rel.startswith("index/") and known and not known.get("deleted"):  # folded by a compaction
                    operations.append(CommitOperationDelete(path_in_repo=rel))
                    entries.append({"path": rel, "deleted": True})
                continue
            sent = public_part(rel, data, withheld)
            if sent is None:  # nothing of it may go yet: no entry, so it stays pending
                self._holding = True
                continue
            entry = {"path": rel, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha1": git_hash(sent)}
            if len(sent) < len(data):  # rows held back: pending until sent whole
                entry["held"] = self._holding = True
            if known and known.get("sha1") == entry["sha1"]:  # touched, not changed
                entries.append({**entry, "commit": known.get("commit")})
            elif sent:
                operations.append(CommitOperationAdd(path_in_repo=rel, path_or_fileobj=sent))
                entries.append(entry)
            elif rel.startswith("index/") and known and not known.get("deleted"):
                # Every whole row was folded into Parquet (a torn tail may remain): the Hub's copy goes.
                operations.append(CommitOperationDelete(path_in_repo=rel))
                entries.append({**entry, "deleted": True})
        if operations:
            self._spend_commit()
            oid = self._create_commit(operations)
            for entry in entries:
                entry.setdefault("commit", oid)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self._pushed.append([{**entry, "at": stamp} for entry in entries])
        with self._cond:
            self._waiting -= {entry["path"] for entry in entries}
            if operations:
                self._last_push = stamp
        if operations:
            log.info("pushed %d file(s) to %s", len(operations), self.repo_id)

    def _create_commit(self, operations: list) -> str | None:
        """One commit on top of the head just read (its oid); refused because another writer committed first, it
        is tried again on the new head after a jittered, growing pause (writers that collided then spread out)."""
        for attempt in range(CONFLICT_RETRIES):
            parent = self._api.repo_info(self.repo_id, repo_type="dataset").sha
            operations = self._still_to_delete(self._with_their_card_fields(operations, parent), parent)
            if not operations:
                return parent
            try:
                return self._api.create_commit(self.repo_id, operations, commit_message=_message(operations),
                                               repo_type="dataset", parent_commit=parent).oid
            except HfHubHTTPError as exc:
                status = exc.response.status_code if exc.response is not None else None
                if status not in (409, 412) or attempt + 1 == CONFLICT_RETRIES:
                    raise
                pause = min(CONFLICT_MAX_S, CONFLICT_BASE_S * 2 ** attempt) * random.uniform(0.5, 1.5)
                log.info("commit to %s refused (HTTP %s: another writer committed first); again in %.2fs",
                         self.repo_id, status, pause)
                time.sleep(pause)
        raise AssertionError("unreachable")

    def _still_to_delete(self, operations: list, parent: str | None) -> list:
        """The operations without deletions of files the Hub no longer has at `parent` (a commit that landed but
        whose answer was lost deleted them already); the Hub refuses a commit deleting a missing file."""
        doomed = [op.path_in_repo for op in operations if isinstance(op, CommitOperationDelete)]
        if not doomed or parent is None:
            return operations
        there = {info.path for info in self._api.get_paths_info(self.repo_id, doomed, repo_type="dataset",
                                                                 revision=parent)}
        return [op for op in operations if not isinstance(op, CommitOperationDelete) or op.path_in_repo in there]

    def _with_their_card_fields(self, operations: list, parent: str | None) -> list:
        """The operations with the card we push declaring every record field the Hub's card declares at `parent`
        too: another writer may have declared a field this folder never saw, and dropping it would break
        `load_dataset(repo, "rollouts")` on that writer's records. The merged card is kept locally as well."""
        ours = next((op for op in operations if isinstance(op, CommitOperationAdd) and op.path_in_repo == CARD),
                    None)
        if ours is None or parent is None:
            return operations
        try:
            theirs = Path(self._api.hf_hub_download(self.repo_id, CARD, repo_type="dataset", revision=parent))
            their_fields = dataset_card.record_fields(theirs.read_text(encoding="utf-8"))
        except (EntryNotFoundError, RevisionNotFoundError):  # no card yet (or no commit yet)
            return operations
        with FileLock(self.root / ".push" / "store.lock"):  # the store's lock for card rewrites
            local = self.root / CARD
            our_fields = dataset_card.record_fields(local.read_text(encoding="utf-8") if local.is_file() else "")
            if their_fields <= our_fields:
                return operations
            merged = dataset_card.render((our_fields | their_fields) - set(dataset_card.RECORD_FEATURES)).encode()
            atomic_write(local, merged)
        log.info("the card of %s declares record field(s) %s this folder lacked: merged", self.repo_id,
                 ", ".join(sorted(their_fields - our_fields)))
        return [CommitOperationAdd(path_in_repo=CARD, path_or_fileobj=merged) if op is ours else op
                for op in operations]

    def _spend_commit(self) -> None:
        now = time.monotonic()
        while self._commit_times and now - self._commit_times[0] > 3600:
            self._commit_times.popleft()
        if len(self._commit_times) >= MAX_COMMITS_PER_HOUR:
            raise _CommitBudget(3600 - (now - self._commit_times[0]))
        self._commit_times.append(now)

    def _failed(self, exc: Exception) -> None:
        wait = _retry_after(exc)
        with self._cond:
            self._failures += 1
            delay = min(self._retry_max_s, self._retry_base_s * 2 ** (self._failures - 1))
            now = time.monotonic()
            if wait is not None:
                self._hold_until = now + wait
                delay = max(delay, wait)
            self._retry_at = now + delay
            self._last_error = self._describe(exc)
        log.warning("push to %s failed (%s); retrying in %.1fs", self.repo_id, self._last_error, delay)

    def _describe(self, exc: Exception) -> str:
        if isinstance(exc, Timeout):
            text = "another process is pushing this folder"
        elif isinstance(exc, HfHubHTTPError) and exc.response is not None:
            text = f"HTTP {exc.response.status_code}: {str(exc).splitlines()[0]}"
        else:
            text = f"{type(exc).__name__}: {exc}"
        # Scrubbed before it is cut, as the loop's errors are: a masked echo of the token gives part of it away too.
        return scrub(text, [self._token or ""])[:300]


def _read_version(path: Path) -> tuple[os.stat_result | None, bytes]:
    """(stat, bytes) of the file now (whole rows only for JSONL), or (None, b"") when it is gone."""
    try:
        stat = path.stat()  # before reading: a change after this shows as a new version next time
        data = path.read_bytes()
    except FileNotFoundError:
        return None, b""
    return stat, data[: data.rfind(b"\n") + 1] if path.suffix == ".jsonl" else data


def _retry_after(exc: Exception) -> float | None:
    if isinstance(exc, _CommitBudget):
        return exc.wait_s
    response = getattr(exc, "response", None)
    value = response.headers.get("Retry-After") if response is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _message(operations: list[CommitOperationAdd | CommitOperationDelete]) -> str:
    paths = [op.path_in_repo for op in operations]
    rollouts = sum(rel.startswith("rollouts/") for rel in paths)
    parts = [f"add {rollouts} rollout{'s' * (rollouts != 1)}"] if rollouts else []
    if traces := sum(is_trace_rel(rel) for rel in paths):
        parts.append(f"{'' if rollouts else 'add '}{traces} agent trace{'s' * (traces != 1)}")
    if any(rel.startswith("matches/") for rel in paths):
        parts.append("update the matches")
    if any(rel.startswith("annotations/") for rel in paths):
        parts.append("update the flags")
    if any(rel.startswith("index/") for rel in paths):
        parts.append("update the index")
    if "README.md" in paths:
        parts.append("update the dataset card")
    text = ", ".join(parts)
    return text[:1].upper() + text[1:]
