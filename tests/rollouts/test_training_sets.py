"""The export's pure parts: a record's conversation (rollouts.conversations) over every shape testkit's records
take, and the preference pairs (rollouts.training_sets.preference_pairs) against brute-force enumeration."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from rollouts.conversations import conversation, opening, tool_schemas
from rollouts.training_sets import Environment, ExportSettings, _Played, export, preference_pairs
from testkit.records import make_records

ROLES = {"system", "user", "assistant", "tool"}


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return make_records(300, seed=31)


def test_every_record_becomes_a_chat_of_known_roles_with_calls_answered_and_notes_joined(records):
    for record in records:
        messages = conversation(record)
        json.dumps(messages, allow_nan=False)  # plain JSON, whatever the model wrote
        roles = [m["role"] for m in messages]
        assert set(roles) <= ROLES and roles[:2] == ["system", "user"]
        assert ("user", "user") not in set(itertools.pairwise(roles))
        calls = set()
        for message in messages:
            for call in message.get("tool_calls") or []:
                assert call["type"] == "function" and call["function"]["name"]
                calls.add(call["id"])
                assert isinstance(call["function"]["arguments"], dict | str)
            if message["role"] == "tool":
                assert message["tool_call_id"] in calls
        stored = [m for m in record["messages"] if m["role"] == "assistant"]
        assert sum(m["role"] == "assistant" for m in messages) == len(stored)
        prompt, rest = opening(messages)
        assert prompt == messages[:2] and (not rest or rest[0]["role"] == "assistant")


def test_an_assistant_turn_keeps_its_reasoning_and_its_arguments_as_the_object_the_model_wrote():
    record = {"messages": [
        {"role": "system", "content": "rules"}, {"role": "user", "content": [{"type": "text", "text": "situation"}]},
        {"role": "assistant", "content": "", "reasoning": "think", "tool_calls": [
            {"id": "c1", "name": "check_plan", "arguments": '{"plan": [{"ship": 0}]}'},
            {"id": "c2", "name": "check_plan", "arguments": '{"plan": NaN}'}]},
        {"role": "tool", "tool_call_id": "c1", "name": "check_plan", "content": "{}"},
        {"role": "user", "content": "nudge", "kind": "nudge"}, {"role": "user", "content": "last", "kind": "last_turn"},
        {"role": "moderator", "content": "not a role"}, "not a message"]}
    messages = conversation(record)
    assert messages[1] == {"role": "user", "content": "situation"}
    assert messages[2]["reasoning_content"] == "think"
    assert [c["function"]["arguments"] for c in messages[2]["tool_calls"]] == [{"plan": [{"ship": 0}]}, '{"plan": NaN}']
    assert messages[-1] == {"role": "user", "content": "nudge\n\nlast"}
    assert len(messages) == 5


def test_tool_schemas_are_json_schema_functions_in_the_servers_order():
    tools = [{"name": "get_situation", "description": "show", "input_schema": {"type": "object", "properties": {}}},
             {"name": "submit_plan", "description": None, "input_schema": None}]
    assert tool_schemas(tools) == [
        {"type": "function", "function": {"name": "get_situation", "description": "show",
                                          "parameters": {"type": "object", "properties": {}}}},
        {"type": "function", "function": {"name": "submit_plan", "description": "",
                                          "parameters": {"type": "object", "properties": {}}}}]


def most_pairs(rewards: list[float], gap: float) -> int:
    """Brute force: the largest set of disjoint pairs whose rewards differ by at least `gap`."""
    best = 0

    def search(left: list[int], count: int) -> None:
        nonlocal best
        best = max(best, count)
        if len(left) < 2 or count + len(left) // 2 <= best:
            return
        first, rest = left[0], left[1:]
        search(rest, count)  # the first one in no pair
        for other in rest:
            if abs(rewards[first] - rewards[other]) >= gap - 1e-12:
                search([i for i in rest if i != other], count + 1)

    search(list(range(len(rewards))), 0)
    return best


def test_preference_pairs_are_as_many_as_brute_force_finds_each_keeping_the_gap_and_no_rollout_twice():
    rng = random.Random(5)
    for _ in range(300):
        rewards = [round(rng.choice([0.0, 0.2, 0.25, 0.5, 0.7, 0.9, 1.0, rng.random()]), 3)
                   for _ in range(rng.randint(0, 8))]
        gap = rng.choice([0.0, 0.1, 0.2, 0.5])
        played = [_Played({"episode_id": f"e{i}"}, reward, "m") for i, reward in enumerate(rewards)]
        pairs = preference_pairs(played, gap)
        assert len(pairs) == most_pairs(rewards, gap), (rewards, gap)
        assert all(chosen.reward - rejected.reward >= gap - 1e-12 for chosen, rejected in pairs)
        sides = [p.row["episode_id"] for pair in pairs for p in pair]
        assert len(sides) == len(set(sides))


def test_export_reads_each_row_once_says_so_to_progress_and_counts_what_it_leaves_out(records, tmp_path):
    by_id = {r["episode_id"]: r for r in records[:60]}
    rows = [{"episode_id": episode_id} for episode_id in by_id] + [{"episode_id": "gone"}]
    seen: list[int] = []
    splits = {r["task_id"]: split for r, split in zip(by_id.values(), itertools.cycle(["train", "eval", None]))}

    def fetch(row: dict) -> dict:
        if row["episode_id"] not in by_id:
            raise FileNotFoundError(row["episode_id"])
        return by_id[row["episode_id"]]

    environment = Environment(tools=tool_schemas([{"name": "check_plan", "input_schema": {}}]), env_name="e",
                              env_url="u", reward_version=1, prompt_version=1)
    counts = export(rows, fetch, tmp_path, split_of=lambda view: splits[view.task_id], clean=lambda value: value,
                    environment=environment, settings=ExportSettings(min_reward=0.5), progress=seen.append)
    assert sum(seen) == len(rows) == counts.read and counts.unreadable == 1
    kept = [r for r in by_id.values() if splits[r["task_id"]] == "train"]
    assert counts.eval_left_out == sum(splits[r["task_id"]] == "eval" for r in by_id.values())
    assert counts.unknown_split_left_out == sum(splits[r["task_id"]] is None for r in by_id.values())
    assert sum(counts.splits.values()) + counts.no_conversation == len(kept)
    written = [json.loads(line) for line in (tmp_path / "sft" / "train.jsonl").read_text().splitlines()]
    assert {row["episode_id"] for row in written} == {r["episode_id"] for r in kept if r["reward"] >= 0.5}
