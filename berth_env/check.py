"""The feasibility checker and the plan's cost (§3, §4).

Every planned ship gets a timeline (berth, finish, departure), its own problems, and a cost; then the ships are
checked against each other (overlaps), against the shared crane pool and against the movement cap. Problems are
attached to ships, so the grade can count how many ships are clean. A ship with problems still takes part in
the shared checks: its rectangle, cranes and movements are just as real to the other ships.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from berth_env.plan import Entry, ParsedPlan
from berth_env.rules import (
    MOVE_PENALTY,
    Task,
    WindRules,
    departure,
    is_crane_task,
    is_moved,
    move_cap,
    ship_delay_cost,
    task_rules,
    window_at,
    work_hours,
)

MISSING = "MISSING"
WIND_BERTH = "WIND_BERTH"
CRANE_RANGE = "CRANE_RANGE"
ARRIVAL = "ARRIVAL"
QUAY = "QUAY"
BLOCK = "BLOCK"
SHIP_OVERLAP = "SHIP_OVERLAP"
CRANE_POOL = "CRANE_POOL"
MOVE_LIMIT = "MOVE_LIMIT"

_RUNS_SHOWN = 4  # over-limit crane runs listed per ship before "..."


@dataclass(slots=True)
class ShipResult:
    """One planned ship: where and when it is, what it costs, and what is wrong with it.

    It occupies sections `section..last_section` over hours `[berth_hour, departure)`; it works (and holds
    `cranes`) over `[berth_hour, finish)`; departure is later than finish only while it waits out the wind.
    """

    ship: int
    berth_hour: int
    section: int
    last_section: int
    cranes: int | None
    finish: int
    departure: int
    delay_h: int
    moved: bool
    cost: int
    problems: list[tuple[str, str]] = field(default_factory=list)

    @property
    def hours_alongside(self) -> int:
        """Hours at the quay, wind wait included."""
        return self.departure - self.berth_hour


@dataclass(slots=True)
class CheckResult:
    """The checker's verdict. Totals are None unless every ship of the task is planned and problem-free."""

    feasible: bool
    cost: int | None
    delay_cost: int | None
    moves: int | None
    violations: list[dict[str, object]]
    ships: dict[int, ShipResult]
    missing: list[int]

    @property
    def clean_ships(self) -> int:
        """Planned ships without any problem (a missing ship is never clean)."""
        return sum(1 for result in self.ships.values() if not result.problems)


def check(task: Task, entries: Mapping[int, Entry] | ParsedPlan) -> CheckResult:
    """Check the accepted entries of a plan (from `parse_plan`) against every rule of the task."""
    if isinstance(entries, ParsedPlan):
        entries = entries.entries
    ships = task["ships"]
    unknown = [ship_id for ship_id in entries if not (type(ship_id) is int and 0 <= ship_id < len(ships))]
    if unknown:
        raise ValueError(
            f"check() takes entries from parse_plan; these are not ship ids of the task: {unknown[:5]}"
        )

    crane_rule = is_crane_task(task)
    wind = WindRules(task)
    results = {
        ship_id: _ship_result(task, ship_id, entries[ship_id], crane_rule, wind)
        for ship_id in sorted(entries)
    }
    timelines = list(results.values())
    _check_overlaps(timelines, ships)
    if crane_rule:
        _check_crane_pool(task, timelines)
        if move_cap(task):
            _check_movements(task, timelines)

    missing = [ship_id for ship_id in range(len(ships)) if ship_id not in results]
    violations: list[dict[str, object]] = []
    for ship_id in range(len(ships)):
        result = results.get(ship_id)
        if result is None:
            name = ships[ship_id]["name"]
            violations.append(
                {"ship": ship_id, "problem": f"ship {ship_id} ({name}) is missing from the plan"}
            )
        else:
            violations.extend({"ship": ship_id, "problem": text} for _, text in result.problems)

    if violations:
        return CheckResult(False, None, None, None, violations, results, missing)
    moves = sum(result.moved for result in timelines)
    cost = sum(result.cost for result in timelines)
    return CheckResult(True, cost, cost - MOVE_PENALTY * moves, moves, violations, results, missing)


def _ship_result(task: Task, ship_id: int, entry: Entry, crane_rule: bool, wind: WindRules) -> ShipResult:
    """The ship's timeline and cost, and the rules it can break on its own (§3.1, §3.2 rows 1-5)."""
    ship = task["ships"][ship_id]
    hour, section = entry[0], entry[1]
    last = section + ship["sections"] - 1
    problems: list[tuple[str, str]] = []
    if crane_rule:
        cranes = entry[2] if len(entry) > 2 and entry[2] is not None else ship["std_cranes"]
        low, high = ship["min_cranes"], ship["max_cranes"]
        in_range = low <= cranes <= high
        # An out-of-range count still loads the pool as given, but must not divide the workload (0, negative).
        finish = hour + work_hours(ship, cranes if in_range else ship["std_cranes"], True)
        windows = wind.for_ship(ship)
        leave = departure(windows, finish)
        window = window_at(windows, hour)
        if window:
            problems.append(
                (
                    WIND_BERTH,
                    f"berths at hour {hour}, inside the no-movement window {window[0]}-{window[1]} that applies "
                    f"to it (berth before {window[0]} or from {window[1]})",
                )
            )
        if not in_range:
            problems.append((CRANE_RANGE, f"uses {cranes} cranes; it must use {low}-{high}"))
    else:
        cranes = None
        finish = leave = hour + int(ship["handling"])

    if hour < ship["arrival"]:
        problems.append((ARRIVAL, f"berths at hour {hour} but cannot arrive before hour {ship['arrival']}"))
    first, last_quay = task["first_section"], task["last_section"]
    if section < first or last > last_quay:
        problems.append(
            (QUAY, f"needs sections {section}-{last}, but the quay has sections {first}-{last_quay}")
        )
    for block in task.get("blocks") or ():
        if (
            section <= block["last"]
            and block["first"] <= last
            and hour < block["end"]
            and block["start"] < leave
        ):
            span = f"sections {block['first']}-{block['last']} during hours {block['start']}-{block['end']}"
            if block.get("kind") == "alongside":
                what = f"{block['label']}, already alongside on {span}"
            else:
                what = f"closed {span} ({block.get('label') or 'closed'})"
            problems.append((BLOCK, f"runs into {what}"))

    delay_cost = ship_delay_cost(ship, hour, leave)
    moved = is_moved(ship, section)
    return ShipResult(
        ship=ship_id,
        berth_hour=hour,
        section=section,
        last_section=last,
        cranes=cranes,
        finish=finish,
        departure=leave,
        delay_h=max(0, leave - ship["due"]),
        moved=moved,
        cost=delay_cost + (MOVE_PENALTY if moved else 0),
        problems=problems,
    )


def _check_overlaps(timelines: Sequence[ShipResult], ships: Sequence[Mapping[str, object]]) -> None:
    """Two ships on a common section in a common hour: one problem on each, naming the other (§3.2 row 6).

    Ships are swept in berth-hour order, so each one is only compared with ships berthing before it leaves.
    Problems are then added in (lower id, higher id) pair order, so each ship's overlap problems come in the
    other ship's id order. A ship leaving at h and one berthing at h do not meet (half-open hours).
    """
    by_berth = sorted(timelines, key=lambda r: r.berth_hour)
    pairs: list[tuple[ShipResult, ShipResult]] = []
    for index, a in enumerate(by_berth):
        for b in by_berth[index + 1 :]:
            if b.berth_hour >= a.departure:
                break  # every later ship berths after `a` has left
            if a.berth_hour < b.departure and a.section <= b.last_section and b.section <= a.last_section:
                pairs.append((a, b) if a.ship < b.ship else (b, a))
    pairs.sort(key=lambda pair: (pair[0].ship, pair[1].ship))
    for a, b in pairs:
        sections = f"{max(a.section, b.section)}-{min(a.last_section, b.last_section)}"
        hours = f"{max(a.berth_hour, b.berth_hour)}-{min(a.departure, b.departure)}"
        for this, other in ((a, b), (b, a)):
            this.problems.append(
                (
                    SHIP_OVERLAP,
                    f"overlaps ship {other.ship} ({ships[other.ship]['name']}) on sections {sections} "
                    f"during hours {hours}",
                )
            )


def _check_crane_pool(task: Task, timelines: Sequence[ShipResult]) -> None:
    """Flag every ship working in an hour where cranes in use exceed cranes available (§3.3).

    Usage and the pool are piecewise constant, so instead of walking hour by hour we sweep the hours where
    either changes and keep the over-limit spans. A ship is flagged once, whatever its own share.
    """
    rules = task_rules(task)
    usage_change: defaultdict[int, int] = defaultdict(int)
    pool_change: defaultdict[int, int] = defaultdict(int)
    for block in task.get("blocks") or ():
        if block.get("kind") == "alongside" and block["start"] < block["end"]:
            usage_change[block["start"]] += block.get("cranes") or 0
            usage_change[block["end"]] -= block.get("cranes") or 0
    for outage in rules.get("crane_outages") or ():
        if outage["start"] < outage["end"]:
            pool_change[outage["start"]] -= outage["cranes"]
            pool_change[outage["end"]] += outage["cranes"]
    for result in timelines:
        usage_change[result.berth_hour] += result.cranes or 0
        usage_change[result.finish] -= result.cranes or 0

    over: list[tuple[int, int, int, int]] = []  # (from, to, cranes in use, cranes available), half-open spans
    hours = sorted(usage_change.keys() | pool_change.keys())
    usage, pool = 0, int(rules.get("crane_pool") or 0)
    for start, end in itertools.pairwise(hours):
        usage += usage_change.get(start, 0)
        pool += pool_change.get(start, 0)
        if usage > pool:
            over.append((start, end, usage, pool))
    if not over:
        return

    for result in timelines:
        runs: list[list[int]] = []
        worst: tuple[int, int, int, int] | None = None  # (excess, hour, in use, available)
        for start, end, usage, pool in over:
            lo, hi = max(start, result.berth_hour), min(end, result.finish)
            if lo >= hi:
                continue
            if runs and runs[-1][1] == lo:
                runs[-1][1] = hi
            else:
                runs.append([lo, hi])
            if worst is None or usage - pool > worst[0]:
                worst = (usage - pool, lo, usage, pool)
        if worst is None:
            continue
        shown = ", ".join(f"{lo}-{hi}" for lo, hi in runs[:_RUNS_SHOWN]) + (
            ", ..." if len(runs) > _RUNS_SHOWN else ""
        )
        result.problems.append(
            (
                CRANE_POOL,
                f"works while the quay is short of cranes in hours {shown} (worst hour {worst[1]}: "
                f"{worst[2]} cranes in use, {worst[3]} available)",
            )
        )


def _check_movements(task: Task, timelines: Sequence[ShipResult]) -> None:
    """Flag every ship berthing or leaving in an hour with more movements than the cap (§3.4).

    Already-alongside ships add their departure to that hour's count but are never flagged, and an hour where
    only they move is not examined. A ship waiting for the wind moves at the window's end.
    """
    cap = move_cap(task)
    fixed = Counter(b["end"] for b in task.get("blocks") or () if b.get("kind") == "alongside")
    movers: defaultdict[int, list[tuple[ShipResult, str]]] = defaultdict(list)
    for result in timelines:
        movers[result.berth_hour].append((result, "berths"))
        movers[result.departure].append((result, "leaves"))
    for hour in sorted(movers):
        count = len(movers[hour]) + fixed.get(hour, 0)
        if count > cap:
            for result, kind in movers[hour]:
                result.problems.append(
                    (MOVE_LIMIT, f"{kind} at hour {hour}, when {count} ships move (at most {cap} per hour)")
                )
