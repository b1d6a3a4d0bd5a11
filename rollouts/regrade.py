"""Grading stored rollouts again under today's grader: do old rewards and verdicts still hold?

For each record whose task the grader knows (a task pack with references, `berth_env.load_pack`):

- the final plan, when one was submitted, is graded again (`berth_env.grade`); without a submission the reward
  stays 0, as the rules say. A *flip* is a reward that moved by more than FLIP_TOLERANCE from the stored one, or a
  feasibility that differs from the stored grade's;
- every checked plan whose stored answer carries a verdict (`feasible`) is checked again (`berth_env.evaluate`)
  and compared on feasibility and cost. Answers without a verdict (a plan error, no checks left, the episode over)
  are not compared: the server did not check those plans.

The new grade is kept beside the original, never over it: `regrade: {grader_version, reward, grade, checks}`
(`RolloutStore.annotate`), and the index's `regrade_reward` / `regrade_feasible` follow it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from berth_env import PlanError, evaluate, grade
from rollouts.record import Record
from rollouts.schema import record_problem

FLIP_TOLERANCE = 1e-9


@dataclass
class Regrade:
    """One rollout graded again: the stored figures beside today's."""

    episode_id: str
    model: str
    task_id: str
    submitted: bool
    old_reward: float | None
    new_reward: float
    old_feasible: bool | None  # the stored grade's verdict; None without one
    new_feasible: bool | None  # None without a submission
    grade: dict | None  # today's grade of the final plan
    checks: list[dict] = field(default_factory=list)  # today's verdict of each compared check
    checks_changed: int = 0

    @property
    def reward_flipped(self) -> bool:
        if self.old_reward is None or not math.isfinite(self.old_reward):
            return True
        return abs(self.new_reward - self.old_reward) > FLIP_TOLERANCE

    @property
    def feasibility_flipped(self) -> bool:
        return self.old_feasible is not None and self.old_feasible != self.new_feasible

    @property
    def flipped(self) -> bool:
        return self.reward_flipped or self.feasibility_flipped

    def annotation(self, grader_version: str) -> dict:
        """What `--write` stores as the record's `regrade`."""
        return {"grader_version": grader_version, "reward": self.new_reward, "grade": self.grade,
                "checks": self.checks}


@dataclass
class RegradeReport:
    regrades: list[Regrade] = field(default_factory=list)
    skipped: dict[str, list[str]] = field(default_factory=dict)  # reason -> episode ids (or file names)

    @property
    def flips(self) -> list[Regrade]:
        return [r for r in self.regrades if r.flipped]

    @property
    def checks_only(self) -> list[Regrade]:
        """Rollouts whose final grade holds but some checked plan is judged differently now."""
        return [r for r in self.regrades if not r.flipped and r.checks_changed]

    def skip(self, reason: str, name: str) -> None:
        self.skipped.setdefault(reason, []).append(name)


def regrade_record(record: dict, task: dict) -> Regrade:
    """`record` graded again against `task` (the full task, references included)."""
    view = Record(record)
    stored, submitted = view.grade, view.submitted
    new_grade = grade(task, view.final.get("plan")) if submitted else None
    old_reward = record.get("reward")
    item = Regrade(
        episode_id=str(record.get("episode_id")), model=str(record.get("model")), task_id=str(record.get("task_id")),
        submitted=submitted,
        old_reward=float(old_reward) if isinstance(old_reward, int | float) and not isinstance(old_reward, bool)
        else None,
        new_reward=float(new_grade["reward"]) if new_grade else 0.0,
        old_feasible=stored.get("feasible") if isinstance(stored.get("feasible"), bool) else None,
        new_feasible=new_grade["feasible"] if new_grade else None, grade=new_grade)
    for number, step in enumerate(view.checks, start=1):
        result = step.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("feasible"), bool):
            continue
        verdict = _check(task, step.get("plan"))
        item.checks.append({"check": number, **verdict})
        if verdict["feasible"] != result["feasible"] or verdict["cost"] != result.get("cost"):
            item.checks_changed += 1
    return item


def _check(task: dict, plan: Any) -> dict:
    try:
        reply = evaluate(task, plan)
    except PlanError as err:
        return {"feasible": False, "cost": None, "error": err.message}
    return {"feasible": reply["feasible"], "cost": reply["cost"]}


def regrade_records(records: Iterable[tuple[str, Any]], task_of: Callable[[str], dict | None]) -> RegradeReport:
    """Every (name, record) graded again; `task_of(task_id)` gives the full task or None. A record that cannot be
    read (an exception in place of it), breaks the record schema or whose task is unknown is skipped, with why."""
    report = RegradeReport()
    for name, record in records:
        if not isinstance(record, dict):
            report.skip("unreadable", name)
            continue
        if record_problem(record) is not None:
            report.skip("not a rollout record", name)
            continue
        task = task_of(record.get("task_id")) if isinstance(record.get("task_id"), str) else None
        if task is None:
            report.skip("task not in the grader's task packs", str(record.get("episode_id") or name))
            continue
        report.regrades.append(regrade_record(record, task))
    return report


def flips_table(report: RegradeReport, grader_version: str) -> str:
    """The flips as a Markdown table, the rollouts whose checked plans alone changed, and the total line."""
    lines = []
    if report.flips:
        lines += ["| episode | model | task | reward: stored -> now | feasible: stored -> now | checks changed |",
                  "|---|---|---|---:|---|---:|"]
        lines += [f"| {r.episode_id} | {r.model} | {r.task_id} | {_reward(r.old_reward)} -> {_reward(r.new_reward)} "
                  f"| {_yes(r.old_feasible)} -> {_yes(r.new_feasible)} | {r.checks_changed}/{len(r.checks)} |"
                  for r in report.flips]
        lines.append("")
    if report.checks_only:
        lines += ["Final grade holds, but checked plans are judged differently now:", "",
                  "| episode | model | task | checks changed |", "|---|---|---|---:|"]
        lines += [f"| {r.episode_id} | {r.model} | {r.task_id} | {r.checks_changed}/{len(r.checks)} |"
                  for r in report.checks_only]
        lines.append("")
    lines.append(total_line(report, grader_version))
    return "\n".join(lines) + "\n"


def total_line(report: RegradeReport, grader_version: str) -> str:
    flips = report.flips
    rewards = sum(r.reward_flipped for r in flips)
    feasibility = sum(r.feasibility_flipped for r in flips)
    text = (f"total: {len(report.regrades)} rollouts graded again under grader {grader_version}: {len(flips)} "
            f"flipped ({rewards} reward, {feasibility} feasibility), {len(report.checks_only)} more with checked "
            "plans judged differently")
    if report.skipped:
        reasons = ", ".join(f"{reason}: {len(names)}" for reason, names in sorted(report.skipped.items()))
        text += f"; skipped {sum(len(n) for n in report.skipped.values())} ({reasons})"
    return text


def _reward(value: float | None) -> str:
    return "-" if value is None else f"{value:.6f}"


def _yes(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")
