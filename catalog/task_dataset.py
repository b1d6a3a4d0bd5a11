"""The tasks dataset: every dock-v1 task (train and eval) from a Hub dataset, checked, then served here.

`TASKS_DATASET` (default `FineEnvs/PortSimEnv`) names the dataset; its `tasks` config is `tasks/train.parquet` and
`tasks/eval.parquet`, one row per task (DESIGN.md "The tasks dataset"). `TaskDataset.load()` goes:

1. the files of the revision that last loaded (`state.json` in the cache folder names it) go in at once, if
   huggingface_hub has them cached: a restart serves every task without the network;
2. one probe (a GET with a short timeout, no retries) asks the Hub for the current revision. Offline, or with the
   Hub down, step 1 stands, or else the bundled eval tasks serve alone and the status says so;
3. a new revision is downloaded (bounded in time and size), checked (catalog/task_verdicts.py; verdicts cached by file sha256) and
   installed: the tasks the bundled pack does not already serve are written as a task pack in the cache folder
   (`packs/<digest>/`) and handed to `berth_env.pack.set_runtime_packs`, so the in-process berth server serves
   them from its next session on, and so does `python -m berth_env --tasks-dir <that folder>`.

The app calls `start()` (a daemon thread: it serves before the download ends); the CLI calls `load()`. The process
serves one tasks dataset at a time; `tasks_status()` says which, for the page and the CLI.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from berth_env.pack import PackError, base_pack, set_runtime_packs, write_pack
from catalog.task_verdicts import REFERENCE_COLUMNS, VerdictCache, checked_rows, file_sha256
from rollouts import settings
from rollouts.layout import space_storage
from rollouts.sources.hub import HubRepo, describe, offline

log = logging.getLogger(__name__)

DEFAULT_DATASET = settings.TASKS_DATASET.default
DATASET_VAR = settings.TASKS_DATASET.name
CACHE_VAR = settings.TASKS_CACHE.name
FILES = {"eval": "tasks/eval.parquet", "train": "tasks/train.parquet"}  # eval first: the benchmark split leads
PROBE_TIMEOUT_S = 5.0
FILE_TIMEOUT_S = 120.0  # one Parquet file, retries included (a few megabytes)
FILE_MAX_BYTES = 64 << 20  # one Parquet file: the train split's 1,050 tasks are 5.7 MB
COLUMNS = ("task_id", "split", "task", *REFERENCE_COLUMNS)


@dataclass(frozen=True)
class TasksStatus:
    """What this process serves. `state`: `bundled` (no dataset set), `loading`, `ready` or `offline`."""

    state: str
    dataset: str | None
    text: str  # a few words for the page: what is served
    splits: dict[str, int]  # tasks served per split, bundled ones included
    detail: str | None = None  # why the dataset is not (or not freshly) served, for the CLI and the log
    left_out: tuple[str, ...] = ()
    revision: str | None = None
    version: int = 0  # changes whenever the status does

    @property
    def total(self) -> int:
        return sum(self.splits.values())


def _bundled_splits() -> dict[str, int]:
    return dict(sorted(Counter(task["split"] for task in base_pack().tasks).items()))


def _bundled_text(splits: dict[str, int]) -> str:
    return f"the {sum(splits.values())} bundled {' and '.join(splits)} tasks"


_status = TasksStatus("bundled", None, _bundled_text(_bundled_splits()), _bundled_splits())
_status_lock = threading.Lock()
_install_lock = threading.Lock()  # one dataset installs at a time


def tasks_status() -> TasksStatus:
    return _status


def _publish(status: TasksStatus) -> TasksStatus:
    global _status
    with _status_lock:
        _status = replace(status, version=_status.version + 1)
        return _status


def default_cache_dir() -> Path:
    """`TASKS_CACHE`, else the Space's persistent storage when it has some, else the user's cache folder."""
    given = settings.TASKS_CACHE.get()
    if given:
        return given
    storage = space_storage()
    if storage:
        return storage / ".cache" / "berth-arena" / "tasks"
    return (settings.XDG_CACHE_HOME.get() or Path.home() / ".cache") / "berth-arena" / "tasks"


def dataset_from_env() -> str | None:
    """`TASKS_DATASET`; set but empty means none (the bundled tasks alone)."""
    return settings.TASKS_DATASET.get()


class TaskDataset:
    """One Hub tasks dataset, its cache folder and its loading; see the module docstring."""

    def __init__(self, repo: str, *, cache_dir: str | os.PathLike[str] | None = None, endpoint: str | None = None,
                 token: str | None = None, probe_timeout: float = PROBE_TIMEOUT_S,
                 file_timeout: float = FILE_TIMEOUT_S) -> None:
        self.repo = repo
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.hub = HubRepo(repo, endpoint=endpoint, token=token, cache_dir=self.cache_dir / "hub",
                           probe_timeout=probe_timeout, file_timeout=file_timeout)
        self._thread: threading.Thread | None = None
        self._done = threading.Event()

    # -- running -----------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Load in a daemon thread; `tasks_status()` says how it goes."""
        if self._thread is None:
            self._loading()  # at once: a page drawn before the thread runs says so
            self._thread = threading.Thread(target=self._load_quietly, name="tasks-dataset", daemon=True)
            self._thread.start()

    def wait(self, timeout: float | None = None) -> TasksStatus:
        self._done.wait(timeout)
        return tasks_status()

    def _load_quietly(self) -> None:
        try:
            self.load()
        except Exception:  # a bug guard: the page keeps the bundled tasks and the log says why
            log.exception("loading the tasks dataset %s failed", self.repo)
            self._done.set()

    def load(self) -> TasksStatus:
        """Serve the dataset's tasks (cached ones at once, then the Hub's current revision); never raises for a
        Hub that cannot be reached, and never waits past the timeouts."""
        try:
            with _install_lock:
                return self._load()
        finally:
            self._done.set()

    def _load(self) -> TasksStatus:
        state = self._read_state()
        cached = self._installed_from_cache(state)
        if cached is None and tasks_status().state != "loading":
            self._loading()
        if offline():
            return self._unreachable(cached, "offline mode (HF_HUB_OFFLINE)")
        try:
            revision = self.hub.head_commit()
            if cached is not None and revision == state.get("revision"):
                return cached
            paths = {split: self.hub.download(path, revision, max_bytes=FILE_MAX_BYTES)
                     for split, path in FILES.items()}
        except Exception as exc:
            return self._unreachable(cached, describe(exc))
        try:
            status = self._install(paths, revision)
        except DatasetError as exc:
            return self._unreachable(cached, str(exc))
        self._write_state({"dataset": self.repo, "revision": revision})
        return status

    def _loading(self) -> None:
        splits = _bundled_splits()
        _publish(TasksStatus("loading", self.repo, f"loading the tasks of {self.repo}… meanwhile "
                             f"{_bundled_text(splits)}", splits))

    def _installed_from_cache(self, state: dict) -> TasksStatus | None:
        """Install the files of the last good revision when huggingface_hub still has them; None otherwise."""
        revision = state.get("revision")
        if state.get("dataset") != self.repo or not isinstance(revision, str):
            return None
        try:
            paths = {split: self.hub.download(path, revision, cached_only=True, max_bytes=FILE_MAX_BYTES)
                     for split, path in FILES.items()}
            return self._install(paths, revision)
        except Exception as exc:  # evicted, or unreadable now: the Hub is asked next
            log.info("tasks dataset %s: the cached copy cannot be used (%s)", self.repo, describe(exc))
            return None

    def _unreachable(self, cached: TasksStatus | None, reason: str) -> TasksStatus:
        log.info("tasks dataset %s: %s", self.repo, reason)
        if cached is not None:
            return _publish(replace(cached, text=f"{cached.text} · cached copy", detail=f"{self.repo}: {reason}"))
        set_runtime_packs([])  # what the page says is what is served
        splits = _bundled_splits()
        return _publish(TasksStatus("offline", self.repo, f"offline: {_bundled_text(splits)}", splits,
                                    f"{self.repo}: {reason}"))

    # -- installing --------------------------------------------------------------------------------------------

    def _install(self, paths: dict[str, str], revision: str) -> TasksStatus:
        """Serve the files' checked tasks; DatasetError when they cannot be used at all.

        The pack these exact files make (with this grader and these bundled tasks) is remembered, so a restart
        only hashes the files and loads the pack: no Parquet reading, no grading, no writing.
        """
        cache = VerdictCache(self.cache_dir / "verdicts.json")
        digests = {split: file_sha256(path) for split, path in paths.items()}
        served = sorted(task["task_id"] for task in base_pack().tasks)
        key = hashlib.sha256(json.dumps([digests, served]).encode()).hexdigest()[:32]
        made = cache.pack(key)
        try:
            if made is None:
                raise PackError("not made yet")
            left_out = [tuple(item) for item in made.get("left_out") or []]
            pack_dir = self.cache_dir / "packs" / made["pack"]
            pack = set_runtime_packs([pack_dir])
        except PackError:  # never made, removed or damaged: made (again) from the files
            pack_dir, left_out = self._make_pack(paths, digests, cache, set(served), revision)
            cache.put_pack(key, pack_dir.name, left_out)
            try:
                pack = set_runtime_packs([pack_dir])
            except PackError as exc:
                raise DatasetError(f"the checked tasks could not be served ({exc})") from exc
        for task_id, reason in left_out:
            log.warning("task %s of %s left out: %s", task_id, self.repo, reason)
        _remove_other_packs(pack_dir)
        splits = dict(sorted(Counter(task["split"] for task in pack.tasks).items()))
        text = f"{sum(splits.values()):,} tasks ({' · '.join(f'{n:,} {s}' for s, n in splits.items())}) " \
               f"from {self.repo}"
        detail = None
        if left_out:
            text += f" · {len(left_out)} left out"
            detail = (f"{len(left_out)} tasks left out: their references do not hold under our grader, or they are "
                      "too large to grade (see the log)")
        return _publish(TasksStatus("ready", self.repo, text, splits, detail, tuple(t for t, _ in left_out),
                                    revision))

    def _make_pack(self, paths: dict[str, str], digests: dict[str, str], cache: VerdictCache, served: set[str],
                   revision: str) -> tuple[Path, list[tuple[str, str]]]:
        """Check every row (verdicts from the cache where it has them) and write the passing new tasks as a pack."""
        tasks, left_out = [], []
        for split, path in paths.items():
            known = cache.get(digests[split])
            passed, verdicts, dropped = checked_rows(_read_rows(path, FILES[split]), known)
            if known is None:
                cache.put(digests[split], verdicts)
            tasks += passed
            left_out += dropped
        new = [task for task in tasks if task["task_id"] not in served]
        try:
            return write_pack(self.cache_dir / "packs", new, {"name": self.repo, "revision": revision}), left_out
        except OSError as exc:
            raise DatasetError(f"the checked tasks could not be written to {self.cache_dir} ({exc})") from exc

    # -- the state file ----------------------------------------------------------------------------------------

    def _read_state(self) -> dict:
        try:
            state = json.loads((self.cache_dir / "state.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return state if isinstance(state, dict) else {}

    def _write_state(self, state: dict) -> None:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        temp = self.cache_dir / ".state.json.tmp"
        temp.write_text(json.dumps(state), encoding="utf-8")
        os.replace(temp, self.cache_dir / "state.json")


class DatasetError(RuntimeError):
    """A downloaded tasks file that cannot be used at all (not Parquet, no task columns)."""


def _read_rows(path: str, name: str) -> list[dict]:
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
        missing = [column for column in ("task_id", "task") if column not in schema.names]
        if missing:
            raise DatasetError(f"{name} has no {', '.join(missing)} column")
        return pq.read_table(path, columns=[c for c in COLUMNS if c in schema.names]).to_pylist()
    except DatasetError:
        raise
    except Exception as exc:  # not Parquet, truncated...
        raise DatasetError(f"{name} cannot be read ({type(exc).__name__}: {str(exc)[:160]})") from exc


def _remove_other_packs(keep: Path) -> None:
    """Packs of earlier revisions (each process holds the pack it serves in memory, so removing is safe)."""
    for old in keep.parent.iterdir():
        if old != keep and old.is_dir() and not old.name.startswith("."):
            shutil.rmtree(old, ignore_errors=True)


def uninstall() -> TasksStatus:
    """Serve the bundled tasks alone again (tests; a dataset switched off)."""
    with _install_lock:
        set_runtime_packs([])
        splits = _bundled_splits()
        return _publish(TasksStatus("bundled", None, _bundled_text(splits), splits))


def serve_tasks_dataset(repo: str | None = None, *, background: bool = False,
                        **options: object) -> TaskDataset | None:
    """Load the tasks dataset (`TASKS_DATASET` unless `repo` is given) into this process: in a daemon thread for
    the app, or now, bounded by the timeouts, for the CLI. None when no dataset is set (the bundled tasks serve).
    `options` go to TaskDataset (cache_dir, endpoint, token, timeouts)."""
    repo = repo if repo is not None else dataset_from_env()
    if not repo:
        return None
    options.setdefault("token", settings.HF_TOKEN.get())
    dataset = TaskDataset(repo, **options)  # type: ignore[arg-type]
    if background:
        dataset.start()
    else:
        dataset.load()
    return dataset
