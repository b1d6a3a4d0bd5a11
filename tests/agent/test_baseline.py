"""Baseline players: no key, no network, the same loop and server tools as a model."""

from __future__ import annotations

import json
import time

import pytest

from agent.providers.base import Interrupt, ToolCall
from agent.providers.baseline import BaselinePlayer
from berth_env import evaluate, grade, greedy_plan, load_pack, naive_plan
from testkit.episodes import play, types
from testkit.grid_checker import TOY_TASK_LINE
from testkit.servers import berth_server, free_port
from testkit.tasks import TASK_ID


def test_greedy_plays_read_check_submit_and_scores_the_greedy_plan(env_url):
    task = load_pack().get(TASK_ID)
    events, record = play("baseline:greedy", env_url)
    assert record["end_reason"] == "submitted" and not record["errors"]
    assert record["reward"] == grade(task, greedy_plan(task))["reward"] == 0.697598  # PORTSIM_SPEC §8.4
    assert [m["tool_calls"][0]["name"] for m in record["messages"] if m["role"] == "assistant"] == \
        ["get_situation", "check_plan", "submit_plan"]
    assert record["final"]["plan"] == greedy_plan(task)
    assert record["usage"] == {"input_tokens": 0, "output_tokens": 0}
    assert types(events) == ["episode_started", *(["turn_started", "text_delta", "tool_args_delta",
                                                    "turn_finished", "tool_call", "tool_result"] * 3)]
    said = "".join(e["text"] for e in events if e["type"] == "text_delta" and e["turn"] == 2)
    assert "check it before I submit" in said
    assert record["task"] == {"split": "eval", "difficulty": "busy", "quay": "24B", "ships": 17,
                              "optimal_cost": 87, "naive_cost": 658}
    assert record["schema_version"] == 1 and record["source"] == "cli" and record["env_url"] == env_url
    assert record["limits"] == {"max_turns": 12, "max_tokens": 24000, "wall_clock_s": 1800.0}


def test_naive_scores_the_naive_plan(env_url):
    task = load_pack().get(TASK_ID)
    _, record = play("baseline:naive", env_url)
    assert record["final"]["plan"] == task["reference"]["naive_plan"] == naive_plan(task)
    assert record["reward"] == 0.200216  # the §8.2 table's naive reward for this task


@pytest.mark.parametrize("max_turns, tools", [(1, ["submit_plan"]), (2, ["get_situation", "submit_plan"])])
def test_on_its_last_turn_the_baseline_submits_at_once(env_url, max_turns, tools):
    _, record = play("baseline:greedy", env_url, max_turns=max_turns)
    assert record["end_reason"] == "submitted" and record["reward"] == 0.697598
    assert [m["tool_calls"][0]["name"] for m in record["messages"] if m["role"] == "assistant"] == tools


def test_the_baseline_repairs_the_ships_a_check_flags():
    task = load_pack().get(TASK_ID)
    player = BaselinePlayer("greedy", TASK_ID, max_turns=12)
    broken = greedy_plan(task)
    broken[1] = {**broken[1], "berth_hour": broken[2]["berth_hour"], "section": broken[2]["section"]}
    answer = evaluate(task, broken) | {"checks_left": 9}
    assert not answer["feasible"]
    player.plan = broken
    player.add_tool_results([(ToolCall("c1", "check_plan", "{}"), json.dumps(answer) + "\n\n[10 turns left]")])
    interrupt = Interrupt(None, 60)
    try:
        turn = player.stream_turn(3, interrupt)
        said = []
        while True:
            try:
                said.append(next(turn))
            except StopIteration as done:
                result = done.value
                break
    finally:
        interrupt.finish()
    call = result.calls[0]
    assert call.name == "check_plan"
    repaired = json.loads(call.arguments)["plan"]
    assert evaluate(task, repaired)["feasible"]
    flagged = {v["ship"] for v in answer["violations"]}
    kept = [e for e in broken if e["ship"] not in flagged]
    assert all(e in repaired for e in kept)  # only the flagged ships moved
    text = "".join(e["text"] for e in said if e["type"] == "text_delta")
    assert "flags ships" in text


def test_an_unknown_task_on_the_server_is_a_clear_error(env_url):
    events, record = play("baseline:greedy", env_url, task_id="dock-99X-w01x1-busy-0")
    assert record["end_reason"] == "error" and "unknown task" in record["errors"][0]
    assert types(events) == ["error"]


def test_a_task_the_embedded_pack_does_not_know_fails_clearly(tmp_path, warm_python):
    pack = tmp_path / "toy"
    pack.mkdir()
    (pack / "tasks.jsonl").write_text(TOY_TASK_LINE + "\n")
    with berth_server(pack, python=warm_python) as url:
        _, record = play("baseline:greedy", url, task_id="toy-1")
    assert record["end_reason"] == "error"
    assert "plays only the tasks of the embedded task pack" in record["errors"][0]


def test_an_unreachable_server_fails_fast_with_a_clear_message():
    started = time.monotonic()
    _, record = play("baseline:greedy", f"http://127.0.0.1:{free_port()}")
    assert record["end_reason"] == "error" and "could not start an episode" in record["errors"][0]
    assert time.monotonic() - started < 20


def test_a_malformed_episode_id_is_refused(env_url):
    _, record = play("baseline:greedy", env_url, episode_id="../../etc")
    assert record["end_reason"] == "error" and "episode id" in record["errors"][0]
