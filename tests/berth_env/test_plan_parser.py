"""The plan parser (PORTSIM_SPEC §2): the decision procedure, per-entry rules, and the toy-task vectors of §8.6."""

from __future__ import annotations

import json
import math
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from berth_env import ParsedPlan, PlanError, canonical_plan, grade, parse_plan
from berth_env.plan import fenced_content
from testkit.grid_checker import TOY_PLAN_A, as_list, plain_version, toy_task

TOY_LIST = as_list(TOY_PLAN_A)


def parse(raw, task=None):
    return parse_plan(task or toy_task(), raw)


def categories(parsed: ParsedPlan) -> list[str]:
    return [category for category, _ in parsed.issues]


def fatal(raw, task=None) -> PlanError:
    with pytest.raises(PlanError) as caught:
        parse(raw, task)
    assert caught.value.message and str(caught.value) == caught.value.message
    return caught.value


def one_entry(**fields):
    """The toy plan A with ship 0's entry replaced by `fields` (ship 0 unless given)."""
    entry = {"ship": 0, "berth_hour": 5, "section": 1, "cranes": 2}
    entry.update(fields)
    return [{k: v for k, v in entry.items() if v is not ...}, *TOY_LIST[1:]]


# --- equivalent forms (§8.1) -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        TOY_LIST,
        json.dumps(TOY_LIST),
        {str(k): list(v) for k, v in TOY_PLAN_A.items()},
        f"```json\n{json.dumps({'plan': TOY_LIST})}\n```",
        f"Here is my plan:\n```\n{json.dumps(TOY_LIST)}\n```\nThanks!",
        f"  ```json   {json.dumps(TOY_LIST)}```  ",
        {"plan": TOY_LIST},
        json.dumps(
            {str(k): {"berth_hour": h, "section": s, "cranes": c} for k, (h, s, c) in TOY_PLAN_A.items()}
        ),
        [
            {"id": e["ship"], "hour": e["berth_hour"], "section": e["section"], "cranes": e["cranes"]}
            for e in TOY_LIST
        ],
        tuple(TOY_LIST),
    ],
)
def test_equivalent_inputs_give_the_same_plan(raw):
    parsed = parse(raw)
    assert parsed.entries == TOY_PLAN_A and parsed.issues == [] and parsed.problems == []


def test_canonical_form_round_trips():
    parsed = parse(TOY_LIST)
    assert canonical_plan(parsed) == TOY_LIST == canonical_plan(parsed.entries)
    assert parse(canonical_plan(parsed)).entries == parsed.entries
    plain = plain_version(toy_task())
    plain_parsed = parse(TOY_LIST, plain)
    listed = canonical_plan(plain_parsed)
    assert (
        all("cranes" not in item for item in listed) and parse(listed, plain).entries == plain_parsed.entries
    )


# --- step 1: text ------------------------------------------------------------------------------------------------


def test_not_json_is_invalid_json_with_position():
    err = fatal("not json")
    assert err.category == "INVALID_JSON" and "char 0" in err.message and "Expecting value" in err.message
    err = fatal('[{"ship": 0,]')
    assert err.category == "INVALID_JSON" and "char 12" in err.message


def test_first_fence_wins_and_unclosed_fence_is_ignored():
    plan = json.dumps(TOY_LIST)
    assert parse(f"```json\n{plan}\n```\nor maybe\n```json\n[]\n```").entries == TOY_PLAN_A
    assert fatal(f"```json\n{plan}").category == "INVALID_JSON"  # no closing fence: the whole text is parsed
    assert fatal(f"```JSON\n{plan}\n```").category == "INVALID_JSON"  # only lowercase `json` is skipped


FENCE_REGEX = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="`json \n\t[]{}a\u00a0", max_size=40))
def test_fence_extraction_equals_the_spec_regex(text):
    match = FENCE_REGEX.search(text)
    assert fenced_content(text) == (match.group(1) if match else text)


def test_nan_infinity_and_big_integers_follow_python_json():
    parsed = parse(
        '[{"ship": 0, "berth_hour": NaN, "section": 1}, {"ship": 1, "berth_hour": Infinity, "section": 5}]'
    )
    assert categories(parsed) == ["NOT_WHOLE", "NOT_WHOLE"]
    parsed = parse('[{"ship": 0, "berth_hour": 1' + "0" * 400 + ', "section": 1}]')
    assert categories(parsed) == ["OUT_OF_RANGE"]  # exact, so out of range rather than not whole


def test_repeated_json_keys_keep_the_last_value():
    parsed = parse('{"0": [1, 1], "0": [5, 1, 2]}')
    assert parsed.entries == {0: (5, 1, 2)} and parsed.issues == []


def test_json_string_holding_json_is_not_decoded_twice():
    assert fatal(json.dumps(json.dumps(TOY_LIST))).category == "WRONG_SHAPE"


@pytest.mark.parametrize("text", ["[" * 5000, '{"a":' * 5000, "[" * 5000 + "]" * 5000])
def test_deep_nesting_is_invalid_json_not_a_crash(text):
    err = fatal(text)
    assert err.category == "INVALID_JSON" and "nested" in err.message


def test_integer_literal_past_pythons_digit_limit_is_invalid_json():
    assert fatal('[{"ship": 0, "berth_hour": 1' + "0" * 5000 + ', "section": 1}]').category == "INVALID_JSON"


@pytest.mark.parametrize(
    "text",
    [
        "```" + " " * 10_000_000 + "[",  # the lazy-regex worst case: an open fence, whitespace, no close
        "`" * 10_000_000,
        "```json" + "\n" * 5_000_000 + "x" * 5_000_000,
        "a`b``c```" * 1_100_000,
        "[" * 10_000_000,
    ],
)
def test_ten_megabyte_strings_are_refused_quickly(text):
    start = time.perf_counter()
    err = fatal(text)
    assert time.perf_counter() - start < 3.0
    assert err.category == "INVALID_JSON" and len(err.message) < 300


# --- steps 2-6: shapes ------------------------------------------------------------------------------------------


def test_plan_wrapper_is_unwrapped_once_and_only_alone():
    assert parse({"plan": TOY_LIST}).entries == TOY_PLAN_A
    assert fatal({"plan": json.dumps(TOY_LIST)}).category == "WRONG_SHAPE"  # a string inside is not re-read
    parsed = parse({"plan": {"plan": TOY_LIST}})
    assert categories(parsed) == ["UNKNOWN_SHIP"] and "'plan'" in parsed.problems[0]
    parsed = parse(json.dumps({"plan": TOY_LIST, "note": "my best"}))
    assert categories(parsed) == ["UNKNOWN_SHIP", "UNKNOWN_SHIP"] and parsed.entries == {}
    assert "'plan'" in parsed.problems[0] and "'note'" in parsed.problems[1]


def test_mapping_values():
    parsed = parse(
        {
            "0": {"hour": 5, "section": 1},  # `hour` stands in for a missing berth_hour
            "1": {"berth_hour": None, "hour": 2, "section": 5},  # present-but-null berth_hour wins: not whole
            "2": [26, 1],
            "3": [10, 4, 2],
            "4": [12, 8, 1, 0],  # four items: not a plan entry
            "5": 28,
        }
    )
    assert parsed.entries == {0: (5, 1, 2), 2: (26, 1, 1), 3: (10, 4, 2)}
    assert categories(parsed) == ["NOT_WHOLE", "NOT_WHOLE", "NOT_WHOLE"]


def test_list_entries_must_be_objects():
    err = fatal([TOY_LIST[0], [5, 1, 2], None])
    assert err.category == "ENTRY_NOT_OBJECT" and "entry 2" in err.message and "a list" in err.message
    assert fatal([[5, 1, 2]]).category == "ENTRY_NOT_OBJECT"
    assert fatal([None]).category == "ENTRY_NOT_OBJECT"


def test_list_ship_reference_precedence_and_extra_keys():
    parsed = parse([{"ship": None, "id": 0, "berth_hour": 5, "section": 1}])  # `ship` present (null) wins
    assert categories(parsed) == ["UNKNOWN_SHIP"]
    parsed = parse([{"id": 0, "name": "BRAVO", "berth_hour": 5, "section": 1, "why": "x"}])
    assert parsed.entries == {0: (5, 1, 2)}
    parsed = parse([{"name": "bravo", "berth_hour": 2, "section": 5}])
    assert parsed.entries == {1: (2, 5, 3)}
    parsed = parse([{"berth_hour": 2, "section": 5}])
    assert categories(parsed) == ["UNKNOWN_SHIP"] and "no ship given" in parsed.problems[0]


@pytest.mark.parametrize("raw", [None, 42, 4.5, True, json.dumps("text"), "42", "null", {1, 2}, b"[]"])
def test_other_types_are_the_wrong_shape(raw):
    err = fatal(raw)
    assert err.category == "WRONG_SHAPE" and "list of entries" in err.message


def test_entry_count_guard():
    n = len(toy_task()["ships"])
    assert n == 6
    entries = [dict(TOY_LIST[0]) for _ in range(4 * n + 10)]  # 34: read, then duplicates
    assert categories(parse(entries)).count("DUPLICATE") == 33
    err = fatal([*entries, TOY_LIST[0]])
    assert err.category == "TOO_MANY_ENTRIES" and "35" in err.message and "6 ships" in err.message
    assert fatal({str(i): [0, 1] for i in range(35)}).category == "TOO_MANY_ENTRIES"


# --- step 7: entries ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "ship"),
    [
        (0, 0),
        ("0", 0),
        (" 3 ", 3),
        ("-0", 0),  # leading minus signs pass the digit test; int("-0") is ship 0
        ("alfa", 0),
        ("DELTA ", 3),
        ("  Echo", 4),
        ("\u0663", 3),  # an Arabic-Indic 3 is a digit Python's int() reads: ship 3, as upstream
    ],
)
def test_ship_references_that_resolve(ref, ship):
    parsed = parse([{"ship": ref, "berth_hour": 30, "section": 1, "cranes": 1}])
    assert list(parsed.entries) == [ship] and parsed.issues == []


@pytest.mark.parametrize(
    ("ref", "shown"),
    [
        (6, "6"),
        (-1, "-1"),
        (999, "999"),
        (10**6, "1000000"),
        ("-3", "'-3'"),
        ("--3", "'--3'"),  # passes the digit test, fails int(): unknown, not a crash
        ("\u00b2", "'\u00b2'"),  # superscript two: isdigit() but not a decimal digit
        ("+3", "'+3'"),
        ("everything", "'everything'"),
        (3.0, "3.0"),
        (True, "True"),
        (None, "None"),
        ([0], "[0]"),
        ({"id": 0}, "{'id': 0}"),
        ("", "''"),
    ],
)
def test_unknown_ships(ref, shown):
    parsed = parse([{"ship": ref, "berth_hour": 30, "section": 1}])
    assert categories(parsed) == ["UNKNOWN_SHIP"] and parsed.entries == {}
    assert "unknown ship" in parsed.problems[0] and shown in parsed.problems[0]


def test_a_name_several_ships_share_resolves_to_nobody():
    task = toy_task()
    task["ships"][4]["name"] = "ALFA"
    parsed = parse([{"ship": "Alfa", "berth_hour": 5, "section": 1}], task)
    assert categories(parsed) == ["UNKNOWN_SHIP"]


def test_unknown_ship_messages_stay_short_for_huge_keys():
    parsed = parse(
        [{"ship": "x" * 1_000_000, "berth_hour": 5, "section": 1}, {"ship": 10**5000, "section": 1}]
    )
    assert categories(parsed) == ["UNKNOWN_SHIP", "UNKNOWN_SHIP"]
    assert all(len(text) < 200 for text in parsed.problems)
    assert "digits" in parsed.problems[1]


def test_duplicates_count_against_accepted_entries_only():
    parsed = parse([*TOY_LIST, TOY_LIST[0] | {"berth_hour": 30}])
    assert categories(parsed) == ["DUPLICATE"] and parsed.entries[0] == (5, 1, 2)
    assert "ship 0" in parsed.problems[0]
    parsed = parse([TOY_LIST[0] | {"berth_hour": 5.5}, *TOY_LIST])
    assert categories(parsed) == ["NOT_WHOLE"] and parsed.entries == TOY_PLAN_A


def test_duplicate_grades_infeasible_with_one_extra_unit_in_the_denominator():
    graded = grade(toy_task(), [*TOY_LIST, TOY_LIST[0]])
    assert graded["feasible"] is False and graded["reward"] == 0.171429 and graded["cost"] is None
    assert graded["violations"] == [] and len(graded["parse_problems"]) == 1
    assert graded["clean_fraction"] == round(6 / 7, 4)


def test_accepted_value_coercions():
    parsed = parse(one_entry(berth_hour="5", section=1.0, cranes="2"))
    assert parsed.entries[0] == (5, 1, 2) and parsed.issues == []
    parsed = parse(one_entry(berth_hour=" +5 ", section="1", cranes=2.0))
    assert parsed.entries[0] == (5, 1, 2)


@pytest.mark.parametrize(
    "value",
    [
        5.5,
        True,
        False,
        None,
        ...,
        math.nan,
        math.inf,
        -math.inf,
        "12.5",
        "36.0",
        "5e0",
        "",
        "five",
        [5],
        {"h": 5},
    ],
)
def test_hours_that_are_not_whole(value):
    parsed = parse(one_entry(berth_hour=value))
    assert categories(parsed) == ["NOT_WHOLE"] and 0 not in parsed.entries
    assert "whole numbers" in parsed.problems[0]


def test_numeric_string_must_equal_its_float_reading():
    # §2.2 c: an int literal that a float cannot hold exactly is refused (then it would be out of range anyway).
    assert categories(parse(one_entry(berth_hour="9007199254740993"))) == ["NOT_WHOLE"]


def test_sections_that_are_not_whole():
    assert categories(parse(one_entry(section=False))) == ["NOT_WHOLE"]
    assert categories(parse(one_entry(section="1.5"))) == ["NOT_WHOLE"]


@pytest.mark.parametrize(
    ("hour", "section", "ok"),
    [
        (16800, 1, True),
        (-16800, 1, True),
        (16801, 1, False),
        (20000, 1, False),
        (1e300, 1, False),
        (-(10**12), 1, False),
        (10**30, 1, False),
        (5, 1000, True),
        (5, -1000, True),
        (5, 1001, False),
        (5, -1001, False),
    ],
)
def test_range_limits(hour, section, ok):
    parsed = parse(one_entry(berth_hour=hour, section=section))
    if ok:
        assert parsed.entries[0][:2] == (hour, section)
    else:
        assert categories(parsed) == ["OUT_OF_RANGE"] and "16800" in parsed.problems[0]


@pytest.mark.parametrize(
    ("cranes", "stored"), [(..., 2), (None, 2), ("3", 3), (3.0, 3), (0, 0), (-3, -3), (1000, 1000)]
)
def test_crane_values_the_parser_accepts(cranes, stored):
    parsed = parse(one_entry(cranes=cranes))
    assert parsed.entries[0] == (5, 1, stored) and parsed.issues == []


@pytest.mark.parametrize("cranes", [2.5, True, False, "x", "2.0", 5000, 10**9, 1001, -1001, math.nan, [2]])
def test_bad_cranes(cranes):
    parsed = parse(one_entry(cranes=cranes))
    assert categories(parsed) == ["BAD_CRANES"] and 0 not in parsed.entries


def test_zero_cranes_pass_the_parser_and_fail_the_checker():
    graded = grade(toy_task(), one_entry(cranes=0))
    assert graded["parse_problems"] == [] and graded["feasible"] is False
    assert any(v["ship"] == 0 and "cranes" in v["problem"] for v in graded["violations"])


def test_first_failing_step_is_the_only_problem():
    assert categories(parse([{"ship": 99, "berth_hour": "x", "section": 1, "cranes": "y"}])) == [
        "UNKNOWN_SHIP"
    ]
    assert categories(parse([*TOY_LIST, {"ship": 0, "berth_hour": "x"}])) == ["DUPLICATE"]
    assert categories(parse(one_entry(berth_hour="x", cranes="y"))) == ["NOT_WHOLE"]
    assert categories(parse(one_entry(berth_hour=10**6, cranes="y"))) == ["OUT_OF_RANGE"]


def test_plain_tasks_ignore_cranes_entirely():
    plain = plain_version(toy_task())
    parsed = parse(one_entry(cranes="garbage"), plain)
    assert parsed.issues == [] and parsed.entries[0] == (5, 1, None)


def test_problems_name_the_entry_position():
    parsed = parse([*TOY_LIST[:2], {"ship": 2, "berth_hour": "late", "section": 1}])
    assert parsed.problems[0].startswith("entry 3 (ship 2)") and "'late'" in parsed.problems[0]


# --- §8.6 fatal vectors, graded ----------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["[", "hello", 42, [[5, 1, 2]], [dict(TOY_LIST[0]) for _ in range(35)]])
def test_fatal_inputs_grade_zero(raw):
    graded = grade(toy_task(), raw)
    assert graded["reward"] == 0.0 and graded["feasible"] is False and len(graded["parse_problems"]) == 1
    assert len(graded["violations"]) == 6  # every ship missing


def test_empty_list_is_six_missing_ships():
    graded = grade(toy_task(), [])
    assert graded["reward"] == 0.0 and graded["parse_problems"] == []
    assert [v["ship"] for v in graded["violations"]] == list(range(6))
