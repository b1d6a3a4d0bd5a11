"""A plan's gap to the proven optimum, ship by ship.

The checker's cost is a sum over ships (each ship's lateness, weighted, its deadline term, and the penalty for
starting off its planned section), so for a feasible plan the gap to the optimum splits exactly: what each ship
costs in this plan minus what it costs in the task's reference optimum. The shares sum to the gap with nothing left
over. An optimum need not be unique: the split is against the reference plan the pack stores, the one the grade's
optimal cost comes from. An infeasible plan has no cost and so no gap: its split says which ships break which
rules instead.

Nothing here changes a grade; it reads the one checker (`check`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from berth_env.check import CheckResult, ShipResult, check
from berth_env.plan import parse_plan
from berth_env.rules import Task


@dataclass(frozen=True, slots=True)
class ShipGap:
    """One ship's part of the gap: its lateness, whether it moved, and its cost here and in the optimum."""

    ship: int
    name: str
    hours_late: int
    optimum_hours_late: int
    moved: bool
    optimum_moved: bool
    cost: int
    optimum_cost: int

    @property
    def difference(self) -> int:
        """What this ship costs here beyond the optimum (negative: it does better, another ship pays for it)."""
        return self.cost - self.optimum_cost

    def share(self, gap: int) -> float:
        """Its part of the gap, as a fraction (the shares of every ship sum to 1 when the gap is not 0)."""
        return self.difference / gap if gap else 0.0


@dataclass(frozen=True, slots=True)
class GapSplit:
    """A plan against the optimum. Feasible: `gap` (cost - optimal cost) and `ships`, every ship whose cost
    differs from the optimum's, biggest difference first. Infeasible: `gap` None and `broken`, each ship with a
    problem (a missing ship included) and the rules it breaks."""

    feasible: bool
    cost: int | None
    optimal_cost: int
    ships: list[ShipGap] = field(default_factory=list)
    broken: dict[int, list[str]] = field(default_factory=dict)

    @property
    def gap(self) -> int | None:
        return None if self.cost is None else self.cost - self.optimal_cost

    def headline(self) -> str:
        """One line: the gap and how many ships account for it, or how many ships break a rule."""
        if not self.feasible:
            count = len(self.broken)
            return f"Not feasible: {count} ship{'s' * (count != 1)} break{'s' * (count == 1)} a rule, so there is no cost to split."
        if not self.gap:
            return f"Cost {self.cost}, the optimum's: no gap to split."
        count = len(self.ships)
        return (f"Cost {self.cost} against the optimum's {self.optimal_cost}: a gap of {self.gap}, "
                f"from {count} ship{'s' * (count != 1)}.")

    def markdown(self, limit: int = 12) -> str:
        """The split as Markdown: the headline, then the ships that account for the gap (most first), or the ships
        and the rules they break. Ship names come from the task pack, not from a model."""
        lines = [self.headline(), ""]
        if not self.feasible:
            lines += ["| ship | breaks |", "|---:|---|"]
            lines += [f"| {ship} | {'; '.join(texts)} |" for ship, texts in list(self.broken.items())[:limit]]
        elif self.ships:
            lines += ["| ship | hours late (optimum) | moved (optimum) | cost (optimum) | difference | share |",
                      "|---|---:|:---:|---:|---:|---:|"]
            lines += [f"| {s.ship} {s.name} | {s.hours_late} ({s.optimum_hours_late}) | "
                      f"{_yes(s.moved)} ({_yes(s.optimum_moved)}) | {s.cost} ({s.optimum_cost}) | "
                      f"{s.difference:+d} | {s.share(self.gap or 0):.0%} |" for s in self.ships[:limit]]
        shown = len(self.broken) if not self.feasible else len(self.ships)
        if shown > limit:
            lines.append(f"\n…and {shown - limit} more ships.")
        if self.feasible and self.gap:
            lines.append("\nThe differences sum to the gap; the optimum is the task's reference plan (the one the "
                         "grade's optimal cost comes from; another plan may be optimal too).")
        return "\n".join(lines).rstrip() + "\n"


def split_gap(task: Task, plan: Any) -> GapSplit:
    """The gap of `plan` (as a model sends it: text, a list of entries...) to the task's reference optimum.
    PlanError when the plan cannot be read at all; ValueError for a task without its reference (a public view)."""
    reference = task.get("reference") or {}
    if "optimal_plan" not in reference or "optimal_cost" not in reference:
        raise ValueError(f"task {task.get('task_id')!r} has no reference optimum: the split needs the full task")
    result = check(task, parse_plan(task, plan))
    optimal_cost = int(reference["optimal_cost"])
    if not result.feasible:
        return GapSplit(False, None, optimal_cost, broken=_broken(result))
    optimum = check(task, parse_plan(task, reference["optimal_plan"]))
    ships = [_ship_gap(task, result.ships[i], optimum.ships[i]) for i in sorted(result.ships)]
    ships = sorted((s for s in ships if s.difference), key=lambda s: (-s.difference, s.ship))
    return GapSplit(True, result.cost, optimal_cost, ships)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _ship_gap(task: Task, here: ShipResult, best: ShipResult) -> ShipGap:
    due = task["ships"][here.ship]["due"]
    return ShipGap(here.ship, str(task["ships"][here.ship]["name"]), max(0, here.departure - due),
                   max(0, best.departure - due), here.moved, best.moved, here.cost, best.cost)


def _broken(result: CheckResult) -> dict[int, list[str]]:
    """The check's own violations (the words check_plan answers with), grouped by ship."""
    broken: dict[int, list[str]] = {}
    for violation in result.violations:
        broken.setdefault(int(violation["ship"]), []).append(str(violation["problem"]))
    return dict(sorted(broken.items()))
