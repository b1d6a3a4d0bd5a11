"""Shared helpers for the grader tests: the spec's toy task (§8.6), an independent grid checker, perturbations.

The grid checker re-derives every rule of §3 the slow, obvious way (an hour x section occupancy grid, crane
usage summed hour by hour, movements counted hour by hour) without importing anything from `berth_env`, so that
agreement with `berth_env.check` is evidence that both read the spec the same way.
"""

from __future__ import annotations

import copy
import json
import math
import random
from collections import Counter, defaultdict
from typing import Any

# §8.6, verbatim from the spec.
TOY_TASK_JSON = """\
{"task_id":"toy-1","split":"test","quay":"T","terminal":"Toy Terminal","first_section":1,"last_section":10,"section_m":42.0,"week":6,"week_start_utc":"2024-02-05T00:00:00Z",
"ships":[
{"id":0,"name":"ALFA","imo":"0","length_m":200.0,"sections":3,"arrival":0,"handling":4,"planned_hour":5,"planned_section":1,"due":9,"from_port":"","to_port":"","beam_m":null,"draught_m":null,"workload":8,"min_cranes":1,"max_cranes":3,"std_cranes":2,"weight":1,"berth_deadline":null,"deadline_penalty":0},
{"id":1,"name":"BRAVO","imo":"0","length_m":320.0,"sections":4,"arrival":2,"handling":4,"planned_hour":2,"planned_section":5,"due":6,"from_port":"","to_port":"","beam_m":null,"draught_m":null,"workload":12,"min_cranes":2,"max_cranes":4,"std_cranes":3,"weight":1,"berth_deadline":null,"deadline_penalty":0},
{"id":2,"name":"CHARLIE","imo":"0","length_m":150.0,"sections":2,"arrival":26,"handling":6,"planned_hour":null,"planned_section":null,"due":34,"from_port":"","to_port":"","beam_m":null,"draught_m":null,"workload":6,"min_cranes":1,"max_cranes":2,"std_cranes":1,"weight":1,"berth_deadline":null,"deadline_penalty":0},
{"id":3,"name":"DELTA","imo":"0","length_m":250.0,"sections":3,"arrival":5,"handling":5,"planned_hour":10,"planned_section":4,"due":15,"from_port":"","to_port":"","beam_m":null,"draught_m":null,"workload":10,"min_cranes":1,"max_cranes":3,"std_cranes":2,"weight":1,"berth_deadline":8,"deadline_penalty":30},
{"id":4,"name":"ECHO","imo":"0","length_m":180.0,"sections":2,"arrival":10,"handling":4,"planned_hour":12,"planned_section":8,"due":16,"from_port":"","to_port":"","beam_m":null,"draught_m":null,"workload":4,"min_cranes":1,"max_cranes":2,"std_cranes":1,"weight":3,"berth_deadline":null,"deadline_penalty":0},
{"id":5,"name":"FOXTROT","imo":"0","length_m":330.0,"sections":3,"arrival":28,"handling":3,"planned_hour":28,"planned_section":5,"due":31,"from_port":"","to_port":"","beam_m":null,"draught_m":null,"workload":9,"min_cranes":2,"max_cranes":4,"std_cranes":3,"weight":1,"berth_deadline":null,"deadline_penalty":0}],
"blocks":[{"first":1,"last":3,"start":0,"end":5,"kind":"alongside","label":"OLD SHIP","cranes":2},{"first":8,"last":10,"start":20,"end":30,"kind":"closed","label":"fender repair","cranes":0}],
"notices":[],"disruptions":[],"difficulty":"toy",
"reference":{"naive_cost":300,"optimal_cost":27,"naive_plan":[],"optimal_plan":[]},
"rules":{"crane_pool":6,"crane_rate":28,"max_moves_per_hour":2,"crane_outages":[{"start":10,"end":20,"cranes":3}],"no_moves":[{"start":30,"end":40,"min_length":300,"reason":"wind above 25 kn"},{"start":32,"end":36,"min_length":0,"reason":"wind above 30 kn"}],"reward":3,"gap_k":100}}
"""
TOY_TASK_LINE = json.dumps(json.loads(TOY_TASK_JSON), separators=(",", ":"))
"""The toy task as one pack line (tasks.jsonl)."""


def toy_task() -> dict[str, Any]:
    """A fresh copy of the toy task (tests may change it)."""
    return json.loads(TOY_TASK_LINE)


# The toy task's base plan A: ship -> (berth_hour, section, cranes).
TOY_PLAN_A: dict[int, tuple[int, int, int]] = {
    0: (5, 1, 2),
    1: (2, 5, 3),
    2: (26, 1, 2),
    3: (10, 4, 2),
    4: (12, 8, 1),
    5: (28, 5, 3),
}


def as_list(entries: dict[int, tuple]) -> list[dict[str, Any]]:
    """Entries as the canonical list form an agent would send."""
    out = []
    for ship in sorted(entries):
        hour, section, *rest = entries[ship]
        item = {"ship": ship, "berth_hour": hour, "section": section}
        if rest and rest[0] is not None:
            item["cranes"] = rest[0]
        out.append(item)
    return out


def entries_of(plan: list[dict[str, Any]]) -> dict[int, tuple[int, int, int | None]]:
    """A reference plan (list of dicts) as an entries mapping."""
    return {e["ship"]: (e["berth_hour"], e["section"], e.get("cranes")) for e in plan}


def problem_categories(result: Any) -> dict[int, list[str]]:
    """Ship id -> its problem categories, for every ship with a problem (missing ships included)."""
    found = {ship: [category for category, _ in r.problems] for ship, r in result.ships.items() if r.problems}
    for ship in result.missing:
        found[ship] = ["MISSING"]
    return dict(sorted(found.items()))


def plain_version(task: dict[str, Any]) -> dict[str, Any]:
    """The same task as a legacy plain task (no crane pool): no cranes, wind or movement rules."""
    plain = copy.deepcopy(task)
    plain["rules"] = {}
    return plain


def grid_check(task: dict[str, Any], entries: dict[int, tuple]) -> tuple[bool, int | None, set[int]]:
    """(feasible, cost or None, ships with any problem) by brute force over hours, sections and cranes."""
    ships = task["ships"]
    rules = task.get("rules") or {}
    cranes_apply = bool(rules.get("crane_pool"))
    cap = (rules.get("max_moves_per_hour") or 0) if cranes_apply else 0
    bad = {i for i in range(len(ships)) if i not in entries}

    grid: defaultdict[tuple[int, int], list[tuple[str, int]]] = defaultdict(list)
    usage: Counter[int] = Counter()
    movements: Counter[int] = Counter()
    workers: defaultdict[int, set[int]] = defaultdict(set)
    movers: defaultdict[int, set[int]] = defaultdict(set)
    for index, block in enumerate(task["blocks"]):
        for hour in range(block["start"], block["end"]):
            for section in range(block["first"], block["last"] + 1):
                grid[(hour, section)].append(("block", index))
            if cranes_apply and block["kind"] == "alongside":
                usage[hour] += block["cranes"]
        if cranes_apply and block["kind"] == "alongside":
            movements[block["end"]] += 1

    cost = 0
    for ship_id, entry in entries.items():
        ship = ships[ship_id]
        hour, section = entry[0], entry[1]
        if cranes_apply:
            count = entry[2] if len(entry) > 2 and entry[2] is not None else ship["std_cranes"]
            in_range = ship["min_cranes"] <= count <= ship["max_cranes"]
            finish = hour + max(1, math.ceil(ship["workload"] / (count if in_range else ship["std_cranes"])))
            winds = [
                (w["start"], w["end"])
                for w in rules.get("no_moves", [])
                if ship["length_m"] >= w.get("min_length", 0)
            ]
            leave = finish
            pushed = True
            while pushed:  # keep waiting while any window still covers the leaving hour
                pushed = False
                for start, end in winds:
                    if start <= leave < end:
                        leave, pushed = end, True
            if not in_range or any(start <= hour < end for start, end in winds):
                bad.add(ship_id)
            for t in range(hour, finish):
                usage[t] += count
                workers[t].add(ship_id)
            for t in (hour, leave):
                movements[t] += 1
                movers[t].add(ship_id)
        else:
            leave = hour + ship["handling"]
        last = section + ship["sections"] - 1
        if hour < ship["arrival"] or section < task["first_section"] or last > task["last_section"]:
            bad.add(ship_id)
        for t in range(hour, leave):
            for s in range(section, last + 1):
                grid[(t, s)].append(("ship", ship_id))
        late = max(0, leave - ship["due"]) * ship["sections"] * ship["weight"]
        if ship["berth_deadline"] is not None and hour > ship["berth_deadline"]:
            late += ship["deadline_penalty"] * (hour - ship["berth_deadline"])
        moved = ship["planned_section"] is not None and section != ship["planned_section"]
        cost += late + 5 * moved

    for owners in grid.values():
        if len(owners) > 1:
            bad.update(owner for kind, owner in owners if kind == "ship")
    if cranes_apply:
        for t, ids in workers.items():
            pool = rules["crane_pool"] - sum(
                o["cranes"] for o in rules.get("crane_outages", []) if o["start"] <= t < o["end"]
            )
            if usage[t] > pool:
                bad.update(ids)
        if cap:
            for t, ids in movers.items():
                if movements[t] > cap:
                    bad.update(ids)
    feasible = not bad
    return feasible, (cost if feasible else None), bad


def perturb(task: dict[str, Any], rng: random.Random) -> dict[int, tuple[int, int, int | None]]:
    """The task's optimal plan with one to three ships nudged in hour, section and/or cranes."""
    entries = entries_of(task["reference"]["optimal_plan"])
    for ship_id in rng.sample(sorted(entries), k=rng.choice((1, 1, 1, 2, 3))):
        hour, section, cranes = entries[ship_id]
        what = rng.randrange(7)
        if what in (0, 3, 5, 6):
            hour += rng.choice((-3, -2, -1, 1, 1, 2, 3, 5, 8, 13))
        if what in (1, 3, 6):
            section += rng.choice((-3, -2, -1, 1, 2, 3))
        if what in (2, 5, 6):
            cranes += rng.choice((-2, -1, 1, 2))
        entries[ship_id] = (hour, section, cranes)
    return entries
