"""The Run tab's API through `gradio_client` against the launched app (embedded berth server, local peers)."""

from __future__ import annotations

import time

import pytest
from gradio_client import Client

from testkit.peers import ChatPeer, Text, ToolCall, Turn
from testkit.tasks import TASK_ID, optimal_args, slow_then_optimal


@pytest.fixture
def slow_model(monkeypatch):
    """A vLLM-style peer playing `slow_then_optimal` for every episode."""
    with ChatPeer(slow_then_optimal) as peer:
        monkeypatch.setenv("VLLM_BASE_URL", peer.url + "/v1")
        yield peer


def wait_for(predicate, timeout: float = 30.0, every: float = 0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError("timed out")


def test_baseline_episode_streams_updates_and_ends_with_the_servers_reward(arena):
    from berth_env import grade, greedy_plan, load_pack

    client = Client(arena.url, verbose=False)
    updates = list(client.submit("baseline:greedy", TASK_ID, 12, 24000, "embedded", api_name="/run"))
    assert len(updates) >= 4
    assert all(u["episode_id"] == updates[0]["episode_id"] for u in updates)
    assert [u["state"] for u in updates].count("finished") == 1 and updates[-1]["state"] == "finished"
    expected = grade(load_pack().get(TASK_ID), greedy_plan(load_pack().get(TASK_ID)))["reward"]
    assert updates[-1]["reward"] == expected and updates[-1]["end_reason"] == "submitted"
    assert updates[-1]["saved"] is True
    record = client.predict(updates[-1]["episode_id"], api_name="/rollout")
    assert record["reward"] == expected and record["source"] == "space"
    assert arena.ctx.store.load(record["episode_id"])["reward"] == expected  # saved before the UI said so


def slow_second_turn(request: dict) -> Turn:
    """A chat-peer script: the first turn reads the situation at once, the second thinks for about 20 s."""
    if not any(m.get("role") == "tool" for m in request["messages"]):
        return Turn(ToolCall("get_situation"))
    return Turn(Text("weighing the berths " * 200), ToolCall("submit_plan", optimal_args()), chunk=6, delay=0.03)


def test_stop_keeps_a_stopped_rollout_once_its_model_took_a_turn(arena, monkeypatch):
    client = Client(arena.url, verbose=False)
    with ChatPeer(slow_second_turn) as peer:
        monkeypatch.setenv("VLLM_BASE_URL", peer.url + "/v1")
        job = client.submit("vllm:slow", TASK_ID, 12, 24000, "embedded", api_name="/run")
        episode_id = wait_for(lambda: job.outputs() and job.outputs()[0]["episode_id"])
        run = arena.ctx.registry.get(episode_id)
        wait_for(lambda: any(e["type"] == "turn_started" and e["turn"] == 2 for e in list(run.events)))
        assert client.predict(episode_id, api_name="/stop") is True
        updates = list(job)
    assert updates[-1]["end_reason"] == "stopped" and updates[-1]["saved"] is True
    record = wait_for(lambda: arena.ctx.store.load(episode_id))
    assert record["end_reason"] == "stopped" and record["turns"] == 1 and not record["errors"]
    assert client.predict(episode_id, api_name="/stop") is False  # already over


def test_a_stop_before_the_models_first_answer_keeps_nothing(arena, slow_model):
    """Nothing was played, so nothing is a rollout: the visitor is told, nothing is saved."""
    client = Client(arena.url, verbose=False)
    before = len(arena.ctx.store.rows())
    job = client.submit("vllm:slow", TASK_ID, 12, 24000, "embedded", api_name="/run")
    assert wait_for(lambda: job.outputs() and job.outputs()[-1]["events"] > 5)
    episode_id = job.outputs()[0]["episode_id"]
    assert client.predict(episode_id, api_name="/stop") is True
    updates = list(job)
    assert updates[-1]["end_reason"] == "stopped" and updates[-1]["saved"] is False
    assert "ended before its first turn" in arena.ctx.registry.get(episode_id).save_error
    assert arena.ctx.store.load(episode_id) is None and len(arena.ctx.store.rows()) == before


def test_closing_the_client_does_not_kill_the_episode(arena, slow_model):
    client = Client(arena.url, verbose=False)
    job = client.submit("vllm:slow", TASK_ID, 12, 24000, "embedded", api_name="/run")
    wait_for(lambda: job.outputs())
    episode_id = job.outputs()[0]["episode_id"]
    job.cancel()
    client.close()
    record = wait_for(lambda: arena.ctx.store.load(episode_id), timeout=60)
    assert record["end_reason"] == "submitted" and record["reward"] == 1.0


def test_a_session_may_not_run_more_than_its_share(arena, slow_model):
    client = Client(arena.url, verbose=False)
    jobs = [client.submit("vllm:slow", TASK_ID, 12, 24000, "embedded", api_name="/run") for _ in range(2)]
    for job in jobs:
        wait_for(lambda job=job: job.outputs())
    with pytest.raises(Exception, match="already have 2 episodes running"):
        client.predict("baseline:greedy", TASK_ID, 12, 24000, "embedded", api_name="/run")
    for job in jobs:
        client.predict(job.outputs()[0]["episode_id"], api_name="/stop")
        list(job)


@pytest.mark.parametrize("model, message", [
    ("gpt-without-provider", "must start with one of"),
    ("anthropic:claude-x", "needs an Anthropic API key"),
])
def test_bad_specs_and_missing_keys_get_a_clear_error(arena, monkeypatch, model, message):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    client = Client(arena.url, verbose=False)
    with pytest.raises(Exception, match=message):
        client.predict(model, TASK_ID, 12, 24000, "embedded", api_name="/run")


def test_unknown_or_malformed_rollout_ids(arena):
    client = Client(arena.url, verbose=False)
    with pytest.raises(Exception, match="malformed"):
        client.predict("../../etc/passwd", api_name="/rollout")
    with pytest.raises(Exception, match="no rollout"):
        client.predict("0123456789ab", api_name="/rollout")


def test_internal_handlers_are_not_in_the_api(arena):
    client = Client(arena.url, verbose=False)
    names = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    assert {"/run", "/rollout", "/stop"} <= names
    assert not {n for n in names if "start_run" in n or "attach" in n or "lambda" in n}
