"""Shared pieces for the sweep tests: a Hub that also serves the Jobs API (testkit/fakejobs.py), the sweep command
run in this process with its console captured, and the dataset's raw index rows."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import huggingface_hub.constants
import pytest

from batch import cli_sweep
from batch.cli import build_parser
from batch.sweep import Console
from testkit.fakehub import FakeHub
from testkit.fakejobs import FakeJobs, running_jobs_hub, warm_spawn

TOKEN = "hf_sweep_3c1e9b2f7a5d"  # distinctive: finding it anywhere but in a Job's secrets means it leaked
REPO = "arena/rollouts"
SPACE = "arena/berth-arena"
KEY_VARIABLES = ("HF_TOKEN", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "VLLM_API_KEY", "VLLM_BASE_URL", "SPACE_ID")


@dataclass
class Ran:
    code: int
    out: str  # the board
    err: str  # the plan, progress and messages


def sweep(*argv: str, spawn: Any = None, answers: str = "", wait: Callable[[float], None] | None = None) -> Ran:
    """`python -m agent sweep ARGV...` in this process (its shards run wherever --on says)."""
    args = build_parser().parse_args(["sweep", *argv])
    out, err = io.StringIO(), io.StringIO()
    console = Console(out=out, err=err, answers=io.StringIO(answers), wait=wait or (lambda s: None))
    code = cli_sweep.main(args, spawn=spawn, console=console)
    return Ran(code, out.getvalue(), err.getvalue())


def interrupt(_seconds: float) -> None:
    """A `wait` that is Ctrl-C the first time the sweep waits for its Jobs."""
    raise KeyboardInterrupt


@contextmanager
def jobs_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, warm_python: Any = None,
                  **options: Any) -> Iterator[tuple[FakeHub, FakeJobs]]:
    """The Hub and its Jobs on one local endpoint, this process pointed at it with TOKEN and no other key; the
    Jobs' `python -m` forked from `warm_python` (None: started cold)."""
    for name in KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TASKS_DATASET", "")  # the bundled tasks: --split is answered without the network
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(tmp_path / "no-stored-token"))
    spawn = warm_spawn(warm_python) if warm_python is not None else None
    with running_jobs_hub(tmp_path / "jobs", token=TOKEN, spawn=spawn, **options) as (hub, jobs):
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        yield hub, jobs


def state_file(folder: Path, run: str) -> dict:
    return json.loads((folder / ".sweeps" / f"{run}.json").read_text())


def leaks(secret_values: list[str], places: dict[str, str | bytes]) -> list[str]:
    """The places (name -> content) where any secret value shows up."""
    found = []
    for name, content in places.items():
        data = content.encode() if isinstance(content, str) else content
        found += [f"{name} holds {value[:6]}..." for value in secret_values if value.encode() in data]
    return found
