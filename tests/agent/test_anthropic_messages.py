"""The loop with the real `anthropic` SDK against a local Messages API peer and the embedded berth server."""

from __future__ import annotations

import json

import pytest

from testkit.episodes import count, joined, play, types
from testkit.peers import (
    AnthropicPeer,
    DieAfter,
    Thinking,
    ToolCall,
    Turn,
    Usage,
    rate_limited,
    thinking_signature,
)
from testkit.tasks import naive_args, optimal_args, task

MODEL = "anthropic:claude-test"


@pytest.fixture
def peer(monkeypatch):
    with AnthropicPeer() as peer:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", peer.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
        yield peer
        assert not peer.problems


def test_full_episode_streams_tokens_keeps_thinking_and_gets_the_servers_reward(peer, env_url):
    reasoning = "Ship 5 arrives late; the rest fit. Let me read the situation first."
    peer.push(
        Turn(Thinking(reasoning), "Reading the situation.", ToolCall("get_situation", "{}"),
             usage=Usage(input_tokens=900, output_tokens=40, cache_read_input_tokens=300)),
        Turn(Thinking("Draft: the naive plan."), ToolCall("check_plan", naive_args()),
             usage=Usage(input_tokens=1500, output_tokens=60)),
        Turn("Submitting the optimum.", ToolCall("submit_plan", optimal_args()),
             usage=Usage(input_tokens=2000, output_tokens=30)),
    )
    events, record = play(MODEL, env_url)

    assert record["end_reason"] == "submitted" and record["reward"] == 1.0 and not record["errors"]
    assert record["final"]["grade"]["cost"] == task()["reference"]["optimal_cost"]
    assert record["final"]["rubric"] == {"ships_clean": 1.0, "cost_quality": 1.0}
    assert [s["tool"] for s in record["steps"]] == ["check_plan", "submit_plan"]
    assert record["steps"][0]["result"]["cost"] == task()["reference"]["naive_cost"]
    assert record["usage"] == {"input_tokens": 900 + 300 + 1500 + 2000, "output_tokens": 130}
    assert record["turns"] == 3
    # Token-level deltas: the peer sends 4 characters per delta.
    assert joined(events, "reasoning_delta", 1) == reasoning
    assert count([e for e in events if e.get("turn") == 1], "reasoning_delta") == -(-len(reasoning) // 4)
    assert joined(events, "text_delta", 1) == "Reading the situation."
    assert json.loads(joined(events, "tool_args_delta", 2)) == json.loads(naive_args())
    assert types(events)[:9] == ["episode_started", "turn_started", "reasoning_delta", "text_delta",
                                 "tool_args_delta", "turn_finished", "tool_call", "tool_result", "turn_started"]
    assert [e["seq"] for e in events] == list(range(len(events)))
    # The thinking block goes back with its signature (the peer refuses a forged one), tool results come first
    # in the next user message, and each tool result tells the model how many turns are left.
    second = peer.requests[1].body
    assistant = second["messages"][1]
    assert assistant["content"][0] == {"type": "thinking", "thinking": reasoning,
                                       "signature": thinking_signature(reasoning)}
    answer = second["messages"][2]["content"][0]
    assert answer["type"] == "tool_result" and "11 turns left" in answer["content"][0]["text"]
    assert record["messages"][2]["reasoning"] == reasoning
    assert record["messages"][2]["tool_calls"][0]["name"] == "get_situation"


def test_rate_limit_is_retried_with_a_visible_note(peer, env_url):
    peer.push(rate_limited(retry_after_ms=20), Turn(ToolCall("submit_plan", optimal_args())))
    events, record = play(MODEL, env_url)
    assert record["reward"] == 1.0 and not record["errors"]
    notes = [e for e in events if e["type"] == "note" and e["kind"] == "retry"]
    assert len(notes) == 1 and "429" in notes[0]["text"]
    assert len(peer.requests) == 2


def test_cut_off_turn_hands_its_reasoning_tail_back_as_notes(peer, env_url):
    thought = "I was placing ship 9 at section 6 when " * 5
    peer.push(Turn(Thinking(thought), stop="max_tokens"), Turn(ToolCall("submit_plan", optimal_args())))
    events, record = play(MODEL, env_url)
    assert record["reward"] == 1.0
    assert [e["kind"] for e in events if e["type"] == "note"] == ["cutoff"]
    sent = json.dumps(peer.requests[1].body["messages"][-1])
    assert "cut off" in sent and thought.strip()[-40:] in sent
    assert record["messages"][2]["stop"] == "max_tokens"


def test_stream_that_dies_halfway_is_recorded_and_the_rollout_kept(peer, env_url):
    peer.push(Turn(ToolCall("get_situation", "{}")),
              DieAfter(6, turn=Turn(Thinking("long thought " * 20), ToolCall("check_plan", naive_args()))))
    events, record = play(MODEL, env_url)
    assert record["end_reason"] == "error" and record["reward"] == 0.0
    assert len(record["errors"]) == 1 and "Error" in record["errors"][0]
    assert record["turns"] == 1 and record["messages"][-1]["role"] == "tool"  # the first turn is kept
    assert events[-1]["type"] == "error" and events[-1]["message"] == record["errors"][0]


def test_malformed_tool_json_is_answered_locally_without_reaching_the_server(peer, env_url):
    peer.push(Turn(ToolCall("check_plan", '{"plan": [{"ship": 0,')),
              Turn(ToolCall("submit_plan", optimal_args())))
    events, record = play(MODEL, env_url)
    assert record["reward"] == 1.0
    assert [s["tool"] for s in record["steps"]] == ["submit_plan"]  # no check was spent
    call = next(e for e in events if e["type"] == "tool_call")
    assert call["error"] and "not valid JSON" in call["error"]
    result = next(e for e in events if e["type"] == "tool_result")
    assert result["local"] and "not valid JSON" in result["data"]["error"]
    answer = peer.requests[1].body["messages"][-1]["content"][0]
    assert answer["type"] == "tool_result" and "not valid JSON" in answer["content"][0]["text"]
    assert record["messages"][2]["tool_calls"][0]["arguments"] == '{"plan": [{"ship": 0,'


def test_a_key_passed_in_never_reaches_the_record_events_or_errors(env_url, monkeypatch):
    secret = "sk-ant-api03-SECRET-never-show-me"
    with AnthropicPeer([Turn("hello")], api_key="a-different-key") as peer:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", peer.url)
        monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
        events, record = play(MODEL, env_url, keys={"anthropic": secret})
        assert peer.requests[0].headers.get("authorization", "").endswith(secret)  # it was used...
    assert record["end_reason"] == "error" and "401" in record["errors"][0]
    everything = json.dumps(events) + json.dumps(record)
    assert "SECRET" not in everything  # ...and it is nowhere to be seen


def test_missing_key_fails_before_the_episode_with_a_clear_message(env_url, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    events, record = play(MODEL, env_url)
    assert record["end_reason"] == "error"
    assert "needs an API key" in record["errors"][0] and "ANTHROPIC_API_KEY" in record["errors"][0]
    assert types(events) == ["error"]
