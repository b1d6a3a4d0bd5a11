"""The feasibility checker and the cost (PORTSIM_SPEC §3, §4), on the spec's toy task (§8.6) and small variants."""

from __future__ import annotations

import pytest

from berth_env import check, grade, parse_plan, unavoidable_cost
from testkit.grid_checker import TOY_PLAN_A, as_list, grid_check, plain_version, problem_categories, toy_task


def with_changes(changes: dict[int, tuple[int, int, int]]) -> dict[int, tuple[int, int, int]]:
    entries = dict(TOY_PLAN_A)
    entries.update(changes)
    return entries


def texts(result, ship: int) -> list[str]:
    return [text for _, text in result.ships[ship].problems]


# --- the toy base plan A ----------------------------------------------------------------------------------------


def test_toy_floor_is_foxtrots_wind_wait():
    assert unavoidable_cost(toy_task()) == 27


def test_toy_plan_a_per_ship_timeline_and_cost():
    result = check(toy_task(), TOY_PLAN_A)
    assert result.feasible
    assert (result.cost, result.delay_cost, result.moves) == (87, 87, 0)
    summary = {i: (r.departure, r.delay_h, r.moved, r.cost) for i, r in result.ships.items()}
    assert summary == {
        0: (9, 0, False, 0),
        1: (6, 0, False, 0),
        2: (29, 0, False, 0),
        3: (15, 0, False, 60),  # berths 10, two hours past its deadline 8: 2 x 30
        4: (16, 0, False, 0),
        5: (40, 9, False, 27),  # finishes 31 inside its 30-40 wind window, leaves 40
    }
    foxtrot = result.ships[5]
    assert (foxtrot.finish, foxtrot.hours_alongside, foxtrot.last_section, foxtrot.cranes) == (31, 12, 7, 3)
    assert result.violations == [] and result.missing == []


def test_toy_plan_a_grade():
    graded = grade(toy_task(), as_list(TOY_PLAN_A))
    assert graded == {
        "reward": 0.440955,
        "feasible": True,
        "clean_fraction": 1.0,
        "quality": 0.301194,
        "cost": 87,
        "delay_cost": 87,
        "moves": 0,
        "naive_cost": 300,
        "optimal_cost": 27,
        "violations": [],
        "parse_problems": [],
    }
    assert list(graded) == [
        "reward", "feasible", "clean_fraction", "quality", "cost", "delay_cost", "moves",
        "naive_cost", "optimal_cost", "violations", "parse_problems",
    ]  # fmt: skip


# --- every variant row of §8.6 --------------------------------------------------------------------------------

FEASIBLE_VARIANTS = [
    ({3: (6, 4, 2)}, 27, 0, 1.0),
    ({0: (5, 2, 2)}, 92, 1, 0.418025),
    ({2: (29, 1, 2)}, 91, 0, 0.42243),
]


@pytest.mark.parametrize(("change", "cost", "moves", "reward"), FEASIBLE_VARIANTS)
def test_toy_feasible_variants(change, cost, moves, reward):
    task = toy_task()
    entries = with_changes(change)
    result = check(task, entries)
    assert (result.feasible, result.cost, result.moves) == (True, cost, moves)
    assert result.delay_cost == cost - 5 * moves
    assert grade(task, as_list(entries))["reward"] == reward
    assert grid_check(task, entries) == (True, cost, set())


INFEASIBLE_VARIANTS = [
    ({4: (9, 8, 1)}, {4: ["ARRIVAL"]}, 0.166667),
    ({2: (26, 0, 2)}, {2: ["QUAY"]}, 0.166667),
    ({0: (4, 1, 2)}, {0: ["BLOCK", "CRANE_POOL"], 1: ["CRANE_POOL"]}, 0.133333),
    ({2: (26, 8, 2)}, {2: ["BLOCK"]}, 0.166667),
    ({4: (12, 5, 1)}, {3: ["SHIP_OVERLAP"], 4: ["SHIP_OVERLAP"]}, 0.133333),
    ({1: (2, 5, 5)}, {0: ["CRANE_POOL"], 1: ["CRANE_RANGE", "CRANE_POOL"]}, 0.133333),
    ({1: (2, 5, 4)}, {0: ["MOVE_LIMIT"], 1: ["MOVE_LIMIT"]}, 0.133333),
    ({2: (33, 1, 2)}, {2: ["WIND_BERTH"]}, 0.166667),
    ({5: (30, 5, 3)}, {5: ["WIND_BERTH"]}, 0.166667),
    ({5: (26, 5, 3)}, {5: ["ARRIVAL"]}, 0.166667),
]


@pytest.mark.parametrize(("change", "expected", "reward"), INFEASIBLE_VARIANTS)
def test_toy_infeasible_variants(change, expected, reward):
    task = toy_task()
    entries = with_changes(change)
    result = check(task, entries)
    assert not result.feasible
    assert (result.cost, result.delay_cost, result.moves) == (None, None, None)
    assert problem_categories(result) == expected
    graded = grade(task, as_list(entries))
    assert graded["reward"] == reward and graded["feasible"] is False and graded["cost"] is None
    assert graded["violations"] == result.violations
    assert grid_check(task, entries) == (False, None, set(expected))


def test_toy_dropped_ship_is_missing():
    task = toy_task()
    entries = {k: v for k, v in TOY_PLAN_A.items() if k != 4}
    result = check(task, entries)
    assert result.missing == [4] and 4 not in result.ships
    assert result.violations == [{"ship": 4, "problem": result.violations[0]["problem"]}]
    assert "missing from the plan" in result.violations[0]["problem"]
    assert "ECHO" in result.violations[0]["problem"]
    assert grade(task, as_list(entries))["reward"] == 0.166667


# --- messages carry the spec's phrases and data items ---------------------------------------------------------


def test_arrival_message():
    (text,) = texts(check(toy_task(), with_changes({4: (9, 8, 1)})), 4)
    assert "cannot arrive" in text and "9" in text and "10" in text


def test_quay_message_names_span_and_quay():
    (text,) = texts(check(toy_task(), with_changes({2: (26, 0, 2)})), 2)
    assert "0-1" in text and "1-10" in text


def test_block_messages_name_the_ship_or_closure_and_full_hours():
    result = check(toy_task(), with_changes({0: (4, 1, 2)}))
    assert "OLD SHIP" in texts(result, 0)[0] and "1-3" in texts(result, 0)[0] and "0-5" in texts(result, 0)[0]
    (closed,) = texts(check(toy_task(), with_changes({2: (26, 8, 2)})), 2)
    assert "closed" in closed and "8-10" in closed and "20-30" in closed


def test_overlap_message_on_both_ships_names_the_other():
    result = check(toy_task(), with_changes({4: (12, 5, 1)}))
    (on_delta,), (on_echo,) = texts(result, 3), texts(result, 4)
    assert "overlaps ship 4" in on_delta and "ECHO" in on_delta
    assert "overlaps ship 3" in on_echo and "DELTA" in on_echo
    for text in (on_delta, on_echo):
        assert "5-6" in text and "12-15" in text  # common sections, max(start)-min(end)
    assert result.ships[4].moved and result.ships[4].cost == 5  # moved is reported on infeasible plans too


def test_crane_pool_message_gives_hours_and_worst_hour():
    result = check(toy_task(), with_changes({0: (4, 1, 2)}))
    text = texts(result, 1)[0]
    assert "4-5" in text and "worst hour 4" in text and "7 cranes in use" in text and "6 available" in text


def test_crane_range_uses_std_for_the_stay_but_counts_given_cranes():
    result = check(toy_task(), with_changes({1: (2, 5, 5)}))
    bravo = result.ships[1]
    assert bravo.cranes == 5 and bravo.finish == 6  # 12 crane-hours at std 3 -> 4 h
    assert "5" in texts(result, 1)[0] and "2-4" in texts(result, 1)[0]
    assert "7 cranes in use" in texts(result, 1)[1]  # OLD SHIP 2 + the 5 given


def test_move_limit_kinds():
    result = check(toy_task(), with_changes({1: (2, 5, 4)}))
    (alfa,), (bravo,) = texts(result, 0), texts(result, 1)
    assert alfa.startswith("berths at hour 5") and bravo.startswith("leaves at hour 5")
    assert "3" in alfa and "2" in alfa


def test_wind_berth_message():
    (text,) = texts(check(toy_task(), with_changes({2: (33, 1, 2)})), 2)
    assert "33" in text and "32-36" in text


# --- rule details --------------------------------------------------------------------------------------------


def test_problem_order_within_a_ship():
    task = toy_task()
    # FOXTROT at 20 on 9: too many cranes, too early, off the quay's end and into the closure.
    result = check(task, with_changes({5: (20, 9, 5)}))
    assert [c for c, _ in result.ships[5].problems][:4] == ["CRANE_RANGE", "ARRIVAL", "QUAY", "BLOCK"]
    result = check(task, with_changes({5: (31, 0, 1)}))
    assert [c for c, _ in result.ships[5].problems][:3] == ["WIND_BERTH", "CRANE_RANGE", "QUAY"]


def test_one_block_problem_per_block_in_task_order():
    task = toy_task()
    task["blocks"].append(
        {"first": 2, "last": 2, "start": 6, "end": 8, "kind": "closed", "label": "survey", "cranes": 0}
    )
    result = check(task, {0: (4, 1, 1)})  # 8 h on sections 1-3 from hour 4
    blocks = [text for category, text in result.ships[0].problems if category == "BLOCK"]
    assert len(blocks) == 2 and "OLD SHIP" in blocks[0] and "survey" in blocks[1]


def test_ships_with_problems_still_take_part():
    result = check(toy_task(), with_changes({4: (9, 5, 1)}))  # ECHO too early, on DELTA's sections
    assert problem_categories(result) == {3: ["SHIP_OVERLAP"], 4: ["ARRIVAL", "SHIP_OVERLAP"]}


def test_waiting_ship_keeps_sections_but_frees_cranes():
    task = toy_task()
    task["rules"]["crane_pool"] = 4
    # CHARLIE berths at 36 with 2 cranes while FOXTROT (3 cranes) waits out the wind until 40: the pool of 4
    # holds because FOXTROT's cranes went at 31.
    result = check(task, {2: (36, 1, 2), 5: (28, 5, 3)})
    assert not result.ships[2].problems and not result.ships[5].problems
    # On FOXTROT's sections the wait still counts.
    result = check(task, {2: (36, 5, 1), 5: (28, 5, 3)})
    assert problem_categories(result)[2] == ["SHIP_OVERLAP"] and "36-40" in texts(result, 2)[0]


def test_wind_delayed_departure_counts_at_the_window_end():
    task = toy_task()
    task["rules"]["max_moves_per_hour"] = 1
    result = check(task, {2: (40, 1, 2), 5: (28, 5, 3)})  # FOXTROT leaves at 40 as CHARLIE berths
    assert texts(result, 5) == ["leaves at hour 40, when 2 ships move (at most 1 per hour)"]
    assert texts(result, 2)[0].startswith("berths at hour 40")


def test_fixed_departures_alone_are_never_examined():
    task = toy_task()
    task["rules"]["max_moves_per_hour"] = 1
    task["blocks"].append(
        {"first": 9, "last": 10, "start": 0, "end": 5, "kind": "alongside", "label": "B", "cranes": 0}
    )
    # Two already-alongside ships leave at 5 (over the cap of 1) but no planned ship moves then.
    result = check(task, {2: (26, 1, 2)})
    assert not result.ships[2].problems


def test_hours_where_only_fixed_loads_exceed_the_pool_flag_nobody():
    task = toy_task()
    task["rules"]["crane_outages"].append({"start": 0, "end": 3, "cranes": 6})  # pool 0 under OLD SHIP's 2
    assert not check(task, {2: (26, 1, 2)}).ships[2].problems
    assert check(task, {0: (2, 4, 1)}).ships[0].problems[0][0] == "CRANE_POOL"  # working through hour 2


def test_crane_pool_flags_a_ship_whatever_its_own_share():
    task = toy_task()
    result = check(
        task, with_changes({0: (4, 1, 0), 1: (2, 5, 5)})
    )  # ALFA's 0 cranes (invalid) still works 4-8
    assert "CRANE_POOL" in problem_categories(result)[0]


def test_crane_pool_lists_at_most_four_runs_and_the_earliest_worst_hour():
    task = toy_task()
    task["rules"]["crane_outages"] = [{"start": h, "end": h + 1, "cranes": 6} for h in (11, 13, 15, 17, 19)]
    result = check(task, {3: (10, 4, 1)})  # DELTA alone, 1 crane over 10-20; pool 0 at five separate hours
    (text,) = texts(result, 3)
    assert "11-12, 13-14, 15-16, 17-18, ..." in text and "19-20" not in text
    assert "worst hour 11: 1 cranes in use, 0 available" in text


def test_negative_cranes_reduce_usage_as_given():
    task = toy_task()
    result = check(task, with_changes({0: (4, 4, -3), 1: (2, 8, 4)}))
    assert "CRANE_POOL" not in {c for c, _ in result.ships[1].problems}  # 2 + 4 - 3 never exceeds 6
    assert result.ships[0].finish == 8  # stay at std 2: 8 crane-hours -> 4 h


def test_costs_deadline_uses_berth_hour_weight_only_lateness():
    task = toy_task()
    task["ships"][3]["weight"] = 3
    result = check(task, with_changes({3: (10, 4, 2), 4: (14, 8, 1)}))
    assert result.ships[3].cost == 60  # the deadline term is not weighted
    assert result.ships[4].cost == 2 * 2 * 3  # 2 h late x 2 sections x weight 3


def test_moved_ignores_hours_and_cranes_and_unscheduled_ships():
    result = check(toy_task(), with_changes({0: (6, 1, 3), 2: (26, 4, 2)}))
    assert not result.ships[0].moved and not result.ships[2].moved
    assert check(toy_task(), with_changes({3: (10, 5, 2)})).ships[3].moved


def test_entries_without_cranes_use_std_on_crane_tasks():
    result = check(toy_task(), {0: (5, 1, None), 1: (2, 5)})
    assert result.ships[0].cranes == 2 and result.ships[1].cranes == 3


def test_check_accepts_a_parsed_plan_and_rejects_foreign_ids():
    task = toy_task()
    parsed = parse_plan(task, as_list(TOY_PLAN_A))
    assert check(task, parsed).cost == 87
    with pytest.raises(ValueError, match="not ship ids"):
        check(task, {6: (1, 1, 1)})


def test_plain_task_ignores_cranes_wind_and_movements():
    task = plain_version(toy_task())
    parsed = parse_plan(task, as_list(with_changes({5: (30, 5, 99), 1: (2, 5, 4)})))
    assert parsed.issues == [] and parsed.entries[5] == (30, 5, None)
    result = check(task, parsed.entries)
    foxtrot = result.ships[5]
    assert (foxtrot.cranes, foxtrot.finish, foxtrot.departure) == (None, 33, 33)  # handling 3, no wind
    assert result.feasible and result.ships[1].departure == 6
    assert unavoidable_cost(task) == 0  # FOXTROT no longer waits for the wind
    assert grid_check(task, parsed.entries) == (True, result.cost, set())


def test_touching_wind_windows_merge_for_checker_and_floor():
    task = toy_task()
    task["rules"]["no_moves"].append({"start": 40, "end": 45, "min_length": 300, "reason": "swell"})
    foxtrot = check(task, TOY_PLAN_A).ships[5]
    assert (foxtrot.finish, foxtrot.departure, foxtrot.cost) == (31, 45, 14 * 3)
    assert unavoidable_cost(task) == 42
    assert (
        check(task, with_changes({5: (40, 5, 3)})).ships[5].problems[0][0] == "WIND_BERTH"
    )  # 40 is inside now


def test_floor_pushes_berths_out_of_wind_and_charges_the_deadline():
    task = toy_task()
    task["rules"]["no_moves"].append({"start": 4, "end": 10, "reason": "gale"})  # no min_length: every ship
    # DELTA arrives 5 inside 4-10, berths 10 > deadline 8 (+60); BRAVO finishes 5 with 4 cranes, waits to 10
    # (4 h late x 4 sections); FOXTROT's wind wait as before (27).
    assert unavoidable_cost(task) == 60 + 16 + 27
