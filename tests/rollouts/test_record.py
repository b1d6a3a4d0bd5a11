"""One Record: made from an episode's events and giving them back, its turns and drafts addressable, and a bad tool
call showing the same error live and replayed."""

from __future__ import annotations

import pytest

from agent.loop import stream_episode
from agent.request import EpisodeRequest
from rollouts.record import Record
from testkit.peers import ChatPeer, Text, ToolCall, Turn
from testkit.tasks import optimal_args
from viewer.chat import chat_messages
from viewer.replay import record_messages

TASK_ID = "dock-24B-w06x1-busy-0"
BROKEN_JSON = '{"plan": [{"ship": 1,'
NOT_AN_OBJECT = "[1, 2, 3]"


@pytest.fixture(scope="module")
def live_events(env_url: str) -> list[dict]:
    """A model that sends broken JSON, then a JSON list, then a check and a submit of the optimal plan."""
    script = [Turn(Text("Trying a draft."), ToolCall("check_plan", BROKEN_JSON)),
              Turn(ToolCall("check_plan", NOT_AN_OBJECT)),
              Turn(ToolCall("check_plan", optimal_args())),
              Turn(ToolCall("submit_plan", optimal_args()))]
    with pytest.MonkeyPatch.context() as patch, ChatPeer(script) as peer:
        patch.setenv("HF_ROUTER_URL", peer.url + "/v1")
        patch.setenv("HF_TOKEN", "hf_test")
        return list(stream_episode(EpisodeRequest.of("hf:org/planner", TASK_ID, env_url=env_url, max_turns=6)))


def call_errors(events: list[dict]) -> list[str | None]:
    return [e["error"] for e in events if e["type"] == "tool_call"]


def test_a_bad_tool_call_gives_the_same_error_live_and_replayed(live_events):
    record = Record.from_events(live_events).data
    assert record["end_reason"] == "submitted"
    live = call_errors(live_events)
    assert live[0] is not None and "not valid JSON" in live[0]
    assert live[1] is not None and "must be a JSON object" in live[1]
    assert live[2:] == [None, None]
    replayed = call_errors(Record(record).events())  # the stored record keeps no errors: decided again
    assert replayed == live
    # and the words a visitor reads: the chat of the live run and of its replay say the same thing
    def not_sent(messages: list) -> list[str]:
        return [str(m.content) for m in messages if "Not sent to the server" in str(m.content)]
    shown_live, shown_replayed = not_sent(chat_messages(live_events)), not_sent(record_messages(record))
    assert len(shown_live) == 2 and shown_replayed == shown_live


def test_a_call_after_the_end_gives_the_same_error_live_and_replayed(env_url, monkeypatch):
    # The submit ends the episode; the check sent after it in the same turn never reaches the server.
    script = [Turn(ToolCall("submit_plan", optimal_args()), ToolCall("check_plan", optimal_args()))]
    with ChatPeer(script) as peer:
        monkeypatch.setenv("HF_ROUTER_URL", peer.url + "/v1")
        monkeypatch.setenv("HF_TOKEN", "hf_test")
        live = list(stream_episode(EpisodeRequest.of("hf:org/planner", TASK_ID, env_url=env_url, max_turns=3)))
    assert call_errors(live) == [None, "the episode is over"]
    replayed = Record(Record.from_events(live).data).events()
    assert call_errors(replayed) == call_errors(live)
    assert [e["local"] for e in replayed if e["type"] == "tool_result"] == [False, True]


def test_a_record_made_from_events_gives_them_back(live_events):
    assert Record.from_events(live_events).events() == live_events
    # a stored record replays: the same steps in the same order, without the live stamps
    stored = Record(Record.from_events(live_events).data)
    replayed = [e["step"] for e in stored.events() if e["type"] == "tool_result" and e["step"]]
    assert replayed == stored.data["steps"]


def test_a_running_episode_is_read_from_its_events_so_far(live_events):
    # up to the answer of the first accepted check: the episode is still running
    first_step = next(i for i, e in enumerate(live_events) if e["type"] == "tool_result" and e["step"])
    running = Record.from_events(live_events[:first_step + 1])
    assert running.model == "hf:org/planner" and running.task_id == TASK_ID
    assert running.end_reason == "" and not running.submitted
    assert [d.tool for d in running.drafts] == ["check_plan"]
    assert running.draft(1).accepted and running.draft(1).feasible is True
    assert running.turns == 3 and running.max_turns == 6  # two unreadable calls took a turn each, the check one
    last_turn = [e for e in live_events[:first_step] if e["type"] == "turn_finished"][-1]
    assert running.usage == last_turn["usage_total"] and running.usage["output_tokens"] > 0


def test_turns_and_drafts_are_addressable_with_what_the_server_answered(live_events):
    record = Record.from_events(live_events)
    assert [d.index for d in record.drafts] == [1, 2]  # the two unreadable calls never reached the server
    check, submit = record.draft(1), record.draft(2)
    assert (check.tool, check.turn, check.accepted) == ("check_plan", 3, True)
    assert check.feasible is True and check.violations == [] and isinstance(check.cost, int)
    assert (submit.tool, submit.turn, submit.accepted) == ("submit_plan", 4, False)
    assert submit.reward == record.reward == 1.0 and submit.cost == record.cost == check.cost
    assert submit.plan == record.final_plan
    first = record.turn(1)
    assert first.number == 1 and first.text == "Trying a draft." and first.drafts == []
    assert [c["arguments"] for c in first.calls] == [BROKEN_JSON]
    assert record.turn(3).drafts == [check] and record.turn(4).drafts == [submit]
    assert len(record.played_turns) == record.turns == 4
    with pytest.raises(IndexError, match="no draft 3"):
        record.draft(3)
    with pytest.raises(IndexError, match="no turn 0"):
        record.turn(0)


def test_a_record_without_steps_has_its_submitted_plan_as_its_one_draft():
    record = Record({"turns": 7, "final": {"submitted": True, "plan": [{"ship": 1}], "grade": {"cost": 5}},
                     "messages": []})
    (draft,) = record.drafts
    assert (draft.index, draft.turn, draft.tool, draft.plan, draft.answer) == (1, 7, "submit_plan", [{"ship": 1}], {})


def test_the_plans_to_step_through_from_events_and_from_a_record():
    steps = [{"turn": 1, "tool": "check_plan", "plan": [], "result": {"feasible": False}},
             {"turn": 2, "tool": "submit_plan", "plan": [], "result": {"submitted": True}}]
    events = [{"type": "turn_started", "turn": 1},
              {"type": "tool_result", "name": "get_situation", "step": None},
              {"type": "tool_result", "name": "check_plan", "step": steps[0]},
              {"type": "tool_result", "name": "submit_plan", "step": steps[1]}]
    assert Record.from_events(events).plan_steps == steps == Record({"steps": steps}).plan_steps
    assert [d.tool for d in Record.from_events(events).drafts] == ["check_plan", "submit_plan"]
    assert Record({"steps": None}).plan_steps == []
