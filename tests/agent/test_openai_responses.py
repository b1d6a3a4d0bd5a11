"""The loop with the real `openai` SDK against a local Responses API peer and the embedded berth server."""

from __future__ import annotations

import json

import pytest

from testkit.episodes import joined, play, types
from testkit.peers import ResponsesPeer, Thinking, ToolCall, Turn, Usage, encrypted_reasoning, rate_limited
from testkit.tasks import naive_args, optimal_args, task

MODEL = "openai:gpt-test@high"


@pytest.fixture
def peer(monkeypatch):
    with ResponsesPeer() as peer:
        monkeypatch.setenv("OPENAI_BASE_URL", peer.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
        yield peer
        assert not peer.problems


def test_streamed_episode_carries_encrypted_reasoning_between_turns(peer, env_url):
    summary = "The naive plan is feasible but costly; check it, then improve."
    peer.push(
        Turn(Thinking(summary), "Checking the naive plan.", ToolCall("check_plan", naive_args()),
             usage=Usage(input_tokens=1200, output_tokens=80, cache_read_input_tokens=200, reasoning_tokens=40)),
        Turn(Thinking("Now the optimum."), ToolCall("submit_plan", optimal_args()),
             usage=Usage(input_tokens=1800, output_tokens=50)),
    )
    events, record = play(MODEL, env_url)

    assert record["end_reason"] == "submitted" and record["reward"] == 1.0 and not record["errors"]
    assert record["steps"][0]["result"]["cost"] == task()["reference"]["naive_cost"]
    assert record["usage"] == {"input_tokens": 1400 + 1800, "output_tokens": 130}
    assert joined(events, "reasoning_delta", 1) == summary
    assert joined(events, "text_delta", 1) == "Checking the naive plan."
    assert json.loads(joined(events, "tool_args_delta", 1)) == json.loads(naive_args())
    assert types(events)[:7] == ["episode_started", "turn_started", "reasoning_delta", "text_delta",
                                 "tool_args_delta", "turn_finished", "tool_call"]
    first, second = peer.bodies[0], peer.bodies[1]
    assert first["store"] is False and first["stream"] is True
    assert first["reasoning"] == {"effort": "high", "summary": "auto"}
    assert "reasoning.encrypted_content" in first["include"]
    # The reasoning item returns with its encrypted content (the peer refuses it otherwise), then the
    # function call and its output with the turns-left suffix.
    reasoning_items = [i for i in second["input"] if i.get("type") == "reasoning"]
    assert [i["encrypted_content"] for i in reasoning_items] == [encrypted_reasoning(summary)]
    output = next(i for i in second["input"] if i.get("type") == "function_call_output")
    assert json.loads(output["output"].split("\n\n[")[0])["feasible"] is True
    assert output["output"].endswith("[11 turns left]")
    assert record["messages"][2]["reasoning"] == summary


def test_incomplete_response_counts_as_cut_off(peer, env_url):
    peer.push(Turn(Thinking("placing the late ships " * 10), stop="max_tokens"),
              Turn(ToolCall("submit_plan", optimal_args())))
    events, record = play(MODEL, env_url, max_tokens=500)
    assert record["reward"] == 1.0
    assert record["messages"][2]["stop"] == "incomplete"
    assert [e["kind"] for e in events if e["type"] == "note"] == ["cutoff"]
    assert peer.bodies[0]["max_output_tokens"] == 500
    notes = json.dumps(peer.bodies[1]["input"][-1])
    assert "cut off" in notes and "placing the late ships" in notes


def test_429_then_success(peer, env_url):
    peer.push(rate_limited(), rate_limited(), Turn(ToolCall("submit_plan", optimal_args())))
    events, record = play(MODEL, env_url)
    assert record["reward"] == 1.0 and not record["errors"]
    assert [e["kind"] for e in events if e["type"] == "note"] == ["retry", "retry"]


def test_two_turns_without_a_tool_call_end_the_episode(peer, env_url):
    peer.push(Turn("I think the plan is fine."), Turn("Still thinking."))
    events, record = play(MODEL, env_url)
    assert record["end_reason"] == "no_tool_call" and record["reward"] == 0.0 and record["turns"] == 2
    assert [e["kind"] for e in events if e["type"] == "note"] == ["nudge"]
    assert "did not call a tool" in json.dumps(peer.bodies[1]["input"][-1])
