"""The two texts an agent reads: the rules (its system prompt) and the situation of one task.

Both are written for this project; PORTSIM_SPEC §7 fixes what they must say and in which order, not the wording.
Every number comes from the task, so a pack with other rules or quays gets matching texts.
"""

from __future__ import annotations

from datetime import date
from typing import Any

Task = dict[str, Any]

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
UNSCHEDULED = "unscheduled (none)"


def is_crane_task(task: Task) -> bool:
    """Crane-rule task: the rules carry a non-zero crane pool (every dock-v1 task); otherwise a plain task."""
    return bool((task.get("rules") or {}).get("crane_pool"))


def rules_text(task: Task, max_checks: int) -> str:
    """The rules text (`instructions`): role, rules, cost, plan format, tools, how the episode ends.

    Crane-rule tasks add the crane, window and movement rules; plain tasks have fixed stays and no cranes.
    """
    cranes = is_crane_task(task)
    what = ("the hour it berths, its position (the first quay section it occupies) and the number of quay cranes "
            "that work it" if cranes else "the hour it berths and its position (the first quay section it occupies)")
    rules = [
        "A ship berths at or after its arrival hour.",
        *(_crane_stay_rules(task) if cranes else
          ["A ship stays alongside for exactly its hours alongside: it departs at its berth hour plus its hours "
           "alongside."]),
        "A ship occupies its number of consecutive sections, starting at the section you give, all inside "
        f"sections {task['first_section']}–{task['last_section']}.",
        "Two ships never use the same section in the same hour. Ships already alongside and closed sections are "
        "off limits for their hours. A ship leaving at hour h frees its sections for a ship berthing at hour h.",
        *(_crane_capacity_rules(task) if cranes else []),
    ]
    example = ('[{"ship": 0, "berth_hour": 12, "section": 4, "cranes": 3}, '
               '{"ship": 1, "berth_hour": 30, "section": 9, "cranes": 2}]' if cranes else
               '[{"ship": 0, "berth_hour": 12, "section": 4}, {"ship": 1, "berth_hour": 30, "section": 9}]')
    return "\n".join([
        f"You are the berth planner of quay {task['quay']} at {task['terminal']}. Disruptions have broken the "
        f"published berth plan, so it no longer works. Make a new plan for every ship in the table of the "
        f"situation: {what}.",
        "",
        "## Rules",
        "A plan that breaks any rule is infeasible.",
        *(f"{number}. {rule}" for number, rule in enumerate(rules, start=1)),
        "",
        "## Cost",
        "A feasible plan costs the sum of:",
        "- delay: for each ship, its sections × the hours it departs after its planned departure (leaving early "
        "earns nothing);",
        "- moves: 5 for each scheduled ship placed on a different starting section than in the published plan. "
        f"Changing a ship's hour{' or crane count' if cranes else ''} costs nothing extra; unscheduled calls have "
        "no planned section and are never moved.",
        *(["Priority ships count their delay several times over, and an emergency ship pays the stated amount "
           "for each hour it docks after its deadline (see the notes column of the table)."] if cranes else []),
        "",
        "## Plan format",
        "One entry per ship, using the ids of the table, for example:",
        example,
        "",
        "## Tools",
        "- get_situation() shows the situation again.",
        "- check_plan(plan) lists the rule violations of a draft and, when it is feasible, its cost. You have "
        f"{max_checks} checks.",
        "- submit_plan(plan) hands in your final plan. It ends the episode and is graded once: an infeasible "
        "plan scores low; a feasible plan scores higher "
        f"{'the closer its cost is to the best possible' if cranes else 'the lower its cost'}.",
        "",
        "Submit before you run out of turns: an episode that ends without a submission scores 0.",
    ])


def _crane_stay_rules(task: Task) -> list[str]:
    """How long a crane-rule ship stays, and when it may not berth: the windows without movements."""
    rate = task["rules"].get("crane_rate")
    stay = ("⌈moves / (crane_rate × cranes)⌉ hours, with crane_rate = "
            f"{rate} moves per crane-hour" if rate else "⌈workload / cranes⌉ hours (workload in crane-hours)")
    return [
        "A ship is worked by at least its minimum and at most its maximum number of cranes. It stays alongside "
        f"for {stay}. It departs when the work is done, unless that hour falls inside a no-movement window that "
        "applies to it: then it waits alongside until the window ends, keeping its sections but freeing its "
        "cranes.",
        "A ship may not berth inside a no-movement window that applies to it.",
    ]


def _crane_capacity_rules(task: Task) -> list[str]:
    """The quay's shared limits on crane-rule tasks: cranes in every hour, movements per hour."""
    cap = task["rules"].get("max_moves_per_hour")
    moves = (f"At most {cap} movements per hour: a berthing at hour h and a departure at hour h each count once "
             "in hour h." if cap else "There is no limit on the number of movements per hour.")
    return [
        "In every hour, the cranes of all ships alongside (the ships already alongside included) must not exceed "
        "the cranes available in that hour.",
        moves,
    ]


def situation_text(task: Task) -> str:
    """The situation (`situation`, `get_situation()`): quay, notices, blocks, cranes and wind, the ships table."""
    monday = date.fromisoformat(task["week_start_utc"][:10])
    lines = [
        f"# {task['terminal']}, Port of Barcelona: quay {task['quay']}, week {task['week']} of "
        f"{monday.isocalendar().year}",
        "",
        f"Hour 0 is Monday {monday.day:02d} {_MONTHS[monday.month - 1]} {monday.year} 00:00 UTC; all times are "
        "whole hours counted from then.",
        f"The quay has sections {task['first_section']}–{task['last_section']} (about {task['section_m']:.0f} m "
        "each). A ship needs its number of consecutive sections for all its hours alongside.",
        "",
        "## Notices",
    ]
    lines += [f"- {notice}" for notice in task["notices"]] or ["- none"]
    alongside = [b for b in task["blocks"] if b["kind"] == "alongside"]
    closed = [b for b in task["blocks"] if b["kind"] == "closed"]
    if alongside:
        lines += ["", "## Ships already alongside at hour 0 (they cannot be moved)"]
        lines += [f"- {b['label']}: sections {b['first']}–{b['last']}, stays until hour {b['end']}"
                  for b in alongside]
    if closed:
        lines += ["", "## Closed sections"]
        lines += [f"- sections {b['first']}–{b['last']}, hours {b['start']}–{b['end']} ({b['label']})"
                  for b in closed]
    if is_crane_task(task):
        lines += ["", "## Quay cranes and movements", *_crane_bullets(task, alongside)]
    lines += ["", "## Ships to berth", *_ships_table(task)]
    return "\n".join(lines)


def _crane_bullets(task: Task, alongside: list[dict]) -> list[str]:
    rules = task["rules"]
    pool = rules["crane_pool"]
    outages = "".join(f"; from hour {o['start']} to hour {o['end']} only {pool - o['cranes']} are available"
                      for o in rules.get("crane_outages") or [])
    bullets = [f"- The terminal has {pool} quay cranes{outages}."]
    if rules.get("max_moves_per_hour"):
        bullets.append(f"- At most {rules['max_moves_per_hour']} ships may berth or leave in the same hour "
                       "(pilot and tug capacity).")
    if rules.get("crane_rate"):
        bullets.append(f"- A crane handles {rules['crane_rate']} moves per hour: hours alongside = "
                       f"⌈moves / ({rules['crane_rate']} × cranes)⌉.")
    for window in rules.get("no_moves") or []:
        length = window.get("min_length") or 0
        who = f"Ships of {length:g} m or more" if length else "No ship"
        verb = "may not" if length else "may"
        bullets.append(f"- {who} {verb} berth or leave from hour {window['start']} to hour {window['end']} "
                       f"({window.get('reason', 'no movements')}).")
    if alongside:
        counts = sorted({b["cranes"] for b in alongside})
        held = f"{counts[0]} cranes" if len(counts) == 1 else "its cranes"
        bullets.append(f"- Each ship already alongside keeps {held} until it leaves.")
    return bullets


def _row_order(ship: dict) -> tuple[int, int]:
    hour = ship["planned_hour"] if ship["planned_hour"] is not None else ship["arrival"]
    return hour, ship["id"]


def _ships_table(task: Task) -> list[str]:
    ships = sorted(task["ships"], key=_row_order)
    if not is_crane_task(task):
        rows = ["| id | ship | length m | sections | arrives | hours alongside | planned berth | planned departure |",
                "|---|---|---|---|---|---|---|---|"]
        for s in ships:
            berth = (f"{s['planned_hour']} @ {s['planned_section']}" if s["planned_section"] is not None
                     else UNSCHEDULED)
            rows.append(f"| {s['id']} | {s['name']} | {s['length_m']:.0f} | {s['sections']} | {s['arrival']} | "
                        f"{s['handling']} | {berth} | {s['due']} |")
        return rows
    rate = task["rules"].get("crane_rate")
    work_label = "workload (moves)" if rate else "workload (crane-hours)"
    rows = [f"| id | ship | length m | sections | arrives | {work_label} | cranes | planned berth | "
            "planned departure | notes |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for s in ships:
        work = s["workload"] * rate if rate and s["workload"] is not None else s["workload"]
        if s["planned_section"] is not None:
            cranes = s["std_cranes"]
            berth = f"{s['planned_hour']} @ {s['planned_section']}, {cranes} crane{'' if cranes == 1 else 's'}"
        else:
            berth = UNSCHEDULED
        rows.append(f"| {s['id']} | {s['name']} | {s['length_m']:.0f} | {s['sections']} | {s['arrival']} | "
                    f"{work} | {s['min_cranes']}-{s['max_cranes']} | {berth} | {s['due']} | {_notes(s)} |")
    return rows


def _notes(ship: dict) -> str:
    notes = []
    if ship.get("berth_deadline") is not None:
        notes.append(f"emergency: dock by hour {ship['berth_deadline']}, else {ship['deadline_penalty']} per "
                     "hour later")
    if (ship.get("weight") or 1) != 1:
        notes.append(f"priority: delay counts ×{ship['weight']}")
    return "; ".join(notes)
