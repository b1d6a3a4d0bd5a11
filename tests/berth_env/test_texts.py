"""The rules and situation texts carry every item of PORTSIM_SPEC §7.1 and §7.2, in order, for every eval task."""

from __future__ import annotations

import copy

import pytest

from berth_env import load_pack
from berth_env.texts import rules_text, situation_text

TASKS = load_pack().split("eval")
TASK_IDS = [task["task_id"] for task in TASKS]


def by_id(task_id: str) -> dict:
    return next(task for task in TASKS if task["task_id"] == task_id)


def assert_in_order(text: str, *parts: str) -> None:
    """Every part appears, each after the previous one."""
    position = -1
    for part in parts:
        found = text.find(part, position + 1)
        assert found > position, f"{part!r} missing or out of order"
        position = found


def table_rows(text: str) -> list[list[str]]:
    """The ships table under '## Ships to berth', header included, as lists of stripped cells."""
    section = text.split("## Ships to berth", 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows if not row.startswith("|---")]


# ---------------------------------------------------------------------------------------------------- §7.1


@pytest.mark.parametrize("task_id", ["dock-24B-w06x1-busy-0", "dock-36A-w05x2-storm-0"])
def test_rules_text_has_every_item_in_order(task_id: str) -> None:
    task = by_id(task_id)
    text = rules_text(task, 10)
    cap = task["rules"]["max_moves_per_hour"]
    assert_in_order(
        text,
        "berth planner", "no longer works", "every ship", "hour it berths", "first quay section", "cranes",
        "## Rules", "infeasible",
        "at or after its arrival hour",
        "minimum", "maximum number of cranes", "⌈moves / (crane_rate × cranes)⌉", "28 moves per crane-hour",
        "no-movement window", "until the window ends", "keeping its sections but freeing its cranes",
        "may not berth inside a no-movement window",
        "consecutive sections", f"{task['first_section']}–{task['last_section']}",
        "never use the same section in the same hour", "already alongside", "closed sections",
        "leaving at hour h frees its sections",
        "cranes of all ships alongside", "already alongside included", "cranes available",
        f"At most {cap} movements per hour", "berthing at hour h and a departure at hour h each count once",
        "## Cost", "delay", "sections × the hours it departs after its planned departure", "early",
        "moves: 5", "different starting section", "hour or crane count costs nothing extra",
        "unscheduled calls have no planned section",
        "Priority ships", "several times", "emergency ship", "each hour it docks after its deadline",
        "notes column",
        "## Plan format", "ids of the table", '"ship": 0', '"berth_hour"', '"section"', '"cranes"',
        "## Tools", "get_situation()", "check_plan(plan)", "violations", "cost", "10 checks",
        "submit_plan(plan)", "ends the episode", "graded once", "infeasible", "closer its cost is to the best",
        "Submit before you run out of turns", "scores 0",
    )
    assert "Cost" in text


def test_rules_text_fills_in_the_number_of_checks() -> None:
    text = rules_text(TASKS[0], 7)
    assert "You have 7 checks." in text
    assert "10 checks" not in text


def test_rules_text_without_crane_rate_uses_workload() -> None:
    task = copy.deepcopy(TASKS[0])
    del task["rules"]["crane_rate"]
    assert "⌈workload / cranes⌉" in rules_text(task, 10)


def test_plain_task_rules_text_has_no_cranes_wind_or_movements() -> None:
    task = copy.deepcopy(TASKS[0])
    task["rules"] = {}
    text = rules_text(task, 10)
    assert_in_order(text, "berth planner", "## Rules", "arrival hour", "berth hour plus its hours alongside",
                    "consecutive sections", "same section in the same hour", "## Cost", "## Plan format",
                    "## Tools", "10 checks", "the lower its cost", "scores 0")
    for absent in ("crane", "no-movement", "movements per hour"):
        assert absent not in text.lower()


# ---------------------------------------------------------------------------------------------------- §7.2


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_situation_carries_every_item_in_order(task_id: str) -> None:
    task = by_id(task_id)
    text = situation_text(task)
    rules = task["rules"]
    alongside = [b for b in task["blocks"] if b["kind"] == "alongside"]
    closed = [b for b in task["blocks"] if b["kind"] == "closed"]

    title = text.splitlines()[0]
    for part in (task["terminal"], "Port of Barcelona", task["quay"], f"week {task['week']} of 2024"):
        assert part in title
    headings = ["## Notices", *(["## Ships already alongside"] if alongside else []),
                *(["## Closed sections"] if closed else []), "## Quay cranes and movements", "## Ships to berth"]
    assert_in_order(text, title, "Hour 0 is Monday", "00:00 UTC", "whole hours",
                    f"{task['first_section']}–{task['last_section']}", "about 42 m", *headings)

    # Notices verbatim, in stored order, under their heading.
    notices = text.split("## Notices", 1)[1]
    assert_in_order(notices, *[f"- {notice}\n" for notice in task["notices"]])

    for block in alongside:
        assert f"- {block['label']}: sections {block['first']}–{block['last']}, stays until hour {block['end']}" \
            in text
    for block in closed:
        assert f"- sections {block['first']}–{block['last']}, hours {block['start']}–{block['end']} " \
               f"({block['label']})" in text

    cranes = text.split("## Quay cranes and movements", 1)[1].split("## Ships to berth", 1)[0]
    pool_line = next(line for line in cranes.splitlines() if "quay cranes" in line)
    assert f"{rules['crane_pool']} quay cranes" in pool_line
    for outage in rules["crane_outages"]:
        assert f"from hour {outage['start']} to hour {outage['end']} only " \
               f"{rules['crane_pool'] - outage['cranes']} are available" in pool_line
    assert f"At most {rules['max_moves_per_hour']} ships may berth or leave in the same hour" in cranes
    assert f"{rules['crane_rate']} moves per hour" in cranes
    window_lines = [f"from hour {w['start']} to hour {w['end']} ({w['reason']})" for w in rules["no_moves"]]
    assert_in_order(cranes, *window_lines)
    for window in rules["no_moves"]:
        who = f"Ships of {window['min_length']} m or more may not" if window["min_length"] else "No ship may"
        assert f"{who} berth or leave from hour {window['start']} to hour {window['end']}" in cranes
    if alongside:
        assert "keeps 2 cranes until it leaves" in cranes


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_ships_table_columns_rows_and_notes(task_id: str) -> None:
    task = by_id(task_id)
    rows = table_rows(situation_text(task))
    assert rows[0] == ["id", "ship", "length m", "sections", "arrives", "workload (moves)", "cranes",
                       "planned berth", "planned departure", "notes"]
    order = sorted(task["ships"], key=lambda s: (s["planned_hour"] if s["planned_hour"] is not None
                                                 else s["arrival"], s["id"]))
    assert [int(row[0]) for row in rows[1:]] == [s["id"] for s in order]
    rate = task["rules"]["crane_rate"]
    for row, ship in zip(rows[1:], order, strict=True):
        assert row[1:7] == [ship["name"], f"{ship['length_m']:.0f}", str(ship["sections"]), str(ship["arrival"]),
                            str(ship["workload"] * rate), f"{ship['min_cranes']}-{ship['max_cranes']}"]
        if ship["planned_section"] is None:
            assert "unscheduled" in row[7]
        else:
            assert row[7].startswith(f"{ship['planned_hour']} @ {ship['planned_section']}, {ship['std_cranes']} crane")
        assert row[8] == str(ship["due"])
        notes = row[9]
        if ship["berth_deadline"] is not None:
            assert f"hour {ship['berth_deadline']}" in notes and str(ship["deadline_penalty"]) in notes
            assert "emergency" in notes
        if ship["weight"] != 1:
            assert "priority" in notes and f"×{ship['weight']}" in notes
        if ship["berth_deadline"] is None and ship["weight"] == 1:
            assert notes == ""


def test_situation_date_and_rounding_details() -> None:
    text = situation_text(by_id("dock-24B-w06x1-busy-0"))
    assert "Hour 0 is Monday 05 February 2024 00:00 UTC" in text
    # PERSEUS is 140.38 m; FOS EXPRESS is the unscheduled call of the notices.
    assert "| 0 | PERSEUS | 140 | 4 | 0 | 196 | 1-2 | 0 @ 4, 1 crane | 7 |  |" in text
    assert "| 2 | CMA CGM DALILA | 334 | 8 | 24 | 2352 | 2-6 | 24 @ 7, 4 cranes | 45 | priority: delay counts ×3 |" \
        in text


def test_several_notes_are_joined_by_semicolons() -> None:
    task = copy.deepcopy(by_id("dock-24B-w06x1-busy-0"))
    ship = task["ships"][2]
    ship.update(berth_deadline=30, deadline_penalty=80)
    row = next(r for r in table_rows(situation_text(task))[1:] if r[0] == "2")
    assert row[9] == "emergency: dock by hour 30, else 80 per hour later; priority: delay counts ×3"


def test_plain_task_table_and_no_crane_section() -> None:
    task = copy.deepcopy(by_id("dock-24B-w06x1-busy-0"))
    task["rules"] = {}
    text = situation_text(task)
    assert "## Quay cranes and movements" not in text
    rows = table_rows(text)
    assert rows[0] == ["id", "ship", "length m", "sections", "arrives", "hours alongside", "planned berth",
                       "planned departure"]
    assert rows[1] == ["0", "PERSEUS", "140", "4", "0", "7", "0 @ 4", "7"]


def test_situation_without_notices_or_blocks() -> None:
    task = copy.deepcopy(by_id("dock-24B-w06x1-busy-0"))
    task["notices"], task["blocks"] = [], []
    text = situation_text(task)
    assert "## Notices\n- none" in text
    assert "already alongside" not in text and "## Closed sections" not in text
    assert "keeps 2 cranes" not in text
