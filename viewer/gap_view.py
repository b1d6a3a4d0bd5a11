"""A rollout's gap to the proven optimum, ship by ship, as the screens show it (berth_env.gap decides the split):
the table under the grade on the share page and in Browse's open rollout, and the ships the chart outlines."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from berth_env.gap import GapSplit, split_gap
from berth_env.plan import PlanError
from rollouts.record import Record

OUTLINED = 3   # the ships the chart outlines: the ones that account for most of the gap
OUTLINE_LABEL = "most of the gap"
BROKEN_LABEL = "breaks a rule"


def final_gap(rollout: Record | Mapping[str, Any], task: Mapping[str, Any] | None) -> GapSplit | None:
    """The split of the rollout's final plan (its last draft when it submitted none), or None where there is none
    to make: no plan, an unreadable one, or a task without its reference optimum here."""
    plan = Record.of(rollout).final_plan
    if plan is None or task is None or "optimal_plan" not in (task.get("reference") or {}):
        return None
    try:
        return split_gap(dict(task), plan)
    except (PlanError, ValueError, TypeError):
        return None


def gap_markdown(split: GapSplit | None) -> str:
    """The split under its heading, or nothing."""
    if split is None:
        return ""
    return "### The final plan's gap, ship by ship\n\n" + split.markdown(limit=8)


def outlined_ships(split: GapSplit | None) -> set[int]:
    """The ships to outline on the final plan's chart: the top of the gap, or the first that break a rule."""
    if split is None:
        return set()
    if not split.feasible:
        return set(list(split.broken)[:OUTLINED])
    return {s.ship for s in split.ships[:OUTLINED] if s.difference > 0}


def outline_label(split: GapSplit | None) -> str:
    return BROKEN_LABEL if split is not None and not split.feasible else OUTLINE_LABEL
