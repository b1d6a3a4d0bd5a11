"""Play's plan editor on the server side (viewer/play/planner.py, start_plans.py): the problems the chart shows are
the checker's for any draft, the cost never shows before a check, bad drafts get a message, and the plans Play can
start from, with the centaur model name a person improving a model's plan plays under."""

from __future__ import annotations

import json
import random
import re
from types import SimpleNamespace

import pytest

from agent.limits import INPUT_MAX_BYTES
from berth_env import check, load_pack, parse_plan
from berth_env.baselines import published_plan
from live.hand_play import human_model
from rollouts.archive import RolloutNotFound
from rollouts.links import beat_query
from rollouts.record import Record
from testkit.records import make_record
from testkit.tasks import TASK_ID
from viewer.play.planner import build_planner, draft_problems, edited_plan, planner_value
from viewer.play.start_plans import NAIVE_NAME, PUBLISHED_NAME, start_plan


@pytest.fixture(scope="module")
def task() -> dict:
    return load_pack().get(TASK_ID)


def random_draft(task: dict, rng: random.Random) -> list[dict]:
    """The published plan with a few ships shifted in time, along the quay and in cranes (some off the quay)."""
    plan = [dict(e) for e in published_plan(task)]
    for entry in rng.sample(plan, rng.randint(1, 6)):
        ship = task["ships"][entry["ship"]]
        entry["berth_hour"] = max(0, entry["berth_hour"] + rng.randint(-30, 30))
        entry["section"] += rng.randint(-4, 4)
        entry["cranes"] = rng.randint(ship["min_cranes"], ship["max_cranes"])
    return plan


def test_the_problems_drawn_are_the_checkers_for_300_random_drafts(task):
    rng = random.Random(29)
    for _ in range(300):
        plan = random_draft(task, rng)
        drawn = draft_problems(task, plan, published_plan(task))
        result = check(task, parse_plan(task, plan).entries)
        assert [(p["ship"], p["problem"]) for p in drawn["problems"]] == [
            (v["ship"], v["problem"]) for v in result.violations]
        assert drawn["summary"]["ships_flagged"] == sorted({v["ship"] for v in result.violations})
        assert drawn["summary"]["moved"] == sum(sr.moved for sr in result.ships.values())


def test_the_chart_tags_every_ship_and_never_shows_the_cost(task):
    drawn = draft_problems(task, task["reference"]["optimal_plan"], published_plan(task))
    svg = drawn["svg"]
    assert drawn["problems"] == [] and "no rule broken" in svg
    assert not re.search(r"cost\s*\d", svg), "only check_plan may tell the cost"
    assert {int(s) for s in re.findall(r'<rect class="ship" data-ship="(\d+)"', svg)} == set(range(len(task["ships"])))
    assert 'data-plot="' in svg and "<script" not in svg


def test_bad_drafts_get_a_message_and_nothing_else(task):
    draft = build_planner(lambda task_id: task if task_id == TASK_ID else None, TASK_ID).draft
    assert "error" in draft("not a dict")
    assert "not served" in draft({"task_id": "dock-nope", "plan": "[]"})["error"]
    assert "cannot be read" in draft({"task_id": TASK_ID, "plan": "{not json"})["error"]
    assert "error" in draft({"task_id": TASK_ID, "plan": json.dumps([{"ship": 0}] * (INPUT_MAX_BYTES // 8))})
    # Entries the parser refuses are dropped and named, as for a model's plan: every ship is then missing.
    drawn = draft({"task_id": TASK_ID, "plan": json.dumps([{"ship": "x", "berth_hour": "soon"}])})
    assert drawn["summary"]["entry_problems"] and drawn["summary"]["problems"] == 17
    with pytest.raises(ValueError):
        edited_plan("{")
    with pytest.raises(ValueError):
        edited_plan(json.dumps({"task_id": TASK_ID, "plan": "nope"}))


def test_the_value_carries_the_draft_its_start_and_locks(task):
    value = json.loads(planner_value(task, published_plan(task), start=published_plan(task),
                                     start_name=PUBLISHED_NAME, locked=[3, 3]))
    assert value["task_id"] == TASK_ID and value["locked"] == [3] and value["quay"] == [2, 22]
    assert "The published plan, unchanged" in value["svg"]
    assert edited_plan(json.dumps(value))[:2] == (TASK_ID, value["plan"])


class _Records:
    """The app's one door by id (viewer.records.RecordCache.find) over a few records."""

    def __init__(self, *records: dict) -> None:
        self.by_id = {r["episode_id"]: r for r in records}

    def find(self, episode_id: str, *, running: bool = True) -> SimpleNamespace:
        if episode_id not in self.by_id:
            raise RolloutNotFound(f"no rollout {episode_id}")
        return SimpleNamespace(record=Record(self.by_id[episode_id]), row={})


def test_play_starts_from_the_published_plan_the_naive_re_plan_or_a_rollout(task):
    naive = task["reference"]["naive_plan"]
    step = {"turn": 1, "tool": "submit_plan", "plan": naive, "result": {}}
    mine = make_record(seed=1, task_id=TASK_ID, model="anthropic:claude-x", episode_id="00000000000a", steps=[step])
    other = make_record(seed=2, task_id="dock-24B-w06x1-standard-0", episode_id="00000000000b", steps=[step])
    records = _Records(mine, other)
    assert start_plan(records, task, "").name == PUBLISHED_NAME
    assert start_plan(records, task, "naive").plan == naive and start_plan(records, task, "naive").name == NAIVE_NAME
    loaded = start_plan(records, task, "00000000000a")
    assert sorted(loaded.plan, key=lambda e: e["ship"]) == sorted(naive, key=lambda e: e["ship"])
    assert loaded.player == {"from": "00000000000a", "model": "anthropic:claude-x"}
    with pytest.raises(ValueError, match="another task"):
        start_plan(records, task, "00000000000b")
    with pytest.raises(ValueError, match="no rollout"):
        start_plan(records, task, "00000000000c")
    assert beat_query(TASK_ID, "00000000000a") == f"tab=play&task={TASK_ID}&from=00000000000a"


def test_a_person_improving_a_models_plan_is_the_centaur_row():
    assert human_model() == "human" and human_model("bob") == "human:bob"
    assert human_model(improving="openai:gpt-x@route") == "human+openai:gpt-x@route"
    assert human_model("bob", improving="human:alice") == "human:bob"  # a person's plan: still a person
    assert human_model(improving="human+openai:gpt-x") == "human"
    assert human_model(improving="evil\n<script>") == "human+evilscript"
    assert Record({"model": "human+openai:gpt-x"}).human
