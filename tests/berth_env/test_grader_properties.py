"""Properties of the grader over many generated plans (PORTSIM_SPEC §8.1).

* An independent brute-force grid checker (testkit/grid_checker.py) agrees with `check` on feasibility, cost and
  the set of ships with problems, over 160 perturbations of the optimum per sampled task.
* No feasible perturbation of a proven optimum costs less than it, and the floor never exceeds a feasible cost.
* Arbitrary JSON-like input never crashes the grader and never passes.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from berth_env import canonical_plan, check, grade, load_pack, parse_plan, unavoidable_cost
from berth_env.pack import BUNDLED_PACK
from testkit.grid_checker import entries_of, grid_check, perturb, toy_task

SAMPLED = [
    "dock-24B-w06x1-busy-0",  # closures, an outage, an unscheduled call
    "dock-24B-w16x2-storm-0",  # a gale: wind waits and berth bans
    "dock-36A-w36x2-busy-0",  # heavy lateness, large floor
    "dock-36A-w05x2-storm-0",  # 59 ships
]
PACK = load_pack([BUNDLED_PACK])
FLOORS = {task_id: unavoidable_cost(PACK.get(task_id)) for task_id in SAMPLED}


def ships_with_problems(result) -> set[int]:
    return {ship for ship, r in result.ships.items() if r.problems} | set(result.missing)


def assert_agrees(task, entries):
    result = check(task, entries)
    feasible, cost, bad = grid_check(task, entries)
    assert (result.feasible, result.cost, ships_with_problems(result)) == (feasible, cost, bad), entries
    return result


@pytest.mark.parametrize("task_id", SAMPLED)
def test_grid_checker_agrees_on_160_perturbations(task_id):
    task = PACK.get(task_id)
    rng = random.Random(task_id)
    outcomes = {"feasible": 0, "infeasible": 0}
    for _ in range(160):
        entries = perturb(task, rng)
        result = assert_agrees(task, entries)
        outcomes["feasible" if result.feasible else "infeasible"] += 1
        if result.feasible:
            assert result.cost >= task["reference"]["optimal_cost"] >= FLOORS[task_id]
    # Both kinds occurred, so both halves of the comparison were exercised.
    assert outcomes["feasible"] >= 10 and outcomes["infeasible"] >= 10, outcomes


def test_grid_checker_agrees_on_the_reference_plans():
    for task in PACK.tasks:
        for plan in (task["reference"]["optimal_plan"], task["reference"]["naive_plan"]):
            assert_agrees(task, entries_of(plan))


change = st.tuples(
    st.integers(0, 58),  # ship (taken modulo the task's ship count)
    st.integers(-6, 12),  # hours later
    st.integers(-3, 3),  # sections
    st.integers(-2, 2),  # cranes
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SAMPLED), st.lists(change, min_size=1, max_size=3))
def test_no_feasible_perturbation_beats_the_optimum(task_id, changes):
    task = PACK.get(task_id)
    entries = entries_of(task["reference"]["optimal_plan"])
    for ship, hours, sections, cranes in changes:
        ship %= len(entries)
        hour, section, count = entries[ship]
        entries[ship] = (hour + hours, section + sections, count + cranes)
    result = assert_agrees(task, entries)
    graded = grade(task, canonical_plan(entries))
    if result.feasible:
        assert result.cost >= task["reference"]["optimal_cost"] >= FLOORS[task_id]
        assert 0.2 <= graded["reward"] <= 1.0
        assert (graded["reward"] == 1.0) == (result.cost == task["reference"]["optimal_cost"])
    else:
        assert graded["reward"] < 0.2


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(
        st.integers(0, 5),
        st.tuples(st.integers(-16800, 16800), st.integers(-1000, 1000), st.none() | st.integers(-1000, 1000)),
    )
)
def test_canonical_list_parses_back_to_the_same_plan(entries):
    task = toy_task()
    parsed = parse_plan(task, canonical_plan(entries))
    std = {ship["id"]: ship["std_cranes"] for ship in task["ships"]}
    assert parsed.issues == []
    assert parsed.entries == {k: (h, s, std[k] if c is None else c) for k, (h, s, c) in entries.items()}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner, max_size=6),
    max_leaves=30,
)
entry_keys = st.sampled_from(["ship", "id", "name", "berth_hour", "hour", "section", "cranes", "plan"])
entry_like = st.dictionaries(entry_keys, json_values | st.integers(-3, 12), max_size=5)


@settings(max_examples=80, deadline=None)
@given(
    json_values
    | st.lists(entry_like, max_size=12)
    | st.dictionaries(st.text(max_size=4), json_values, max_size=8)
)
def test_arbitrary_input_never_crashes_and_never_passes(raw):
    task = toy_task()
    for plan in (raw, repr(raw), str(raw)):
        graded = grade(task, plan)
        assert graded["feasible"] is False and graded["reward"] < 0.2
        assert graded["parse_problems"] or graded["violations"]
