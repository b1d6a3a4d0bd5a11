"""The berth server through the wire: OpenEnv's MCPToolClient over a real WebSocket (PORTSIM_SPEC §6, §8.1, §8.8)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import websockets.sync.client
from openenv.core.env_server.mcp_types import CallToolAction, ListToolsAction
from openenv.core.mcp_client import MCPToolClient

from berth_env import grade, load_pack
from berth_env.server import BerthEnvironment

PACK = load_pack()
EVAL = PACK.split("eval")
TASK = PACK.get("dock-24B-w06x1-busy-0")
RESET_KEYS = ["episode_id", "task_id", "split", "difficulty", "instructions", "situation", "max_checks",
              "max_tool_calls", "tools", "prompt_version", "viewer_url"]
CHECK_KEYS = ["feasible", "violations", "cost", "delay_cost", "moves", "ships", "checks_left"]
SHIP_KEYS = ["ship", "departure", "delay_h", "moved", "cost", "cranes", "hours_alongside"]


@pytest.fixture
def client(env_url: str) -> Iterator[Any]:
    with MCPToolClient(env_url).sync() as sync_client:
        yield sync_client


def call(client: Any, tool: str, **arguments: Any) -> Any:
    return client.step(CallToolAction(tool_name=tool, arguments=arguments))


def text(step: Any) -> str:
    """The tool's returned string (the first text content of the MCP result)."""
    assert step.observation.error is None, step.observation.error
    return step.observation.result["content"][0]["text"]


def output(step: Any) -> dict:
    return json.loads(text(step))


def error_message(step: Any) -> str:
    error = step.observation.error
    assert error is not None, "expected a tool error"
    return error.message


def is_compact(raw: str) -> bool:
    return raw == json.dumps(json.loads(raw), separators=(",", ":"), ensure_ascii=False)


def published_plan(task: dict) -> list[dict]:
    """Every scheduled ship where the published plan had it; unscheduled calls at arrival on the first section."""
    return [{"ship": s["id"], "berth_hour": s["planned_hour"] if s["planned_section"] is not None else s["arrival"],
             "section": s["planned_section"] if s["planned_section"] is not None else task["first_section"]}
            for s in task["ships"]]


# ------------------------------------------------------------------------------------------------ the episode


def test_reset_metadata(client: Any) -> None:
    reset = client.reset(task_id=TASK["task_id"], episode_id="x" * 80)
    metadata = reset.observation.metadata
    assert reset.done is False and reset.reward is None
    assert list(metadata) == RESET_KEYS
    assert metadata["episode_id"] == "x" * 64
    assert (metadata["task_id"], metadata["split"], metadata["difficulty"]) == (TASK["task_id"], "eval", "busy")
    assert "Cost" in metadata["instructions"] and "You have 10 checks" in metadata["instructions"]
    assert (metadata["max_checks"], metadata["max_tool_calls"], metadata["prompt_version"]) == (10, 24, 1)
    assert metadata["tools"] == ["get_situation", "check_plan", "submit_plan"]
    assert metadata["viewer_url"] == f"/viewer/#/live/{'x' * 64}"
    situation = text(call(client, "get_situation"))
    assert situation == metadata["situation"]
    assert TASK["terminal"] in situation


def test_generated_episode_ids_are_12_hex(client: Any) -> None:
    first = client.reset(task_id=TASK["task_id"]).observation.metadata["episode_id"]
    second = client.reset(task_id=TASK["task_id"]).observation.metadata["episode_id"]
    assert len(first) == 12 and int(first, 16) >= 0 and first != second


def test_tools_and_plan_schema(client: Any) -> None:
    tools = {tool.name: tool for tool in client.list_tools()}
    assert sorted(tools) == ["check_plan", "get_situation", "submit_plan"]
    for name in ("check_plan", "submit_plan"):
        plan = tools[name].input_schema["properties"]["plan"]
        kinds = {option["type"] for option in plan["anyOf"]}
        assert kinds == {"array", "string"}
        items = next(option for option in plan["anyOf"] if option["type"] == "array")["items"]
        items = tools[name].input_schema.get("$defs", {}).get(items["$ref"].split("/")[-1], items) \
            if "$ref" in items else items
        assert items["required"] == ["ship", "berth_hour", "section"]
        assert set(items["properties"]) == {"ship", "berth_hour", "section", "cranes"}
    assert "optimal" not in json.dumps([t.description for t in tools.values()]).lower()


def test_check_naive_then_submit_optimum_then_episode_is_over(client: Any) -> None:
    reference = TASK["reference"]
    client.reset(task_id=TASK["task_id"])
    check = call(client, "check_plan", plan=reference["naive_plan"])
    raw = text(check)
    result = json.loads(raw)
    assert (check.reward, check.done) == (0.0, False)
    assert list(result) == CHECK_KEYS
    assert result["feasible"] is True and result["violations"] == []
    assert (result["cost"], result["delay_cost"], result["moves"]) == (658, 613, 9) == \
        (reference["naive_cost"], 613, 9)
    assert result["checks_left"] == 9
    assert [s["ship"] for s in result["ships"]] == list(range(len(TASK["ships"])))
    assert list(result["ships"][0]) == SHIP_KEYS
    assert "optimal" not in raw.lower() and "reward" not in raw.lower()
    assert is_compact(raw)

    submit = call(client, "submit_plan", plan=reference["optimal_plan"])
    assert submit.done is True and submit.reward == 1.0
    assert text(submit) == '{"submitted":true,"feasible":true,"reward":1.0,"cost":87,"delay_cost":72,"moves":3}'
    metadata = submit.observation.metadata
    assert metadata["grade"]["cost"] == reference["optimal_cost"] == 87
    assert metadata["grade"] == grade(TASK, reference["optimal_plan"])
    assert metadata["rubric"] == {"ships_clean": 1.0, "cost_quality": 1.0}
    assert metadata["end_reason"] == "submitted"

    later = call(client, "check_plan", plan=reference["naive_plan"])
    assert "episode is over" in error_message(later)
    assert later.done is True and later.reward == 0.0
    assert later.observation.metadata["grade"]["cost"] == 87
    assert later.observation.metadata["end_reason"] == "submitted"
    assert later.observation.metadata["rubric"] == {"ships_clean": 0.0, "cost_quality": 0.0}  # re-scored action
    resubmit = call(client, "submit_plan", plan=reference["optimal_plan"])
    assert "episode is over" in error_message(resubmit)
    assert resubmit.done is True and resubmit.reward == 0.0  # no re-grading after the end (README, §6.7)


def test_published_plan_is_infeasible(client: Any) -> None:
    client.reset(task_id=TASK["task_id"])
    plan = published_plan(TASK)
    check = output(call(client, "check_plan", plan=json.dumps(plan)))
    assert check["feasible"] is False and check["violations"]
    assert check["cost"] is None
    submit = call(client, "submit_plan", plan=plan)
    reply = output(submit)
    assert submit.done is True and 0.0 <= submit.reward < 0.2
    assert submit.observation.metadata["grade"]["feasible"] is False
    assert list(reply) == ["submitted", "feasible", "reward", "violations", "entry_problems"]
    assert reply["reward"] == submit.reward and reply["entry_problems"] == []
    assert reply["violations"] == submit.observation.metadata["grade"]["violations"][:20]
    assert submit.observation.metadata["rubric"]["cost_quality"] == 0.0


def test_submit_with_an_arrival_violation_scores_the_clean_fraction(client: Any) -> None:
    plan = [dict(entry) for entry in TASK["reference"]["optimal_plan"]]
    plan[0].update(berth_hour=-1, section=4, cranes=1)
    client.reset(task_id=TASK["task_id"])
    submit = call(client, "submit_plan", plan=plan)
    assert submit.reward == 0.188235  # 0.2 x 16/17 (§8.5)
    assert submit.observation.metadata["rubric"] == {"ships_clean": 0.9412, "cost_quality": 0.0}
    assert any("cannot arrive" in v["problem"] for v in output(submit)["violations"])


def test_non_ascii_is_kept_in_tool_output(client: Any) -> None:
    client.reset(task_id=TASK["task_id"])
    raw = text(call(client, "check_plan", plan='[{"ship": "ÅLAND", "berth_hour": 1, "section": 2}]'))
    assert "ÅLAND" in raw and "\\u00c5" not in raw
    assert "unknown ship" in raw


# ---------------------------------------------------------------------------------------------------- limits


def test_tool_call_limit_ends_the_episode(client: Any) -> None:
    client.reset(task_id=TASK["task_id"])
    for _ in range(23):
        step = call(client, "get_situation")
        assert step.done is False and step.reward == 0.0
    last = call(client, "get_situation")
    assert last.done is True and last.reward == 0.0
    assert last.observation.metadata["end_reason"] == "tool_call_limit"
    assert TASK["terminal"] in text(last)  # the 24th call's own output still comes back
    after = call(client, "submit_plan", plan=TASK["reference"]["optimal_plan"])
    assert "episode is over" in error_message(after)
    assert after.done is True and after.reward == 0.0
    assert call(client, "get_situation").observation.error is None  # the situation stays readable


def test_check_limit(client: Any, env_url: str) -> None:
    client.reset(task_id=TASK["task_id"], episode_id="check-limit")
    for used in range(1, 11):
        assert output(call(client, "check_plan", plan="[]"))["checks_left"] == 10 - used
    eleventh = output(call(client, "check_plan", plan=TASK["reference"]["optimal_plan"]))
    assert list(eleventh) == ["error"]
    assert "no checks left" in eleventh["error"] and "10" in eleventh["error"] and "submit" in eleventh["error"]
    submit = call(client, "submit_plan", plan=TASK["reference"]["optimal_plan"])
    assert submit.reward == 1.0
    steps = httpx.get(f"{env_url}/api/episodes/check-limit", timeout=10).json()["steps"]
    assert [s["tool"] for s in steps] == ["check_plan"] * 11 + ["submit_plan"]
    assert steps[10]["result"] == eleventh


def test_unreadable_plan_consumes_a_check(client: Any) -> None:
    client.reset(task_id=TASK["task_id"])
    result = output(call(client, "check_plan", plan="not json"))
    assert list(result) == ["error", "checks_left"] and result["checks_left"] == 9
    assert "json" in result["error"].lower()


def test_tools_before_reset_ask_for_a_reset(client: Any) -> None:
    for tool, arguments in (("get_situation", {}), ("check_plan", {"plan": "[]"}), ("submit_plan", {"plan": "[]"})):
        step = call(client, tool, **arguments)
        assert "reset" in error_message(step)
        assert step.done is False and step.reward == 0.0


# ------------------------------------------------------------------------------------------- the plan argument


def test_plan_as_json_string_fenced_string_and_mapping(client: Any) -> None:
    optimum = TASK["reference"]["optimal_plan"]
    client.reset(task_id=TASK["task_id"])
    as_json = output(call(client, "check_plan", plan=json.dumps(optimum)))
    fenced = output(call(client, "check_plan", plan=f"Here it is:\n```json\n{json.dumps({'plan': optimum})}\n```"))
    mapping = output(call(client, "check_plan", plan=json.dumps(
        {str(e["ship"]): [e["berth_hour"], e["section"], e["cranes"]] for e in optimum})))
    for result in (as_json, fenced, mapping):
        assert result["feasible"] is True and result["cost"] == 87
    assert mapping["checks_left"] == 7
    submit = call(client, "submit_plan", plan=f"```\n{json.dumps(optimum)}\n```")
    assert submit.reward == 1.0


def test_list_failing_schema_validation_consumes_no_check(client: Any) -> None:
    client.reset(task_id=TASK["task_id"])
    bad = [{"ship": "PERSEUS", "berth_hour": 0, "section": 4}]
    rejected = call(client, "check_plan", plan=bad)
    assert rejected.observation.error.error_type == "invalid_args"
    assert "plan" in rejected.observation.error.message
    assert rejected.done is False and rejected.reward == 0.0
    for wrong in ({"plan": TASK["reference"]["optimal_plan"]}, [{"ship": 0, "hour": 0, "section": 4}], 42):
        assert call(client, "check_plan", plan=wrong).observation.error.error_type == "invalid_args"
    assert output(call(client, "check_plan", plan=TASK["reference"]["naive_plan"]))["checks_left"] == 9
    # A rejected submit is not graded and does not end the episode (README, §6.7): the agent can still submit.
    failed_submit = call(client, "submit_plan", plan=bad)
    assert failed_submit.observation.error is not None
    assert failed_submit.done is False and failed_submit.reward == 0.0
    assert call(client, "submit_plan", plan=TASK["reference"]["optimal_plan"]).reward == 1.0


def test_reward_is_graded_from_the_raw_arguments(client: Any) -> None:
    # Schema validation would coerce `true` to ship 1; the lenient parser treats a boolean ship as unknown.
    plan = [dict(entry) for entry in TASK["reference"]["optimal_plan"]]
    plan[1]["ship"] = True
    client.reset(task_id=TASK["task_id"])
    check = output(call(client, "check_plan", plan=plan))
    assert check["feasible"] is False and any("unknown ship" in p for p in check["entry_problems"])
    submit = call(client, "submit_plan", plan=plan)
    assert submit.reward == grade(TASK, plan)["reward"] < 0.2
    assert output(submit)["reward"] == submit.reward


# ------------------------------------------------------------------------------------------------------ reset


def test_reset_by_split_and_index(client: Any) -> None:
    assert client.reset(split="eval", index=3).observation.metadata["task_id"] == EVAL[3]["task_id"]
    assert client.reset(split="eval", index=-1).observation.metadata["task_id"] == EVAL[-1]["task_id"]
    assert client.reset(index=0).observation.metadata["task_id"] == EVAL[0]["task_id"]  # no train split here


@pytest.mark.parametrize(("seed", "index"), [(0, 24), (1, 8), (2, 3), (3, 15), (4, 15), (5, 39), (6, 36),
                                             (7, 20), (8, 14), (9, 29), (42, 40), (12345, 26)])
def test_reset_by_seed(client: Any, seed: int, index: int) -> None:
    assert client.reset(split="eval", seed=seed).observation.metadata["task_id"] == EVAL[index]["task_id"]


def test_bad_resets_fail_and_keep_the_running_episode(client: Any) -> None:
    episode = client.reset(task_id=TASK["task_id"]).observation.metadata["episode_id"]
    for kwargs, reason in (({"task_id": "no-such-task"}, "unknown task"), ({"split": "nope"}, "unknown split"),
                           ({"split": "eval", "index": 50}, "out of range"),
                           ({"split": "eval", "index": "x"}, "whole number")):
        with pytest.raises(RuntimeError, match=reason):
            client.reset(**kwargs)
    assert client.state().episode_id == episode
    assert output(call(client, "check_plan", plan=TASK["reference"]["naive_plan"]))["cost"] == 658


def test_reset_ignores_unknown_arguments(client: Any) -> None:
    reset = client.reset(task_id=TASK["task_id"], temperature=0.3, model="x")
    assert reset.observation.metadata["task_id"] == TASK["task_id"]


def test_state_over_the_websocket(env_url: str) -> None:
    ws_url = env_url.replace("http://", "ws://") + "/ws"
    with websockets.sync.client.connect(ws_url) as ws:
        def send(message: dict) -> dict:
            ws.send(json.dumps(message))
            return json.loads(ws.recv())

        send({"type": "reset", "data": {"task_id": TASK["task_id"], "episode_id": "state-probe"}})
        send({"type": "step", "data": {"type": "call_tool", "tool_name": "check_plan",
                                       "arguments": {"plan": TASK["reference"]["naive_plan"]}}})
        state = send({"type": "state"})["data"]
        assert state == {"episode_id": "state-probe", "step_count": 1, "task_id": TASK["task_id"], "split": "eval",
                         "checks_used": 1, "tool_calls": 1, "done": False, "reward": None, "grade": None}
        send({"type": "step", "data": {"type": "call_tool", "tool_name": "submit_plan",
                                       "arguments": {"plan": TASK["reference"]["optimal_plan"]}}})
        state = send({"type": "state"})["data"]
        assert (state["done"], state["reward"], state["tool_calls"]) == (True, 1.0, 2)
        assert state["grade"]["cost"] == 87


# ------------------------------------------------------------------------------------------------ concurrency


def play(env_url: str, index: int) -> dict:
    """One whole episode on eval task `index`: check the naive plan, then submit the optimum or the naive plan."""
    task = EVAL[index]
    reference = task["reference"]
    with MCPToolClient(env_url).sync() as client:
        metadata = client.reset(task_id=task["task_id"], episode_id=f"concurrent-{index}").observation.metadata
        check = output(call(client, "check_plan", plan=reference["naive_plan"]))
        plan = reference["optimal_plan"] if index % 2 == 0 else reference["naive_plan"]
        submit = call(client, "submit_plan", plan=plan)
        return {"task_id": metadata["task_id"], "episode_id": client.state().episode_id, "check_cost": check["cost"],
                "reward": submit.reward, "grade": submit.observation.metadata["grade"]}


def test_32_concurrent_sessions_do_not_cross_talk(env_url: str) -> None:
    with ThreadPoolExecutor(max_workers=32) as pool:
        results = list(pool.map(lambda i: play(env_url, i), range(32)))
    for index, result in enumerate(results):
        task = EVAL[index]
        reference = task["reference"]
        assert result["task_id"] == task["task_id"] and result["episode_id"] == f"concurrent-{index}"
        assert result["check_cost"] == reference["naive_cost"]
        if index % 2 == 0:
            assert result["reward"] == 1.0 and result["grade"]["cost"] == reference["optimal_cost"]
        else:
            expected = grade(task, reference["naive_plan"])
            assert result["reward"] == expected["reward"] and result["grade"] == expected
    assert len({r["grade"]["naive_cost"] for r in results}) > 20  # 32 different tasks really were played


# --------------------------------------------------------------------------------------- the in-process paths


def test_sync_step_path_does_the_same_bookkeeping() -> None:
    env = BerthEnvironment()
    try:
        env.reset(task_id=TASK["task_id"])
        listed = env.step(ListToolsAction())
        assert [tool.name for tool in listed.tools] == ["get_situation", "check_plan", "submit_plan"]
        check = env.step(CallToolAction(tool_name="check_plan", arguments={"plan": TASK["reference"]["naive_plan"]}))
        assert check.reward == 0.0 and not check.done
        submit = env.step(CallToolAction(tool_name="submit_plan",
                                         arguments={"plan": TASK["reference"]["optimal_plan"]}))
        assert submit.reward == 1.0 and submit.done
        assert submit.metadata["rubric"] == {"ships_clean": 1.0, "cost_quality": 1.0}
        state = env.state
        assert (state.tool_calls, state.step_count, state.checks_used) == (2, 2, 1)  # list_tools is not counted
    finally:
        env.close()


def test_other_actions_are_refused_without_counting() -> None:
    from openenv.core.env_server.types import Action

    env = BerthEnvironment()
    try:
        env.reset(task_id=TASK["task_id"])
        observation = env.step(Action())
        assert observation.reward == 0.0 and "MCP tools" in observation.metadata["error"]
        assert env.state.tool_calls == 0
    finally:
        env.close()


def test_limits_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BERTH_MAX_CHECKS", "2")
    monkeypatch.setenv("BERTH_MAX_TOOL_CALLS", "3")
    env = BerthEnvironment()
    try:
        metadata = env.reset(task_id=TASK["task_id"]).metadata
        assert (metadata["max_checks"], metadata["max_tool_calls"]) == (2, 3)
        assert "You have 2 checks" in metadata["instructions"]
        steps = [env.step(CallToolAction(tool_name="check_plan", arguments={"plan": "[]"})) for _ in range(3)]
        assert "no checks left" in steps[2].result.content[0].text
        assert steps[2].done and steps[2].metadata["end_reason"] == "tool_call_limit"
    finally:
        env.close()
    monkeypatch.setenv("BERTH_MAX_CHECKS", "ten")
    with pytest.raises(ValueError, match="BERTH_MAX_CHECKS"):
        BerthEnvironment()
