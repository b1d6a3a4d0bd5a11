"""Hostile plans (PORTSIM_SPEC §8.1 and more): never a crash, never a pass, always a clear message.

Each case says how it must fail: a fatal PlanError category, an entry problem from the parser, or a checker
problem. Every case runs on a real eval task and on the toy task.
"""

from __future__ import annotations

import functools
import json
import math
import time

import pytest

from berth_env import PlanError, check, evaluate, grade, load_pack, parse_plan
from berth_env.pack import BUNDLED_PACK
from testkit.grid_checker import TOY_PLAN_A, as_list, toy_task


def first_changed(**fields):
    return lambda ref: [ref[0] | fields, *ref[1:]]


def appended(entry):
    return lambda ref: [*ref, entry]


def const(value):
    return lambda ref: value


# name -> (plan built from the reference list, kind of failure, category)
CASES = {
    "null": (const(None), "fatal", "WRONG_SHAPE"),
    "42": (const(42), "fatal", "WRONG_SHAPE"),
    "true": (const(True), "fatal", "WRONG_SHAPE"),
    "empty string": (const(""), "fatal", "INVALID_JSON"),
    "not json": (const("not json"), "fatal", "INVALID_JSON"),
    "prose": (const("I am sorry, I cannot produce a plan for this quay."), "fatal", "INVALID_JSON"),
    "text []": (const("[]"), "checker", "MISSING"),
    "text {}": (const("{}"), "checker", "MISSING"),
    "empty list": (const([]), "checker", "MISSING"),
    "empty object": (const({}), "checker", "MISSING"),
    "[null]": (const([None]), "fatal", "ENTRY_NOT_OBJECT"),
    "[[1,2,3]]": (const([[1, 2, 3]]), "fatal", "ENTRY_NOT_OBJECT"),
    "[ x 5000": (const("[" * 5000), "fatal", "INVALID_JSON"),
    "nested 5000 deep, balanced": (const("[" * 5000 + "]" * 5000), "fatal", "INVALID_JSON"),
    "plan wrapper 5000 deep": (const('{"plan": ' * 5000 + "[]" + "}" * 5000), "fatal", "INVALID_JSON"),
    "10 MB string": (const("x" * 10_000_000), "fatal", "INVALID_JSON"),
    "10 MB open fence": (const("```json" + " " * 10_000_000 + "["), "fatal", "INVALID_JSON"),
    "python object": (const(object()), "fatal", "WRONG_SHAPE"),
    "berth_hour true": (first_changed(berth_hour=True), "entry", "NOT_WHOLE"),
    "section false": (first_changed(section=False), "entry", "NOT_WHOLE"),
    "berth_hour 1e300": (first_changed(berth_hour=1e300), "entry", "OUT_OF_RANGE"),
    "berth_hour NaN": (first_changed(berth_hour=math.nan), "entry", "NOT_WHOLE"),
    "berth_hour NaN as text": (
        lambda ref: json.dumps(ref).replace('"berth_hour": ', '"berth_hour": NaN, "x": ', 1),
        "entry",
        "NOT_WHOLE",
    ),
    "berth_hour 12.5 string": (first_changed(berth_hour="12.5"), "entry", "NOT_WHOLE"),
    "berth_hour object": (first_changed(berth_hour=object()), "entry", "NOT_WHOLE"),
    "berth_hour -10**12": (first_changed(berth_hour=-(10**12)), "entry", "OUT_OF_RANGE"),
    "berth_hour 10**5000": (first_changed(berth_hour=10**5000), "entry", "OUT_OF_RANGE"),
    "berth_hour 10**400 in text": (
        lambda ref: json.dumps(first_changed(berth_hour=0)(ref)).replace(
            '"berth_hour": 0', '"berth_hour": 1' + "0" * 400, 1
        ),
        "entry",
        "OUT_OF_RANGE",
    ),
    "cranes 0": (first_changed(cranes=0), "checker", "CRANE_RANGE"),
    "cranes -3": (first_changed(cranes=-3), "checker", "CRANE_RANGE"),
    "cranes 10**9": (first_changed(cranes=10**9), "entry", "BAD_CRANES"),
    "cranes true": (first_changed(cranes=True), "entry", "BAD_CRANES"),
    "negative section": (first_changed(section=-5), "checker", "QUAY"),
    "before arrival": (lambda ref: [ref[0] | {"berth_hour": -1}, *ref[1:]], "checker", "ARRIVAL"),
    "duplicate of first": (lambda ref: [*ref, ref[0]], "entry", "DUPLICATE"),
    "minus last": (lambda ref: ref[:-1], "checker", "MISSING"),
    "plus ship 10**6": (appended({"ship": 10**6, "berth_hour": 1, "section": 2}), "entry", "UNKNOWN_SHIP"),
    "ship everything": (
        appended({"ship": "everything", "berth_hour": 1, "section": 2}),
        "entry",
        "UNKNOWN_SHIP",
    ),
    "ship true": (appended({"ship": True, "berth_hour": 1, "section": 2}), "entry", "UNKNOWN_SHIP"),
    "ship --3": (appended({"ship": "--3", "berth_hour": 1, "section": 2}), "entry", "UNKNOWN_SHIP"),
    "ship superscript": (
        appended({"ship": "\u00b2", "berth_hour": 1, "section": 2}),
        "entry",
        "UNKNOWN_SHIP",
    ),
    "tuple key": (lambda ref: {(0, 1): [1, 2], **{str(e["ship"]): e for e in ref}}, "entry", "UNKNOWN_SHIP"),
    "reference x 50": (lambda ref: ref * 50, "fatal", "TOO_MANY_ENTRIES"),
    "plan with a note": (lambda ref: json.dumps({"plan": ref, "note": "trust me"}), "entry", "UNKNOWN_SHIP"),
    "everyone at once": (
        lambda ref: [e | {"berth_hour": 0, "section": 2} for e in ref],
        "checker",
        "SHIP_OVERLAP",
    ),
}


@functools.cache
def bundled_pack():
    return load_pack([BUNDLED_PACK])


def eval_task():
    return bundled_pack().get("dock-24B-w06x1-busy-0")


TASKS = {"eval": eval_task, "toy": toy_task}


def reference_of(task):
    plan = task["reference"]["optimal_plan"]
    return [dict(entry) for entry in plan] if plan else as_list(TOY_PLAN_A)


def assert_clear(texts):
    assert texts and all(isinstance(t, str) and 0 < len(t) < 400 for t in texts)


@pytest.mark.parametrize("task_name", sorted(TASKS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_plan_never_crashes_and_never_passes(task_name, case):
    task = TASKS[task_name]()
    build, kind, category = CASES[case]
    plan = build(reference_of(task))

    started = time.perf_counter()
    graded = grade(task, plan)
    assert time.perf_counter() - started < 3.0
    assert graded["feasible"] is False and graded["cost"] is None
    assert graded["reward"] < 0.2 and graded["quality"] == 0.0

    if kind == "fatal":
        with pytest.raises(PlanError) as caught:
            evaluate(task, plan)
        assert caught.value.category == category
        assert graded["parse_problems"] == [caught.value.message] and graded["reward"] == 0.0
        assert_clear(graded["parse_problems"])
        return

    parsed = parse_plan(task, plan)
    reply = evaluate(task, plan)
    assert reply["feasible"] is False
    if kind == "entry":
        assert category in [c for c, _ in parsed.issues]
        assert reply["entry_problems"] == parsed.problems == graded["parse_problems"]
        assert_clear(reply["entry_problems"])
    else:
        result = check(task, parsed.entries)
        found = {c for r in result.ships.values() for c, _ in r.problems} | (
            {"MISSING"} if result.missing else set()
        )
        assert category in found
        assert_clear([v["problem"] for v in graded["violations"]])
        assert reply["violations"] == graded["violations"]


def test_duplicate_scores_the_entry_problem_fraction():
    task = eval_task()
    ref = reference_of(task)
    n = len(task["ships"])
    assert grade(task, [*ref, ref[0]])["reward"] == round(0.2 * (n / (n + 1)), 6)


def test_plan_with_a_note_is_read_as_a_mapping():
    task = eval_task()
    graded = grade(task, json.dumps({"plan": reference_of(task), "note": "trust me"}))
    assert graded["reward"] == 0.0 and len(graded["parse_problems"]) == 2
    assert all("unknown ship" in text for text in graded["parse_problems"])


def test_check_plan_reply_keeps_totals_when_only_entries_are_bad():
    task = eval_task()
    ref = reference_of(task)
    reply = evaluate(task, [*ref, {"ship": "everything", "berth_hour": 1, "section": 2}])
    assert reply["feasible"] is False and reply["cost"] == task["reference"]["optimal_cost"]
    assert list(reply)[-1] == "entry_problems"
    assert grade(task, [*ref, {"ship": "everything"}])["cost"] is None
