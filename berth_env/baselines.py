"""Baseline planners (§10): simple rules that place ships one at a time wherever they fit.

`naive_plan` is the port re-planning by hand (planned order, standard cranes, nearest free section to the
planned one); `greedy_plan` is first-come-first-served with as many cranes as fit. Both must reproduce the pack's
reference numbers exactly, which is why their tie-breaking follows the spec to the letter. `serial_plan` and
`published_plan` are the weak references the spec uses to sanity-check rewards; `repair_plan` re-places the
ships a check flagged (for the scripted baseline players).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from berth_env.check import check
from berth_env.plan import HOUR_LIMIT, Entry, PlanError, canonical_plan, parse_plan
from berth_env.rules import (
    Ship,
    Task,
    Window,
    WindRules,
    crane_pool_at,
    departure,
    is_crane_task,
    move_cap,
    window_at,
    work_hours,
)


class _Ledger:
    """What is already on the quay while ships are placed one by one (§10.1).

    Holds the occupied rectangles (blocks first, then placed ships), cranes in use per hour and movements per hour,
    and answers whether a candidate berth fits. Crane, wind and movement rules apply on crane-rule tasks only.
    """

    def __init__(self, task: Task) -> None:
        self.task = task
        self.crane_rule = is_crane_task(task)
        self.cap = move_cap(task)
        self.wind = WindRules(task)
        blocks = task.get("blocks") or ()
        self.rects: list[tuple[int, int, int, int]] = [
            (b["start"], b["end"], b["first"], b["last"]) for b in blocks
        ]
        self.usage: Counter[int] = Counter()
        self.moves: Counter[int] = Counter()
        self._pool: dict[int, int] = {}
        if self.crane_rule:
            for b in blocks:
                if b.get("kind") == "alongside":
                    for hour in range(b["start"], b["end"]):
                        self.usage[hour] += b.get("cranes") or 0
                    self.moves[b["end"]] += 1

    def pool(self, hour: int) -> int:
        if hour not in self._pool:
            self._pool[hour] = crane_pool_at(self.task, hour)
        return self._pool[hour]

    def timing(
        self, ship: Ship, hour: int, cranes: int | None, windows: Sequence[Window]
    ) -> tuple[int, int] | None:
        """(finish, departure) if wind, crane pool and movement cap let the ship berth at `hour`; else None.

        None of these depend on the section, so they are settled before any section is tried.
        """
        if not self.crane_rule:
            leave = hour + int(ship["handling"])
            return leave, leave
        assert cranes is not None
        if window_at(windows, hour):
            return None
        finish = hour + work_hours(ship, cranes, True)
        leave = departure(windows, finish)
        if any(self.usage[t] + cranes > self.pool(t) for t in range(hour, finish)):
            return None
        if self.cap and (self.moves[hour] + 1 > self.cap or self.moves[leave] + 1 > self.cap):
            return None
        return finish, leave

    def free_section(self, hour: int, leave: int, size: int, candidates: Iterable[int]) -> int | None:
        """The first candidate start section whose span is free over `[hour, leave)`."""
        busy = [(first, last) for start, end, first, last in self.rects if start < leave and hour < end]
        for section in candidates:
            top = section + size - 1
            if all(top < first or last < section for first, last in busy):
                return section
        return None

    def place(self, hour: int, section: int, size: int, cranes: int | None, finish: int, leave: int) -> None:
        self.rects.append((hour, leave, section, section + size - 1))
        if self.crane_rule:
            for t in range(hour, finish):
                self.usage[t] += cranes or 0
            self.moves[hour] += 1
            self.moves[leave] += 1


def _sections_near(task: Task, ship: Ship) -> list[int]:
    """Every start section that keeps the ship on the quay, nearest to its planned section first (lower on ties)."""
    anchor = ship["planned_section"] if ship.get("planned_section") is not None else task["first_section"]
    starts = range(task["first_section"], task["last_section"] - ship["sections"] + 2)
    return sorted(starts, key=lambda k: (abs(k - anchor), k))


def _no_room(ship: Ship) -> RuntimeError:
    return RuntimeError(f"no berth found for ship {ship['id']} before hour {HOUR_LIMIT}")


def _crane_options(ledger: _Ledger, ship: Ship) -> list[int | None]:
    """Crane counts to try, most first (plain tasks have no crane choice)."""
    if not ledger.crane_rule:
        return [None]
    return list(range(ship["max_cranes"], ship["min_cranes"] - 1, -1))


def _place_earliest(
    ledger: _Ledger, ship: Ship, start: int, crane_options: Sequence[int | None], sections: Sequence[int]
) -> Entry:
    """Place the ship at the earliest hour from `start` where a crane option (tried in order) has a free section.

    The first option that fits at an hour wins, on the first of `sections` that is free.
    """
    windows = ledger.wind.for_ship(ship)
    for hour in range(start, HOUR_LIMIT + 1):
        for cranes in crane_options:
            timing = ledger.timing(ship, hour, cranes, windows)
            if timing is None:
                continue
            section = ledger.free_section(hour, timing[1], ship["sections"], sections)
            if section is not None:
                ledger.place(hour, section, ship["sections"], cranes, *timing)
                return hour, section, cranes
    raise _no_room(ship)


def _by_arrival(ships: Iterable[Ship]) -> list[Ship]:
    return sorted(ships, key=lambda s: (s["arrival"], s["id"]))


def naive_plan(task: Task) -> list[dict[str, int]]:
    """The naive re-plan stored as `reference.naive_plan` (§10.2).

    In planned order, each ship keeps its standard cranes and takes the first hour (from its planned hour, not
    before arrival) at which some section fits, choosing the section nearest its planned one.
    """
    ledger = _Ledger(task)
    plan: dict[int, Entry] = {}
    order = sorted(
        task["ships"],
        key=lambda s: (s["planned_hour"] if s.get("planned_hour") is not None else s["arrival"], s["id"]),
    )
    for ship in order:
        cranes = ship["std_cranes"] if ledger.crane_rule else None
        start = max(ship["arrival"], ship.get("planned_hour") or ship["arrival"])
        plan[ship["id"]] = _place_earliest(ledger, ship, start, [cranes], _sections_near(task, ship))
    return canonical_plan(plan)


def greedy_plan(task: Task) -> list[dict[str, int]]:
    """The greedy baseline whose cost is `reference.greedy_cost` (§10.3).

    In arrival order, each ship takes the earliest hour at which any crane count fits, trying the most cranes
    first, on the section nearest its planned one.
    """
    ledger = _Ledger(task)
    plan: dict[int, Entry] = {}
    for ship in _by_arrival(task["ships"]):
        options = _crane_options(ledger, ship)
        plan[ship["id"]] = _place_earliest(ledger, ship, ship["arrival"], options, _sections_near(task, ship))
    return canonical_plan(plan)


def repair_plan(task: Task, plan: Any, flagged: Iterable[int]) -> list[dict[str, int]]:
    """Keep every ship of `plan` that is not flagged where it is; place the flagged and missing ships again.

    Used by the scripted baseline players after a check: the re-placed ships go, in arrival order, to the earliest
    hour that fits around the kept ones (greedy's choice of cranes and sections). An unreadable plan keeps
    nothing. If the kept ships are clean among themselves, the repaired plan is feasible.
    """
    try:
        entries = parse_plan(task, plan).entries
    except PlanError:
        entries = {}
    again = set(flagged)
    kept = {ship_id: entry for ship_id, entry in entries.items() if ship_id not in again}
    ledger = _Ledger(task)
    for placed in check(task, kept).ships.values():
        size = placed.last_section - placed.section + 1
        ledger.place(placed.berth_hour, placed.section, size, placed.cranes, placed.finish, placed.departure)
    repaired = dict(kept)
    for ship in _by_arrival(s for s in task["ships"] if s["id"] not in kept):
        options = _crane_options(ledger, ship)
        repaired[ship["id"]] = _place_earliest(
            ledger, ship, ship["arrival"], options, _sections_near(task, ship)
        )
    return canonical_plan(repaired)


def serial_plan(task: Task) -> list[dict[str, int]]:
    """One ship after another on the first section with standard cranes (§10.4): a deliberately poor plan."""
    ledger = _Ledger(task)
    plan: dict[int, Entry] = {}
    previous: int | None = None
    for ship in _by_arrival(task["ships"]):
        cranes = ship["std_cranes"] if ledger.crane_rule else None
        start = ship["arrival"] if previous is None else max(previous + 1, ship["arrival"])
        plan[ship["id"]] = _place_earliest(ledger, ship, start, [cranes], [task["first_section"]])
        previous = plan[ship["id"]][0]
    return canonical_plan(plan)


def published_plan(task: Task) -> list[dict[str, int]]:
    """The port's published plan as it stands (§10.4); unscheduled calls at arrival on the first section.

    No fitting is done: the disruptions usually make it infeasible, which is the point of the task.
    """
    crane_rule = is_crane_task(task)
    plan: dict[int, Entry] = {}
    for ship in task["ships"]:
        cranes = ship["std_cranes"] if crane_rule else None
        if ship.get("planned_section") is None:
            plan[ship["id"]] = (ship["arrival"], task["first_section"], cranes)
        else:
            plan[ship["id"]] = (ship["planned_hour"], ship["planned_section"], cranes)
    return canonical_plan(plan)
