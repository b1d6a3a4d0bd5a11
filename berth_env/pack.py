"""Task packs: loading, verifying and indexing the tasks the arena serves (§1.1).

A pack is a directory holding `tasks.jsonl` (or `tasks.jsonl.gz`), one task per line, and optionally a
`manifest.json` whose `sha256` pins the (decompressed) file body. The bundled dock-v1-eval pack is always served;
`BERTH_TASKS_DIR` (colon-separated directories) adds more packs after it, and `set_runtime_packs` adds packs while
the process runs (tasks that arrive after the server started, e.g. downloaded ones): every `load_pack()` from then
on, and so every new session of an in-process server, serves them too.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from berth_env.settings import tasks_dirs

BUNDLED_PACK = Path(__file__).resolve().parent / "data" / "dock-v1-eval"
# The difficulty tiers of dock-v1 (a task's `difficulty`), easiest first.
TIERS = ("standard", "busy", "storm", "extreme")


class PackError(ValueError):
    """A pack that cannot be served: missing files, a digest mismatch, a malformed line or a duplicate task id."""


@dataclass(frozen=True, slots=True)
class Pack:
    """The loaded tasks, in load order (pack order, then line order), indexed by id and by split.

    Task dicts are shared with every caller (the pack is cached): treat them as read-only.
    """

    tasks: list[dict[str, Any]]
    roots: tuple[Path, ...] = ()
    _by_id: dict[str, dict[str, Any]] = field(init=False, repr=False, compare=False)
    _by_split: dict[str, list[dict[str, Any]]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_id: dict[str, dict[str, Any]] = {}
        by_split: dict[str, list[dict[str, Any]]] = {}
        for task in self.tasks:
            by_id[task["task_id"]] = task
            by_split.setdefault(task["split"], []).append(task)
        object.__setattr__(self, "_by_id", by_id)
        object.__setattr__(self, "_by_split", by_split)

    def get(self, task_id: str) -> dict[str, Any]:
        """The task with this id; KeyError naming the id if the pack has none."""
        try:
            return self._by_id[task_id]
        except (KeyError, TypeError):
            raise KeyError(f"unknown task {task_id!r}") from None

    def splits(self) -> list[str]:
        """Split names (from each task's own `split` field), sorted."""
        return sorted(self._by_split)

    def quays(self) -> list[str]:
        """The quays the pack's tasks are set at, sorted."""
        return sorted({str(task.get("quay")) for task in self.tasks if task.get("quay")})

    def split(self, name: str) -> list[dict[str, Any]]:
        """The tasks of one split in load order (empty for an unknown split); index i is the split's task i."""
        return list(self._by_split.get(name, ()))

    @staticmethod
    def public(task: Mapping[str, Any]) -> dict[str, Any]:
        """The task as agents and the Task API may see it: everything but `reference` (a new top-level dict)."""
        return {key: value for key, value in task.items() if key != "reference"}


def _read_tasks_body(root: Path) -> tuple[Path, bytes]:
    """The decompressed body of the pack's task file; plain `tasks.jsonl` wins over `tasks.jsonl.gz`."""
    for name, opener in (
        ("tasks.jsonl", Path.read_bytes),
        ("tasks.jsonl.gz", lambda p: gzip.decompress(p.read_bytes())),
    ):
        path = root / name
        if path.is_file():
            try:
                return path, opener(path)
            except (OSError, EOFError, gzip.BadGzipFile) as err:
                raise PackError(f"cannot read {path}: {err}") from err
    raise PackError(f"{root} is not a task pack: it has neither tasks.jsonl nor tasks.jsonl.gz")


def _verify_manifest(root: Path, path: Path, body: bytes) -> None:
    """If the manifest pins a sha256, the decompressed body must match it: a stale or edited pack is refused."""
    manifest_path = root / "manifest.json"
    if not manifest_path.is_file():
        return
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise PackError(f"cannot read {manifest_path}: {err}") from err
    expected = manifest.get("sha256") if isinstance(manifest, dict) else None
    if not expected:
        return
    actual = hashlib.sha256(body).hexdigest()
    if actual != str(expected).lower():
        raise PackError(
            f"{path} does not match its manifest: sha256 is {actual}, {manifest_path} says {expected}; "
            "the pack was changed or is incomplete"
        )


def _parse_tasks(path: Path, body: bytes) -> list[dict[str, Any]]:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as err:
        raise PackError(f"{path} is not UTF-8: {err}") from err
    tasks = []
    # Split on newlines only: str.splitlines() would also break at U+2028 inside a JSON string.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            task = json.loads(line)
        except ValueError as err:
            raise PackError(f"{path} line {number} is not valid JSON: {err}") from err
        problem = _schema_problem(task)
        if problem:
            raise PackError(f"{path} line {number}: {problem}")
        tasks.append(task)
    return tasks


def task_problem(task: Any) -> str | None:
    """Why a task cannot go into a pack, or None: the few facts every module relies on (see `_schema_problem`)."""
    return _schema_problem(task)


def _schema_problem(task: Any) -> str | None:
    """The few facts every module relies on: a string id and split, and ships whose ids are their positions."""
    if not isinstance(task, dict):
        return "a task must be a JSON object"
    if not isinstance(task.get("task_id"), str) or not isinstance(task.get("split"), str):
        return "a task needs string `task_id` and `split` fields"
    ships = task.get("ships")
    if not isinstance(ships, list) or any(
        not isinstance(ship, dict) or ship.get("id") != index for index, ship in enumerate(ships)
    ):
        return f"task {task['task_id']!r}: `ships` must be a list whose ship ids are 0..n-1 in order"
    return None


def load_pack(dirs: Iterable[str | os.PathLike[str]] | None = None) -> Pack:
    """Load packs from `dirs` in order; with no argument, the bundled pack, `$BERTH_TASKS_DIR` and the runtime packs
    (cached).

    Raises PackError for an unreadable pack, a digest mismatch or a task id that appears twice. A directory listed
    twice (e.g. the bundled pack also named in the variable) is loaded once.
    """
    if dirs is None:
        return _default_pack(tasks_dirs(), _runtime)
    return _load(Path(d) for d in dirs)


def base_pack() -> Pack:
    """The bundled pack and `$BERTH_TASKS_DIR`, without the runtime packs: what a new runtime pack must not repeat."""
    return _default_pack(tasks_dirs(), ())


# Runtime packs, replaced whole (one tuple assignment), so a reader sees the old set or the new one, never a mix.
_runtime: tuple[Path, ...] = ()


def runtime_packs() -> tuple[Path, ...]:
    return _runtime


def set_runtime_packs(dirs: Iterable[str | os.PathLike[str]]) -> Pack:
    """Serve the packs in `dirs` after the bundled pack and `$BERTH_TASKS_DIR`, replacing earlier runtime packs;
    returns the pack `load_pack()` now gives.

    The combined pack is loaded first, so a broken pack (or one repeating a served task id) raises PackError and
    nothing changes. Packs are read once and cached by directory (`write_pack` names each by its content).
    """
    global _runtime
    wanted = tuple(Path(d).expanduser().resolve() for d in dirs)
    # Packs replaced by this call would otherwise stay in the cache (a thousand tasks are tens of megabytes); a
    # reader racing this call may load the old set once more, which is correct, only slower.
    _default_pack.cache_clear()
    pack = _default_pack(tasks_dirs(), wanted)
    _runtime = wanted
    return pack


@functools.lru_cache(maxsize=4)
def _default_pack(extra: str, runtime: tuple[Path, ...]) -> Pack:
    """Cached per value of the variable and set of runtime packs, so a change to either is honoured."""
    return _load([BUNDLED_PACK, *(Path(part) for part in extra.split(":") if part.strip()), *runtime])


def write_pack(parent: str | os.PathLike[str], tasks: Iterable[Mapping[str, Any]],
               manifest: Mapping[str, Any] | None = None) -> Path:
    """Write `tasks` as a pack (`tasks.jsonl` and a `manifest.json` pinning its sha256) in a directory of `parent`
    named by that digest, and return the directory. Named by content, a changed pack is a new directory, which is
    what the pack cache needs. The directory appears whole or not at all (written beside it, then renamed in); one
    already holding this pack is kept.
    """
    body = "".join(json.dumps(task, ensure_ascii=False, separators=(",", ":")) + "\n" for task in tasks).encode()
    digest = hashlib.sha256(body).hexdigest()
    target = Path(parent) / digest[:16]
    if _holds(target, body, digest):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    (staging / "tasks.jsonl").write_bytes(body)
    (staging / "manifest.json").write_text(json.dumps({**(manifest or {}), "sha256": digest}, indent=2),
                                           encoding="utf-8")
    if target.exists():  # a damaged copy under this name: set aside, then removed
        stale = Path(tempfile.mkdtemp(prefix=f".{target.name}-stale-", dir=target.parent))
        target.rename(stale / target.name)
        shutil.rmtree(stale, ignore_errors=True)
    try:
        staging.rename(target)
    except OSError:  # another writer renamed the same pack in first
        shutil.rmtree(staging, ignore_errors=True)
        if not _holds(target, body, digest):
            raise
    return target


def _holds(root: Path, body: bytes, digest: str) -> bool:
    try:
        manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
        return manifest.get("sha256") == digest and (root / "tasks.jsonl").read_bytes() == body
    except (OSError, ValueError, AttributeError):
        return False


def _load(dirs: Iterable[Path]) -> Pack:
    roots: list[Path] = []
    tasks: list[dict[str, Any]] = []
    origin: dict[str, Path] = {}
    for given in dirs:
        root = given.expanduser().resolve()
        if root in roots:
            continue
        if not root.is_dir():
            raise PackError(f"task pack directory {given} does not exist")
        path, body = _read_tasks_body(root)
        _verify_manifest(root, path, body)
        for task in _parse_tasks(path, body):
            task_id = task["task_id"]
            if task_id in origin:
                raise PackError(f"task id {task_id!r} appears twice: in {origin[task_id]} and in {path}")
            origin[task_id] = path
            tasks.append(task)
        roots.append(root)
    return Pack(tasks, tuple(roots))
