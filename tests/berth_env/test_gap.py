"""The gap to the optimum, split ship by ship: the shares sum to the gap exactly, on every stored reference plan
and on thousands of perturbed ones, and an infeasible plan names which ships break which rules."""

from __future__ import annotations

import random

import pytest

from berth_env import check, load_pack, parse_plan
from berth_env.gap import split_gap
from testkit.grid_checker import as_list, perturb
from testkit.tasks import TASK_ID


def test_the_optimum_itself_has_no_gap_and_no_ship_to_blame():
    for task in load_pack().tasks:
        split = split_gap(task, task["reference"]["optimal_plan"])
        assert split.feasible and split.gap == 0 and split.ships == [], task["task_id"]


def test_every_reference_plan_splits_exactly_into_its_ships():
    splits = 0
    for task in load_pack().tasks:
        for name in ("naive_plan", "optimal_plan"):
            plan = task["reference"][name]
            split = split_gap(task, plan)
            result = check(task, parse_plan(task, plan))
            assert split.feasible == result.feasible
            if split.feasible:
                splits += 1
                assert sum(ship.difference for ship in split.ships) == split.gap == result.cost - split.optimal_cost
    assert splits >= len(load_pack().tasks)  # every optimum, and the naive plans that are feasible


def test_thousands_of_perturbed_plans_split_exactly_or_name_what_they_break():
    rng = random.Random(20261206)
    tasks = load_pack().tasks
    feasible = infeasible = 0
    for _ in range(3000):
        task = rng.choice(tasks)
        plan = as_list(perturb(task, rng))
        split = split_gap(task, plan)
        result = check(task, parse_plan(task, plan))
        if result.feasible:
            feasible += 1
            optimum = check(task, parse_plan(task, task["reference"]["optimal_plan"]))
            assert split.gap == result.cost - task["reference"]["optimal_cost"]
            assert sum(ship.difference for ship in split.ships) == split.gap
            if split.gap:
                assert sum(ship.share(split.gap) for ship in split.ships) == pytest.approx(1.0)
            # every ship that costs other than in the optimum is listed, with the checker's own figures
            differing = {i for i in result.ships if result.ships[i].cost != optimum.ships[i].cost}
            assert {ship.ship for ship in split.ships} == differing
            for ship in split.ships:
                assert (ship.cost, ship.optimum_cost) == (result.ships[ship.ship].cost, optimum.ships[ship.ship].cost)
                assert ship.moved == result.ships[ship.ship].moved
            assert [s.difference for s in split.ships] == sorted((s.difference for s in split.ships), reverse=True)
        else:
            infeasible += 1
            assert split.gap is None and split.ships == []
            named = sorted((ship, text) for ship, texts in split.broken.items() for text in texts)
            assert named == sorted((v["ship"], v["problem"]) for v in result.violations)
    assert feasible > 300 and infeasible > 300  # both branches really exercised


def test_a_ship_made_late_by_hand_carries_the_whole_gap():
    task = load_pack().get(TASK_ID)
    plan = [dict(entry) for entry in task["reference"]["optimal_plan"]]
    ships = task["ships"]
    # the ship whose lateness is the cheapest to see: push the last-departing ship later, where nothing else is
    last = max(plan, key=lambda e: e["berth_hour"] + ships[e["ship"]]["handling"])
    last["berth_hour"] += 24
    split = split_gap(task, plan)
    if not split.feasible:
        pytest.fail(f"pushing the last ship 24 h later should stay feasible: {split.broken}")
    ship = ships[last["ship"]]
    assert [s.ship for s in split.ships] == [last["ship"]]
    only = split.ships[0]
    assert only.hours_late >= only.optimum_hours_late + 1
    assert only.difference == split.gap > 0 and only.share(split.gap) == 1.0
    assert only.difference == ship["sections"] * ship.get("weight", 1) * (only.hours_late - only.optimum_hours_late)


def test_a_task_without_its_reference_is_refused_with_a_reason():
    task = {k: v for k, v in load_pack().get(TASK_ID).items() if k != "reference"}
    with pytest.raises(ValueError, match="no reference optimum"):
        split_gap(task, [])
