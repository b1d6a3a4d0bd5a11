"""Scoring a plan: the unavoidable-cost floor, the reward versions, the grade dict and the check_plan reply (§5, §6.3).

The reward is computed exactly in the order the spec gives (IEEE doubles, then Python `round`), so that grades
reproduce upstream's published numbers to the last digit.
"""

from __future__ import annotations

import math
from typing import Any

from berth_env.check import ShipResult, check
from berth_env.plan import ParsedPlan, PlanError, parse_plan
from berth_env.rules import (
    Task,
    WindRules,
    departure,
    is_crane_task,
    ship_delay_cost,
    task_rules,
    work_hours,
)

DEFAULT_GAP_K = 100
# Bumped whenever a change to parsing, checking or the reward can change a grade, so a stored rollout's grade can
# be told apart from today's (`python -m agent regrade` records it beside each new grade).
GRADER_VERSION = 1


def unavoidable_cost(task: Task) -> int:
    """A lower bound on any feasible plan's cost: each ship alone, as early and as fast as it can go (§5.1).

    Each ship berths at arrival (or at the end of the wind window it arrived in), works with its maximum cranes and
    waits out the wind if it finishes inside a window. Nothing else (other ships, blocks, pool, moves) is counted,
    so the floor never exceeds the optimum; it is what the v3 reward measures the optimum's gap against.
    """
    crane_rule = is_crane_task(task)
    wind = WindRules(task)
    total = 0
    for ship in task["ships"]:
        hour = ship["arrival"]
        if crane_rule:
            windows = wind.for_ship(ship)
            for start, end in windows:  # ascending and disjoint: one pass pushes past every window hit
                if start <= hour < end:
                    hour = end
            leave = departure(windows, hour + work_hours(ship, ship["max_cranes"], True))
        else:
            leave = hour + int(ship["handling"])
        total += ship_delay_cost(ship, hour, leave)
    return total


def reward_and_quality(
    task: Task, *, feasible: bool, cost: int | None, clean: float, floor: int | None = None
) -> tuple[float, float]:
    """Unrounded (reward, quality) under the task's reward version (`rules.reward`: 3, 2, else 1) (§5.2).

    An infeasible plan earns 0.2 x its clean fraction, so it always scores below any feasible plan.
    `floor` may be passed in when already known; it is only used by v3.
    """
    rules = task_rules(task)
    if not feasible or cost is None:
        return 0.2 * clean, 0.0
    reference = _reference(task)
    version = rules.get("reward")
    optimum = int(reference["optimal_cost"])
    if version == 3:
        if floor is None:
            floor = unavoidable_cost(task)
        gap_k = int(rules.get("gap_k", DEFAULT_GAP_K))
        scale = max(0, optimum - floor) + gap_k
        # scale is 0 only if gap_k is 0 and the optimum sits on the floor: then any excess is infinitely bad.
        g = max(0, cost - optimum) / scale if scale else (math.inf if cost > optimum else 0.0)
        quality = math.exp(-g / 0.5)
        return 0.2 + 0.8 * quality, quality
    naive = int(reference["naive_cost"])
    if version == 2:
        g = max(0, (cost - optimum) / max(1, naive - optimum))
        quality = math.exp(-g / 0.25)
        return 0.2 + 0.8 * quality, quality
    if cost > naive:
        return 0.2 + 0.4 * naive / cost, 0.0
    gap = naive - optimum
    quality = 1.0 if gap <= 0 else min(1.0, (naive - cost) / gap)
    return 0.6 + 0.4 * quality, quality


def _reference(task: Task) -> dict[str, Any]:
    reference = task.get("reference")
    if not isinstance(reference, dict) or "optimal_cost" not in reference:
        raise ValueError(
            f"task {task.get('task_id')!r} has no reference costs: grading needs the full task, not its public view"
        )
    return reference


def _parse_for_grading(task: Task, plan: Any) -> tuple[ParsedPlan, list[str]]:
    """A PlanError grades as an empty plan with the error's message as the one parse problem (§5.3 step 1)."""
    try:
        parsed = parse_plan(task, plan)
    except PlanError as err:
        return ParsedPlan(), [err.message]
    return parsed, parsed.problems


def grade(task: Task, plan: Any) -> dict[str, Any]:
    """The §5.4 grade of a raw plan (anything an agent may send). Never raises for any plan.

    Feasible means the checker found nothing *and* every entry was read; the clean fraction counts clean ships
    over ships plus rejected entries, so sending junk entries alongside a good plan costs something.
    """
    reference = _reference(task)
    parsed, parse_problems = _parse_for_grading(task, plan)
    result = check(task, parsed.entries)
    feasible = result.feasible and not parse_problems
    clean = result.clean_ships / max(1, len(task["ships"]) + len(parse_problems))
    reward, quality = reward_and_quality(task, feasible=feasible, cost=result.cost, clean=clean)
    return {
        "reward": round(reward, 6),
        "feasible": feasible,
        "clean_fraction": round(clean, 4),
        "quality": round(quality, 6),
        "cost": result.cost if feasible else None,
        "delay_cost": result.delay_cost if feasible else None,
        "moves": result.moves if feasible else None,
        "naive_cost": int(reference["naive_cost"]),
        "optimal_cost": int(reference["optimal_cost"]),
        "violations": result.violations,
        "parse_problems": parse_problems,
    }


def evaluate(task: Task, plan: Any) -> dict[str, Any]:
    """What `check_plan` replies (§6.3), without `checks_left`. Raises PlanError for an unreadable plan.

    Unlike the grade, the checker's totals are kept when only entry problems spoil the plan, so an agent still
    sees what the rest would cost. Nothing from the reference (optimum, naive cost) ever appears here.
    """
    parsed = parse_plan(task, plan)
    result = check(task, parsed.entries)
    crane_rule = is_crane_task(task)
    reply: dict[str, Any] = {
        "feasible": result.feasible and not parsed.issues,
        "violations": result.violations,
        "cost": result.cost,
        "delay_cost": result.delay_cost,
        "moves": result.moves,
        "ships": [_ship_summary(ship, crane_rule) for ship in result.ships.values()],
    }
    if parsed.issues:
        reply["entry_problems"] = parsed.problems
    return reply


def _ship_summary(ship: ShipResult, crane_rule: bool) -> dict[str, Any]:
    """One ship's line in the check_plan reply; cranes and hours alongside only where cranes exist."""
    summary: dict[str, Any] = {
        "ship": ship.ship,
        "departure": ship.departure,
        "delay_h": ship.delay_h,
        "moved": ship.moved,
        "cost": ship.cost,
    }
    if crane_rule:
        summary["cranes"] = ship.cranes
        summary["hours_alongside"] = ship.hours_alongside
    return summary
