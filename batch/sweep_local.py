"""A sweep's shards as processes on this machine (`--on local`): the same `python -m agent run --shard K/N`
commands a Job would run, each in its own session so that Ctrl-C in the terminal reaches the sweep alone (which
then asks whether to stop them), its output kept in `.sweeps/<run>/shard-K.log` beside the sweep's state (never outside the folder).

How a process is started is a parameter (`spawn`), so tests start them from a warm interpreter.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from batch.sweep_jobs import JobView
from batch.sweep_plan import SweepPlan
from batch.sweep_state import in_folder, log_rel
from rollouts import settings


class ShardProcess(Protocol):
    """What the sweep needs of a started process (subprocess.Popen's names)."""

    pid: int

    def poll(self) -> int | None: ...

    def send_signal(self, sig: int) -> None: ...

    def output(self) -> str: ...


Spawn = Callable[[list[str], dict[str, str], Path, Path], ShardProcess]


class _Started:
    def __init__(self, process: subprocess.Popen, log: Path) -> None:
        self._process, self._log, self.pid = process, log, process.pid

    def poll(self) -> int | None:
        return self._process.poll()

    def send_signal(self, sig: int) -> None:
        self._process.send_signal(sig)

    def output(self) -> str:
        try:
            return self._log.read_text(errors="replace")
        except FileNotFoundError:
            return ""


def spawn_process(command: list[str], env: dict[str, str], cwd: Path, log: Path) -> ShardProcess:
    """Start `command` in its own session, stdout and stderr appended to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        process = subprocess.Popen(command, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    return _Started(process, log)


class LocalShards:
    """Plays each shard as a child process; a shard started by an earlier sweep process is known by its pid."""

    where = "local processes"

    def __init__(self, folder: str | Path, secrets: dict[str, str], spawn: Spawn | None = None) -> None:
        self.folder = Path(folder)
        self._secrets = secrets
        self._spawn = spawn or spawn_process
        self._started: dict[str, ShardProcess] = {}
        self._stopped: set[str] = set()

    def submit(self, plan: SweepPlan, shard: int) -> tuple[str, JobView]:
        command = [sys.executable, *plan.command(shard)[1:]]
        # The keys reach the shard as its environment, as a Job's secrets do; never on its command line.
        env = settings.child_environment(self._secrets)
        log = in_folder(self.folder, log_rel(plan.run, shard))
        process = self._spawn(command, env, Path.cwd(), log)
        job_id = f"local-{shard}-{process.pid}"
        self._started[job_id] = process
        return job_id, JobView("RUNNING", url=str(log))

    def inspect(self, job_id: str) -> JobView:
        process = self._started.get(job_id)
        if process is None:
            if _alive(_pid(job_id)):
                return JobView("RUNNING")
            return JobView("ERROR", "it ended while no sweep was following it: --resume plays what it left")
        code = process.poll()
        if code is None:
            return JobView("RUNNING")
        if code == 0:
            return JobView("COMPLETED")
        if job_id in self._stopped:
            return JobView("CANCELED", "stopped by the sweep")
        return JobView("ERROR", f"exit code {code}")

    def inspect_sweep(self, run: str, job_ids: list[str]) -> dict[str, JobView]:
        return {job_id: self.inspect(job_id) for job_id in job_ids}

    def cancel(self, job_id: str) -> None:
        """Stop the shard as Ctrl-C would: it starts no more episodes, ends those in flight as `stopped`, saves them
        and exits (not waited for: each shard stops on its own, all at once)."""
        self._stopped.add(job_id)
        process = self._started.get(job_id)
        with contextlib.suppress(ProcessLookupError):
            if process is not None:
                process.send_signal(signal.SIGINT)
            elif _alive(_pid(job_id)):
                os.kill(_pid(job_id), signal.SIGINT)

    def logs(self, job_id: str, lines: int) -> list[str]:
        process = self._started.get(job_id)
        text = process.output() if process is not None else ""
        return text.splitlines()[-lines:]


def _pid(job_id: str) -> int:
    return int(job_id.rsplit("-", 1)[-1])


def _alive(pid: int) -> bool:
    """Whether `pid` is a running `agent run` shard (a pid reused by another program is not)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"agent" in cmdline and b"--shard" in cmdline
