"""A sweep in motion: submit its shards, follow them to the end with one progress display, mend the failed ones,
cancel them, and end with the run's leaderboard.

The runner is where shards run (batch/sweep_jobs.py's HubJobs, or batch/sweep_local.py's LocalShards); the state
(batch/sweep_state.py) is saved after every change and uploaded to the dataset when Jobs are submitted or
cancelled and when the sweep ends. Episodes saved are counted from the rollouts the shards pushed (the dataset's
index) or wrote (the local folder), so the count is what is really kept, not what the shards say.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

from tqdm import tqdm

from agent.providers.base import scrub
from batch.sweep_jobs import JobView, describe
from batch.sweep_plan import command_secrets
from batch.sweep_state import ShardJob, SweepState, board_rel, in_folder, push, save_local
from rollouts.board_text import board_document, board_terminal

LOG_LINES = 8  # a failed shard's last log lines, shown when it fails


class ShardRunner(Protocol):
    where: str

    def submit(self, plan: Any, shard: int) -> tuple[str, JobView]: ...

    def inspect_sweep(self, run: str, job_ids: list[str]) -> dict[str, JobView]: ...

    def cancel(self, job_id: str) -> None: ...

    def logs(self, job_id: str, lines: int) -> list[str]: ...


class RolloutSource(Protocol):
    """rollouts.sources' interface: `load()` -> its index rows (`.table`, or None and `.error`)."""

    def load(self) -> Any: ...


@dataclass
class Console:
    """Where the sweep talks and listens: the board on `out`, progress on `err`, Ctrl-C's question on `answers`."""

    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    answers: TextIO = field(default_factory=lambda: sys.stdin)
    wait: Callable[[float], None] = time.sleep

    def say(self, text: str) -> None:
        print(text, file=self.err, flush=True)


class Sweep:
    """One sweep's shards, their runner and where their rollouts land; the state is saved after each change."""

    def __init__(self, state: SweepState, runner: ShardRunner, rollouts: RolloutSource, *, api: Any = None,
                 secrets: dict[str, str] | None = None, console: Console | None = None, poll_s: float = 15.0,
                 usd_per_hour: float | None = None) -> None:
        self.state = state
        self.plan = state.plan
        self.runner = runner
        self.rollouts = rollouts
        self.api = api  # huggingface_hub.HfApi for the dataset's copy of the state; None: local copy only
        self.secrets = secrets or {}
        self.console = console or Console()
        self.poll_s = poll_s
        self.usd_per_hour = usd_per_hour

    # -- the state -------------------------------------------------------------------------------------------------

    def save(self, note: str | None = None) -> None:
        """Save the state here, and in the dataset when `note` (the commit's message) is given."""
        save_local(self.state)
        if note and self.api is not None:
            problem = push(self.state, self.api, note)
            if problem:
                self.console.say(f"warning: the sweep state stays in {self.plan.out} only for now: "
                                 f"{scrub(problem, self.secrets)}")

    # -- submitting ------------------------------------------------------------------------------------------------

    def submit(self, shards: list[ShardJob]) -> bool:
        """Submit a Job for each shard; on a refusal stop there (what was submitted keeps running) and say so."""
        for shard in shards:
            in_command = command_secrets(self.plan.command(shard.shard), self.secrets)
            if in_command:  # a Job's command is public to whoever can inspect it: neither sent nor saved
                self.console.say(f"error: shard {shard.shard}/{self.plan.machines}'s command holds the value of "
                                 f"{', '.join(in_command)}: nothing submitted; a secret goes to the Jobs as a secret")
                return False
            try:
                job_id, view = self.runner.submit(self.plan, shard.shard)
            except Exception as exc:  # the Hub refused or could not be reached: nothing more is submitted
                self.save(f"{sum(s.job_id is not None and not s.done for s in self.state.shards)} Jobs running")
                self.console.say(f"error: submitting shard {shard.shard}/{self.plan.machines} failed "
                                 f"({describe(exc, self.secrets)}); the Jobs submitted keep running: "
                                 f"`python -m agent sweep --resume {self.plan.run}` submits the rest")
                return False
            if shard.job_id:
                shard.earlier.append(shard.job_id)
            shard.job_id, shard.stage, shard.message, shard.url, shard.running_s = \
                job_id, view.stage, view.message, view.url, None
            self.save()
            self.console.say(f"shard {shard.shard}/{self.plan.machines}: {job_id} {view.stage}"
                             + (f" {view.url}" if view.url else ""))
        self.save(f"{len(shards)} Jobs submitted")
        return True

    def refresh(self) -> list[ShardJob]:
        """Ask each unfinished Job how it is; the shards that have just failed."""
        failed = []
        asked = [s for s in self.state.shards if s.job_id and not s.done]
        try:
            views = self.runner.inspect_sweep(self.plan.run, [s.job_id for s in asked]) if asked else {}
        except Exception as exc:  # a passing Hub error: the Jobs run on; asked again at the next poll
            self.console.say(f"warning: cannot look at the Jobs: {describe(exc, self.secrets)}")
            return []
        for shard in asked:
            view = views[shard.job_id]
            if view.stage != shard.stage and view.stage in ("ERROR", "DELETED"):
                failed.append(shard)
            shard.stage, shard.message = view.stage, view.message
            shard.url, shard.running_s = view.url or shard.url, view.running_s
        return failed

    def cancel(self) -> list[ShardJob]:
        """Cancel every Job still running; the shards cancelled."""
        cancelled = []
        for shard in self.state.shards:
            if shard.job_id and not shard.done:
                try:
                    self.runner.cancel(shard.job_id)
                except Exception as exc:  # said, and the others are still cancelled
                    self.console.say(f"warning: cannot cancel {shard.job_id}: {describe(exc, self.secrets)}")
                    continue
                cancelled.append(shard)
        self.refresh()
        for shard in cancelled:
            if not shard.done:  # a Job asked to stop may take a moment to say so
                shard.stage = "CANCELED"
        self.save(f"{len(cancelled)} Jobs cancelled")
        return cancelled

    # -- following -------------------------------------------------------------------------------------------------

    def follow(self) -> int:
        """Follow the shards to the end with one progress display; 0 when every shard completed, 1 when some failed,
        130 after Ctrl-C (the Jobs cancelled or left running, as answered)."""
        bar = tqdm(total=self.plan.episodes(), unit="episode", desc=self.plan.run, file=self.console.err,
                   dynamic_ncols=True)
        try:
            while True:
                for shard in self.refresh():
                    self._tell_failure(shard, bar)
                rows = self.saved_rows()
                if rows is not None:
                    bar.n = saved_count(self.plan, rows)
                bar.set_postfix_str(self.shards_line(), refresh=True)
                if all(s.done for s in self.state.shards):
                    break
                self.console.wait(self.poll_s)
        except KeyboardInterrupt:
            bar.close()
            return self._interrupted()
        bar.close()
        self.save("ended")
        return self.finish(rows)

    def finish(self, rows: list[dict] | None) -> int:
        """Say how the sweep ended, print the run's leaderboard; the exit code."""
        plan = self.plan
        failed = [s for s in self.state.shards if s.stage != "COMPLETED"] + self.short(rows)
        saved = saved_count(plan, rows) if rows is not None else None
        self.console.say(f"sweep {plan.run}: {self.shards_line()}; episodes saved: "
                         f"{'?' if saved is None else saved}/{plan.episodes()}" + self._time_spent())
        for shard in failed:
            why = shard.message if shard.stage != "COMPLETED" else (
                f"but only {saved_count(plan, rows or [], shard.shard)}/{plan.episodes(shard.shard)} of its "
                "episodes are saved (its log says why)")
            self.console.say(f"  shard {shard.shard}/{plan.machines} {shard.stage}"
                             + (f": {scrub(why, self.secrets)}" if why else ""))
        if failed:
            self.console.say(f"`python -m agent sweep --resume {plan.run}` submits those shards again (each skips "
                             "the episodes it already saved)")
        if rows:
            lines = sweep_board(plan, rows)
            path = in_folder(plan.out, board_rel(plan.run))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(board_document(lines))
            print(board_terminal(lines, wide=str(path)), file=self.console.out, flush=True)
            self.console.say(f"board: {path}")
        return 1 if failed else 0

    def short(self, rows: list[dict] | None) -> list[ShardJob]:
        """Shards whose Job completed without leaving all their episodes in the rollouts (a push that did not
        finish, episodes stopped): --resume submits them again too. None known when the rows cannot be read."""
        if rows is None:
            return []
        return [s for s in self.state.shards
                if s.stage == "COMPLETED" and saved_count(self.plan, rows, s.shard) < self.plan.episodes(s.shard)]

    def saved_rows(self) -> list[dict] | None:
        """The index rows of this sweep's run in its rollouts; None when they cannot be read now."""
        loaded = self.rollouts.load()
        if loaded.table is None:
            return None
        import pyarrow.compute as pc

        table = loaded.table
        return table.filter(pc.equal(table["run"], self.plan.run)).to_pylist()

    def _tell_failure(self, shard: ShardJob, bar: tqdm) -> None:
        try:
            tail = self.runner.logs(shard.job_id, LOG_LINES)
        except Exception:  # the logs are a courtesy: the stage and its message say what matters
            tail = []
        why = f": {shard.message}" if shard.message else ""
        bar.write(scrub(f"shard {shard.shard}/{self.plan.machines} ({shard.job_id}) {shard.stage}{why}", self.secrets),
                  file=self.console.err)
        for line in tail:
            bar.write(scrub(f"    {line}", self.secrets), file=self.console.err)

    def _interrupted(self) -> int:
        running = [s for s in self.state.shards if s.job_id and not s.done]
        if not running:
            self.save("stopped following")
            return 130
        self.console.err.write(f"\nCtrl-C: cancel the {len(running)} {self.runner.where} still running (what they "
                               "saved is kept), or leave them running? [c]ancel / [L]eave: ")
        self.console.err.flush()
        try:
            answer = self.console.answers.readline().strip().lower()
        except (KeyboardInterrupt, OSError, ValueError):
            answer = ""
        if answer.startswith(("c", "y")):
            cancelled = self.cancel()
            self.console.say(f"cancelled {len(cancelled)}; `python -m agent sweep --resume {self.plan.run}` starts "
                             "them again, skipping what they saved")
        else:
            self.save(f"left {len(running)} running")
            self.console.say(f"left {len(running)} running: `python -m agent sweep --status {self.plan.run}` shows "
                             f"them, `--resume {self.plan.run}` follows them again, `--cancel {self.plan.run}` "
                             "stops them")
        return 130

    def shards_line(self) -> str:
        """`shards 2/4 done, 1 failed, 1 running`."""
        stages = Counter(s.stage for s in self.state.shards)
        done = stages.pop("COMPLETED", 0)
        failed = sum(stages.pop(s, 0) for s in ("ERROR", "CANCELED", "DELETED"))
        rest = ", ".join(f"{n} {stage.lower()}" for stage, n in sorted(stages.items()))
        return (f"shards {done}/{self.plan.machines} done" + (f", {failed} failed" if failed else "")
                + (f", {rest}" if rest else ""))

    def _time_spent(self) -> str:
        seconds = sum(s.running_s or 0.0 for s in self.state.shards)
        if not seconds:
            return ""
        cost = f" (~${seconds / 3600 * self.usd_per_hour:.4f})" if self.usd_per_hour is not None else ""
        return f"; the machines ran {seconds / 3600:.2f} h in all{cost}"


def saved_count(plan: Any, rows: list[dict], shard: int | None = None) -> int:
    """Episodes of the grid (or of one shard's slice) saved in `rows`, at most `repeats` per cell."""
    have = Counter((r.get("model"), r.get("task_id")) for r in rows)
    return sum(min(have[cell], plan.repeats) for cell in plan.cells(shard))


def sweep_board(plan: Any, rows: list[dict]) -> list[dict]:
    """The sweep's leaderboard: the latest `repeats` rollouts of each cell of its grid (the run's index rows read
    from the dataset), ranked by the one board (rollouts.board), as `python -m agent board` ranks them; its
    board.md and its terminal table are rollouts.board_text's."""
    from rollouts.board import board  # the index engine (DuckDB) only once there is a board to draw
    from rollouts.index.engine import IndexEngine
    from rollouts.index.format import rows_table

    engine = IndexEngine()
    engine.set_table("hub", rows_table(rows))
    return board(engine, "model = ANY(?::VARCHAR[]) AND task_id = ANY(?::VARCHAR[])",
                 [list(plan.models), list(plan.tasks)], latest=plan.repeats)
