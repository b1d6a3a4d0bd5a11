"""A sweep's state: its plan and, per shard, the Job that plays it and the last stage seen. Kept in two places, so
the sweep can be followed, resumed or cancelled from this machine or any other:

    <rollout folder>/.sweeps/<run>.json    this machine's copy (written on every change)
    <dataset>/.sweeps/<run>.json           the dataset's copy (uploaded when Jobs are submitted or cancelled, and
                                           when the sweep ends)

The same path in the folder and the dataset; the store's pusher never pushes it (it pushes only the card, records
and index files). It holds no secret: the names of the secrets the Jobs were given, never their values.

Every copy is checked as it is read (`SweepState.from_bytes`: its plan by `SweepPlan.check`, each shard's fields),
and the dataset's copy is untrusted: anyone who may write the dataset can write it. So the plan a sweep acts on is
this machine's (`reconcile`); a dataset copy whose plan differs is reported field by field (`plan_differences`),
never followed silently. Every file of a sweep in the rollout folder is reached through `in_folder`, the layout's
one inside rule: no `..`, absolute path or link out of the folder.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from batch.grid import check_run_name
from batch.sweep_plan import HF_JOBS, SweepError, SweepPlan
from rollouts.jsonio import atomic_write
from rollouts.layout import inside

log = logging.getLogger(__name__)

SWEEPS_DIR = ".sweeps"
VERSION = 1
# A Job in one of these stages runs no more (huggingface_hub's JobStage names); PENDING: never submitted.
TERMINAL = ("COMPLETED", "CANCELED", "ERROR", "DELETED")
FAILED = ("CANCELED", "ERROR", "DELETED")
PENDING = "PENDING"
STATE_MAX_BYTES = 8 * 1024 * 1024  # a sweep of 20,000 tasks is about 1 MB
JOB_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
STAGE = re.compile(r"[A-Z_]{1,32}")
SECRET_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")
STAMP = re.compile(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z)?")
TEXT_MAX_CHARS = 2000
# How the plan's fields are named when two copies differ: the options that set them.
PLAN_LABELS = {"run_args": "arguments", "timeout_s": "timeout", "on": "where (--on)", "out": "output folder"}


class SweepStateError(Exception):
    """No such sweep, or its state file cannot be read; the message says which and what to do."""


@dataclass
class ShardJob:
    shard: int  # 1-based
    job_id: str | None = None
    stage: str = PENDING
    message: str | None = None
    url: str | None = None
    running_s: float | None = None  # how long the Job ran (for what the sweep cost)
    earlier: list[str] = field(default_factory=list)  # ids of Jobs that played this shard before and failed

    @property
    def done(self) -> bool:
        return self.stage in TERMINAL

    @property
    def needs_job(self) -> bool:
        """Never submitted, or its Job failed or was cancelled: what --resume submits again."""
        return self.stage in FAILED or self.stage == PENDING


@dataclass
class SweepState:
    plan: SweepPlan
    shards: list[ShardJob]
    secret_names: list[str] = field(default_factory=list)
    created: str = ""
    updated: str = ""

    @classmethod
    def new(cls, plan: SweepPlan, secret_names: list[str]) -> SweepState:
        now = _now()
        return cls(plan, [ShardJob(k) for k in range(1, plan.machines + 1)], sorted(secret_names), now, now)

    def to_bytes(self) -> bytes:
        data = {"version": VERSION, "created": self.created, "updated": self.updated, "plan": self.plan.to_json(),
                "secret_names": self.secret_names, "shards": [asdict(s) for s in self.shards]}
        return (json.dumps(data, indent=1, ensure_ascii=False) + "\n").encode()

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> SweepState:
        """The state in `data`, every field checked; SweepStateError naming the file and what is wrong."""
        try:
            if len(data) > STATE_MAX_BYTES:
                raise ValueError(f"it is over {STATE_MAX_BYTES // 2**20} MB")
            raw = json.loads(data)
            if not isinstance(raw, dict) or raw.get("version") != VERSION:
                raise ValueError(f"it is not a version {VERSION} sweep state")
            plan = SweepPlan.from_json(raw.get("plan"))
            if not isinstance(raw.get("shards"), list):
                raise ValueError("its shards are not a list")
            shards = [_shard_job(s) for s in raw["shards"]]
            if [s.shard for s in shards] != list(range(1, plan.machines + 1)):
                raise ValueError("its shards do not match its machines")
            names = raw.get("secret_names", [])
            if not isinstance(names, list) or not all(isinstance(n, str) and SECRET_NAME.fullmatch(n) for n in names):
                raise ValueError("its secret names are not variable names")
            stamps = [raw.get("created", ""), raw.get("updated", "")]
            if not all(isinstance(t, str) and STAMP.fullmatch(t) for t in stamps):
                raise ValueError("its times are not UTC times")
            return cls(plan, shards, names, *stamps)
        except (ValueError, SweepError, RecursionError) as exc:  # SpecError and JSONDecodeError are ValueErrors
            raise SweepStateError(f"the sweep state {where} cannot be read ({str(exc)[:300]})") from None

    def touch(self) -> None:
        self.updated = _now()


def _shard_job(raw: Any) -> ShardJob:
    """One shard of a state file, each field typed and in form; ValueError naming the shard otherwise."""
    if not isinstance(raw, dict) or set(raw) - {f.name for f in fields(ShardJob)}:
        raise ValueError("a shard is not an object of a shard's fields")
    shard = ShardJob(**raw)
    fits = [_count(shard.shard) and shard.shard >= 1, _name(shard.job_id, JOB_ID, none=True),
            _name(shard.stage, STAGE), _text(shard.message), _text(shard.url),
            shard.running_s is None or (_count(shard.running_s, float) and shard.running_s >= 0),
            isinstance(shard.earlier, list) and len(shard.earlier) <= 1000
            and all(_name(j, JOB_ID) for j in shard.earlier)]
    if not all(fits):
        raise ValueError(f"shard {str(raw.get('shard'))[:20]} has a field out of form")
    return shard


def _count(value: Any, *kinds: type) -> bool:
    return isinstance(value, (int, *kinds)) and not isinstance(value, bool)


def _name(value: Any, pattern: re.Pattern, none: bool = False) -> bool:
    return (none and value is None) or (isinstance(value, str) and pattern.fullmatch(value) is not None)


def _text(value: Any) -> bool:
    return value is None or (isinstance(value, str) and len(value) <= TEXT_MAX_CHARS)


def state_rel(run: str) -> str:
    """`.sweeps/<run>.json`, in the rollout folder and in the dataset; SweepStateError for a name that is no run's
    (it would lead elsewhere)."""
    try:
        check_run_name(run)
    except ValueError as exc:
        raise SweepStateError(str(exc)) from None
    return f"{SWEEPS_DIR}/{run}.json"


def log_rel(run: str, shard: int) -> str:
    """A local shard's output, beside the state."""
    state_rel(run)
    return f"{SWEEPS_DIR}/{run}/shard-{int(shard)}.log"


def board_rel(run: str) -> str:
    """The sweep's leaderboard, where `python -m agent run` writes a run's."""
    state_rel(run)
    return f"runs/{run}/board.md"


def in_folder(folder: str | Path, rel: str) -> Path:
    """`folder / rel` when it stays inside the rollout folder (rollouts.layout.inside: no `..`, absolute path or
    link out); SweepStateError otherwise, before anything is read or written there."""
    path = inside(Path(folder), rel)
    if path is None:
        raise SweepStateError(f"{rel} leads outside the rollout folder {folder} (a link out?): nothing read or "
                              "written there")
    return path


def local_path(folder: str | Path, run: str) -> Path:
    return in_folder(folder, state_rel(run))


def save_local(state: SweepState) -> Path:
    state.touch()
    path = local_path(state.plan.out, state.plan.run)
    atomic_write(path, state.to_bytes())
    return path


def load_local(folder: str | Path, run: str) -> SweepState | None:
    """This machine's copy in `folder`, checked: its run is the one asked for, and a local sweep's rollout folder
    is this one (its shards' `--out`), so a state edited by hand cannot send them elsewhere."""
    path = local_path(folder, run)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    state = SweepState.from_bytes(data, str(path))
    if state.plan.run != run:
        raise SweepStateError(f"the sweep state {path} is for the run {state.plan.run!r}, not {run!r}")
    check_folder(state, folder, str(path))
    return state


def check_folder(state: SweepState, folder: str | Path, where: str) -> None:
    """A local sweep's shards write where its plan says (`--out`): that must be `folder`, the one it is resumed
    in, so a state edited by hand (or another machine's) cannot send them elsewhere. A sweep on Jobs writes to
    its dataset; the folder only keeps its state."""
    if state.plan.on != HF_JOBS and Path(state.plan.out).resolve() != Path(folder).resolve():
        raise SweepStateError(f"the sweep state {where} sends its shards' rollouts to another folder "
                              f"({state.plan.out[:200]}): resume it with --out naming that folder")


def push(state: SweepState, api: Any, note: str) -> str | None:
    """Upload the state to the dataset; None when it landed, else why not (the local copy stands meanwhile)."""
    if not state.plan.dataset:
        return None
    try:
        api.create_repo(state.plan.dataset, repo_type="dataset", exist_ok=True)
        api.upload_file(path_or_fileobj=state.to_bytes(), path_in_repo=state_rel(state.plan.run),
                        repo_id=state.plan.dataset, repo_type="dataset",
                        commit_message=f"Sweep {state.plan.run}: {note}")
        return None
    except Exception as exc:  # the Hub being down must not stop the sweep: the local copy is the fallback
        log.info("cannot upload the sweep state: %s", exc)
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"


def load_from_hub(api: Any, dataset: str, run: str, cache_dir: str | Path | None = None) -> SweepState | None:
    """The dataset's copy, or None when it has none."""
    from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

    try:
        local = api.hf_hub_download(dataset, state_rel(run), repo_type="dataset", cache_dir=cache_dir)
    except (EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError):
        return None
    # Checked as any copy is, and no more: whether its plan is the owner's is `reconcile`'s question.
    return SweepState.from_bytes(Path(local).read_bytes(), f"{dataset}/{state_rel(run)}")


def plan_differences(mine: SweepPlan, theirs: SweepPlan) -> list[tuple[str, Any, Any]]:
    """(field, by the option that sets it; mine; theirs) for each field in which two copies' plans differ; a sweep
    on Jobs ignores the rollout folder, which is each machine's own."""
    skip = {"out"} if mine.on == HF_JOBS and theirs.on == HF_JOBS else set()
    return [(PLAN_LABELS.get(f.name, f.name), getattr(mine, f.name), getattr(theirs, f.name))
            for f in fields(SweepPlan) if f.name not in skip and getattr(mine, f.name) != getattr(theirs, f.name)]


def reconcile(local: SweepState | None,
              remote: SweepState | None) -> tuple[SweepState | None, list[tuple[str, Any, Any]]]:
    """The state to act on, and how the dataset's plan differs from this machine's (`plan_differences`). Whatever
    the dataset says, the plan is this machine's; the shards are the copy written last (the local one when they tie:
    it may hold stages not uploaded yet) when the plans agree, else this machine's."""
    if local is None or remote is None:
        return local or remote, []
    differences = plan_differences(local.plan, remote.plan)
    if differences or local.updated >= remote.updated:
        return local, differences
    return SweepState(local.plan, remote.shards, local.secret_names, local.created, remote.updated), []


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
