"""The per-ship quantities that the checker, the floor and the baselines all read (PORTSIM_SPEC §1.8).

Keeping them in one place is what makes the three agree: a ship's stay, its wind wait and the crane pool are
computed the same way whether we are judging a plan, bounding its cost or building one.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any

Task = Mapping[str, Any]
Ship = Mapping[str, Any]
Window = tuple[int, int]

MOVE_PENALTY = 5
"""Cost of starting a scheduled ship on a section other than its planned one (§4.2)."""


def task_rules(task: Task) -> Mapping[str, Any]:
    """The task's `rules` object; legacy plain tasks may store `{}`, null or nothing."""
    return task.get("rules") or {}


def is_crane_task(task: Task) -> bool:
    """A crane-rule task has a truthy `rules.crane_pool`; only those have cranes, wind and movement rules."""
    return bool(task_rules(task).get("crane_pool"))


def move_cap(task: Task) -> int:
    """Movements allowed per hour, or 0 when the rule is off (missing or falsy cap, or a plain task)."""
    if not is_crane_task(task):
        return 0
    return int(task_rules(task).get("max_moves_per_hour") or 0)


def work_hours(ship: Ship, cranes: int, crane_rule: bool) -> int:
    """Hours of work alongside with `cranes` cranes: ceil(workload / cranes), at least 1.

    Plain tasks (and ships without a workload) use the fixed `handling` time instead.
    """
    workload = ship.get("workload")
    if not crane_rule or workload is None:
        return int(ship["handling"])
    return max(1, -(-workload // cranes))


class WindRules:
    """The no-movement windows of a task, merged once for each ship-length threshold it uses.

    A window applies to ships at least `min_length` long (missing means every ship). For each ship the windows
    that apply are sorted and merged when they overlap *or touch*, because a ship pushed to the end of one window
    would otherwise land at the start of the next. Plain tasks have no wind rules at all.
    Build one per check (it reads the task once) rather than per ship: merging per ship was a third of grading.
    """

    def __init__(self, task: Task) -> None:
        windows = (task_rules(task).get("no_moves") or ()) if is_crane_task(task) else ()
        spans = [(w.get("min_length") or 0, int(w["start"]), int(w["end"])) for w in windows]
        self._thresholds = sorted({threshold for threshold, _, _ in spans})
        self._merged = [
            _merge(sorted((start, end) for threshold, start, end in spans if threshold <= level))
            for level in self._thresholds
        ]

    def for_ship(self, ship: Ship) -> list[Window]:
        """The disjoint, non-touching windows `[a, b)` that apply to this ship, ascending."""
        applicable = bisect.bisect_right(self._thresholds, ship["length_m"])
        return self._merged[applicable - 1] if applicable else []


def _merge(spans: list[Window]) -> list[Window]:
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


def window_at(windows: Sequence[Window], hour: int) -> Window | None:
    """The merged window containing `hour` (half-open), if any."""
    for start, end in windows:
        if start <= hour < end:
            return start, end
    return None


def departure(windows: Sequence[Window], finish: int) -> int:
    """When a ship that finishes work at `finish` may leave: the end of the wind window it finished in, else at once."""
    window = window_at(windows, finish)
    return window[1] if window else finish


def crane_pool_at(task: Task, hour: int) -> int:
    """Cranes available in `hour`: the pool minus every outage covering it (overlapping outages add up)."""
    rules = task_rules(task)
    out = sum(o["cranes"] for o in rules.get("crane_outages") or () if o["start"] <= hour < o["end"])
    return int(rules.get("crane_pool") or 0) - out


def ship_delay_cost(ship: Ship, berth_hour: int, dep: int) -> int:
    """Lateness (sections x hours late x weight) plus the emergency term for berthing after the deadline (§4.1).

    The weight multiplies lateness only; the deadline term depends on the berth hour, lateness on the departure.
    """
    cost = ship["sections"] * max(0, dep - ship["due"]) * ship.get("weight", 1)
    deadline = ship.get("berth_deadline")
    if deadline is not None and berth_hour > deadline:
        cost += (ship.get("deadline_penalty") or 0) * (berth_hour - deadline)
    return cost


def is_moved(ship: Ship, section: int) -> bool:
    """A scheduled ship is moved when it starts on another section than planned; hours and cranes never count."""
    planned = ship.get("planned_section")
    return planned is not None and section != planned
