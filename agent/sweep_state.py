"""A sweep's state: its plan and, per shard, the Job that plays it and the last stage seen. Kept in two places, so
the sweep can be followed, resumed or cancelled from this machine or any other:

    <rollout folder>/.sweeps/<run>.json    this machine's copy (written on every change)
    <dataset>/.sweeps/<run>.json           the dataset's copy (uploaded when Jobs are submitted or cancelled, and
                                           when the sweep ends)

The same path in the folder and the dataset; the store's pusher never pushes it (it pushes only the card, records
and index files). It holds no secret: the names of the secrets the Jobs were given, never their values.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agent.sweep_plan import SweepPlan
from rollouts.jsonio import atomic_write

log = logging.getLogger(__name__)

SWEEPS_DIR = ".sweeps"
VERSION = 1
# A Job in one of these stages runs no more (huggingface_hub's JobStage names); PENDING: never submitted.
TERMINAL = ("COMPLETED", "CANCELED", "ERROR", "DELETED")
FAILED = ("CANCELED", "ERROR", "DELETED")
PENDING = "PENDING"


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
        try:
            raw = json.loads(data)
            plan = SweepPlan.from_json(raw["plan"])
            shards = [ShardJob(**s) for s in raw["shards"]]
            if [s.shard for s in shards] != list(range(1, plan.machines + 1)):
                raise ValueError("its shards do not match its machines")
            return cls(plan, shards, list(raw.get("secret_names") or []), raw.get("created", ""),
                       raw.get("updated", ""))
        except (ValueError, KeyError, TypeError) as exc:
            raise SweepStateError(f"the sweep state {where} cannot be read ({exc})") from None

    def touch(self) -> None:
        self.updated = _now()


def state_rel(run: str) -> str:
    return f"{SWEEPS_DIR}/{run}.json"


def local_path(folder: str | Path, run: str) -> Path:
    return Path(folder) / state_rel(run)


def save_local(state: SweepState) -> Path:
    state.touch()
    path = local_path(state.plan.out, state.plan.run)
    atomic_write(path, state.to_bytes())
    return path


def load_local(folder: str | Path, run: str) -> SweepState | None:
    path = local_path(folder, run)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return SweepState.from_bytes(data, str(path))


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
    return SweepState.from_bytes(Path(local).read_bytes(), f"{dataset}/{state_rel(run)}")


def newest(*states: SweepState | None) -> SweepState | None:
    """The copy written last (the local one when they tie: it may hold stages not uploaded yet)."""
    found = [s for s in states if s is not None]
    return max(found, key=lambda s: s.updated, default=None)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
