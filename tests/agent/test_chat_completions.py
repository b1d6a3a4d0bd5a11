"""The loop with the real `openai` SDK against a local chat-completions peer (`hf:` and `vllm:`)."""

from __future__ import annotations

import json
import threading

import pytest

from agent.loop import stream_episode
from agent.providers.chat_completions import ThinkSplitter
from agent.request import EpisodeRequest
from testkit.episodes import count, joined, play, types
from testkit.peers import ChatPeer, DieAfter, Error, Text, Thinking, ToolCall, Turn, Usage, always
from testkit.tasks import naive_args, optimal_args

HF = "hf:org/planner"


@pytest.mark.parametrize("style", ["reasoning_content", "reasoning", "think_tags"])
def test_reasoning_arrives_in_every_style_and_stays_out_of_the_text(router_peer, env_url, style):
    thought = "Ship 16 is unscheduled; keep it at the first free section."
    router_peer.push(Turn(Thinking(thought), "Checking.", ToolCall("check_plan", naive_args()), chat_reasoning=style,
                   usage=Usage(input_tokens=700, output_tokens=90)),
              Turn(ToolCall("submit_plan", optimal_args())))
    events, record = play(HF, env_url)
    assert record["reward"] == 1.0 and record["end_reason"] == "submitted"
    assert joined(events, "reasoning_delta", 1) == thought
    assert joined(events, "text_delta", 1) == "Checking."
    assert record["messages"][2]["reasoning"] == thought and record["messages"][2]["content"] == "Checking."
    assert count(events, "reasoning_delta") > 5  # token by token, not in one piece
    assert record["usage"]["input_tokens"] >= 700
    first = router_peer.bodies[0]
    assert first["stream"] is True and first["stream_options"] == {"include_usage": True}
    assert first["model"] == "org/planner" and first["max_tokens"] == 24000
    tool_message = router_peer.bodies[1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["content"].endswith("[11 turns left]")


def test_a_500_moves_hf_to_the_next_provider_and_records_the_switch(env_url, monkeypatch):
    models = {"org/planner:provA": always(Error(500, "upstream exploded")),
              "org/planner:provB": [Turn(ToolCall("get_situation", "{}")),
                                    Turn(ToolCall("submit_plan", optimal_args()))]}
    with ChatPeer(models=models) as peer:
        monkeypatch.setenv("HF_ROUTER_URL", peer.url + "/v1")
        events, record = play("hf:org/planner:provA|provB", env_url, keys={"hf": "hf_key_for_this_run"})
    assert record["reward"] == 1.0 and not record["errors"]
    assert len(record["provider_switches"]) == 1
    assert record["provider_switches"][0].startswith("org/planner:provA -> org/planner:provB (500")
    assert [e["kind"] for e in events if e["type"] == "note"] == ["provider_switch"]
    assert [b["model"] for b in peer.bodies] == ["org/planner:provA", "org/planner:provB", "org/planner:provB"]


def test_a_429_is_waited_out_not_treated_as_a_rejection(env_url, monkeypatch):
    models = {"org/planner:provA": [Error(429, headers={"retry-after-ms": "10"}),
                                    Turn(ToolCall("submit_plan", optimal_args()))],
              "org/planner:provB": always(Error(500))}
    with ChatPeer(models=models) as peer:
        monkeypatch.setenv("HF_ROUTER_URL", peer.url + "/v1")
        monkeypatch.setenv("HF_TOKEN", "x")
        events, record = play("hf:org/planner:provA|provB", env_url)
    assert record["reward"] == 1.0 and "provider_switches" not in record
    assert [e["kind"] for e in events if e["type"] == "note"] == ["retry"]


def test_the_harness_caps_a_provider_that_ignores_max_tokens(router_peer, env_url):
    router_peer.push(Turn(Text("ship 3 at section 9? "), endless=True, chunk=50),
              Turn(ToolCall("submit_plan", optimal_args())))
    _events, record = play(HF, env_url, max_tokens=200)
    assert record["reward"] == 1.0
    assert record["messages"][2]["stop"] == "length (harness cap)"
    assert 1000 <= len(record["messages"][2]["content"]) <= 1000 + 50  # 5 characters per token
    assert router_peer.requests[0].wait(5) and router_peer.requests[0].client_closed


def test_malformed_and_non_object_arguments_never_reach_the_server(router_peer, env_url):
    router_peer.push(Turn(ToolCall("check_plan", '{"plan": [{"ship": 0, "berth_hour": }]}'),
                   ToolCall("check_plan", '[1, 2, 3]')),
              Turn(ToolCall("submit_plan", optimal_args())))
    events, record = play(HF, env_url)
    assert record["reward"] == 1.0 and [s["tool"] for s in record["steps"]] == ["submit_plan"]
    errors = [e["error"] for e in events if e["type"] == "tool_call" and e["error"]]
    assert "not valid JSON" in errors[0] and "must be a JSON object" in errors[1]
    replies = [m for m in router_peer.bodies[1]["messages"] if m["role"] == "tool"]
    assert len(replies) == 2 and all("error" in json.loads(m["content"].split("\n\n[")[0]) for m in replies)


def test_calls_after_the_submit_in_the_same_turn_are_told_the_episode_is_over(router_peer, env_url):
    router_peer.push(Turn(ToolCall("submit_plan", optimal_args()), ToolCall("check_plan", naive_args())))
    events, record = play(HF, env_url)
    assert record["reward"] == 1.0 and len(record["steps"]) == 1
    last = [e for e in events if e["type"] == "tool_result"][-1]
    assert last["local"] and last["data"] == {"error": "the episode is over"}


def test_tool_call_limit_ends_the_episode_with_zero(router_peer, env_url):
    router_peer.push(Turn(*[ToolCall("get_situation", "{}") for _ in range(25)]))
    events, record = play(HF, env_url)
    assert record["end_reason"] == "tool_call_limit" and record["reward"] == 0.0
    results = [e for e in events if e["type"] == "tool_result"]
    assert results[23]["done"] and not results[23]["local"] and results[24]["local"]


def test_last_turn_asks_for_a_submission(router_peer, env_url):
    router_peer.push(Turn(ToolCall("get_situation", "{}")), Turn(ToolCall("submit_plan", optimal_args())))
    events, record = play(HF, env_url, max_turns=2)
    assert record["reward"] == 1.0
    assert [e["kind"] for e in events if e["type"] == "note"] == ["last_turn"]
    assert "last turn" in router_peer.bodies[1]["messages"][-1]["content"]


def test_running_out_of_turns_ends_as_turn_limit(router_peer, env_url):
    router_peer.push(*[Turn(ToolCall("get_situation", "{}")) for _ in range(3)])
    _events, record = play(HF, env_url, max_turns=3)
    assert record["end_reason"] == "turn_limit" and record["turns"] == 3 and record["reward"] == 0.0


def test_stop_ends_a_streaming_turn_at_once_and_keeps_the_rollout(router_peer, env_url):
    stop = threading.Event()
    router_peer.push(Turn(ToolCall("get_situation", "{}")),
              Turn(Text("thinking about ship 4 " * 200), chunk=10, delay=0.02))
    events = []

    for event in stream_episode(EpisodeRequest.of(HF, "dock-24B-w06x1-busy-0", env_url=env_url), stop=stop):
        events.append(event)
        if event["type"] == "text_delta" and event["turn"] == 2:
            stop.set()
    record = events[-1]["record"]
    assert record["end_reason"] == "stopped" and record["turns"] == 1 and not record["errors"]
    assert count(events, "text_delta") < 20  # it did not wait for the 400-delta answer to finish
    assert [e["kind"] for e in events if e["type"] == "note"] == ["stopped"]
    assert router_peer.requests[1].wait(5) and router_peer.requests[1].client_closed


def test_wall_clock_limit(router_peer, env_url):
    router_peer.push(Turn(Text("slow " * 200), chunk=5, delay=0.05))
    _events, record = play(HF, env_url, wall_clock_s=1.0)
    assert record["end_reason"] == "wall_clock" and record["seconds"] < 5


def test_dropped_stream_after_a_switch_is_an_error_not_a_hang(router_peer, env_url):
    router_peer.push(DieAfter(3, turn=Turn(Text("partial answer that never ends"))))
    events, record = play(HF, env_url)
    assert record["end_reason"] == "error" and "APIConnectionError" in record["errors"][0]
    assert types(events)[-1] == "error"


def test_vllm_uses_its_base_url(env_url, monkeypatch):
    with ChatPeer([Turn(ToolCall("submit_plan", optimal_args()))]) as peer:
        monkeypatch.setenv("VLLM_BASE_URL", peer.url + "/v1")
        monkeypatch.delenv("VLLM_API_KEY", raising=False)
        _events, record = play("vllm:local-model", env_url)
    assert record["reward"] == 1.0 and peer.bodies[0]["model"] == "local-model"


def test_vllm_without_a_base_url_fails_clearly(env_url, monkeypatch):
    monkeypatch.delenv("VLLM_BASE_URL", raising=False)
    _, record = play("vllm:local-model", env_url)
    assert record["end_reason"] == "error" and "VLLM_BASE_URL" in record["errors"][0]


@pytest.mark.parametrize("chunks, text, reasoning", [
    (["<think>abc</think>hello"], "hello", "abc"),
    (["<thi", "nk>a", "bc</th", "ink>hel", "lo"], "hello", "abc"),
    (["no tags <", "b>bold</b>"], "no tags <b>bold</b>", ""),
    (["<think>unfinished"], "", "unfinished"),
])
def test_think_tags_split_across_chunks(chunks, text, reasoning):
    splitter = ThinkSplitter()
    parts = [p for chunk in chunks for p in splitter.feed(chunk)] + splitter.flush()
    assert "".join(p for k, p in parts if k == "text") == text
    assert "".join(p for k, p in parts if k == "reasoning") == reasoning


def test_a_length_finish_hands_the_reasoning_tail_back(router_peer, env_url):
    thought = "Ship 9 cannot take section 6 before hour 120 because " * 6
    router_peer.push(Turn(Thinking(thought), stop="max_tokens"), Turn(ToolCall("submit_plan", optimal_args())))
    events, record = play(HF, env_url)
    assert record["reward"] == 1.0 and record["messages"][2]["stop"] == "length"
    assert [e["kind"] for e in events if e["type"] == "note"] == ["cutoff"]
    # The cut-off turn's empty assistant message carries the notes; the nudge follows as the user.
    assistant, nudge = router_peer.bodies[1]["messages"][-2:]
    assert assistant["role"] == "assistant" and thought.strip()[-40:] in assistant["content"]
    assert nudge["role"] == "user" and "ran out of output tokens" in nudge["content"]
