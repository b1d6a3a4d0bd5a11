"""Every event the loop emits, and every event a stored record replays into, follows rollouts/events.py's types."""

from __future__ import annotations

import copy

import pytest

from agent.loop import run_episode, stream_episode
from agent.notes import CUTOFF_NOTES, CUTOFF_NUDGE, LAST_TURN, NUDGE
from agent.request import EpisodeRequest
from berth_env import load_pack
from rollouts import events as ev
from rollouts.replay import note_kind, record_events
from testkit.peers import ChatPeer, Text, Thinking, ToolCall, Turn
from testkit.records import make_records
from testkit.tasks import optimal_args

TASKS = [t["task_id"] for t in load_pack().split("eval")[:4]]


def validate_all(events: list[dict]) -> None:
    for event in events:
        ev.validate_event(event)
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert events[-1]["type"] == "episode_finished"


def notes(events: list[dict]) -> list[str]:
    return [e["kind"] for e in events if e["type"] == "note"]


def without_kinds(record: dict) -> dict:
    """The record as upstream's harness would have stored it: user notes without their kind."""
    bare = copy.deepcopy(record)
    for message in bare["messages"]:
        message.pop("kind", None)
    return bare


@pytest.fixture(scope="module")
def baseline_records(env_url: str) -> list[dict]:
    return [run_episode(EpisodeRequest.of(model, task_id, env_url=env_url)) for model in ("baseline:greedy", "baseline:naive")
            for task_id in TASKS]


def test_generated_records_replay_into_valid_events():
    records = make_records(300, seed=9)
    kinds = set()
    for record in records:
        events = record_events(record)
        validate_all(events)
        assert all("t" not in e for e in events)  # a record keeps no timestamps: none are made up
        kinds.update(notes(events))
    # testkit's kindless "Your last turn had no tool call..." notes are nudges, not last-turn reminders.
    assert "nudge" in kinds and "last_turn" not in kinds
    assert {"stopped", "wall_clock", "provider_switch"} <= kinds


def test_real_baseline_records_replay_into_valid_events(baseline_records):
    assert {r["model"] for r in baseline_records} == {"baseline:greedy", "baseline:naive"}
    for record in baseline_records:
        assert record["end_reason"] == "submitted" and not record["errors"]
        events = record_events(record)
        validate_all(events)
        results = [e for e in events if e["type"] == "tool_result"]
        assert [r["step"] for r in results if r["step"]] == record["steps"]
        assert results[-1]["done"] and results[-1]["reward"] == record["reward"]


def test_live_events_of_a_baseline_episode_validate(env_url):
    events = list(stream_episode(EpisodeRequest.of("baseline:greedy", TASKS[0], env_url=env_url)))
    validate_all(events)
    assert all(isinstance(e["t"], float) for e in events)
    assert [e["t"] for e in events] == sorted(e["t"] for e in events)
    types = {e["type"] for e in events}
    assert {"episode_started", "turn_started", "text_delta", "tool_args_delta", "tool_call", "tool_result",
            "turn_finished", "episode_finished"} <= types


def test_live_notes_and_their_replay_have_the_same_kinds_with_or_without_stored_kinds(env_url, monkeypatch):
    # A turn without a tool call (nudge), a turn cut off at the output limit (cutoff: notes and nudge), then the
    # last turn (its reminder) with the submit. Two turns in a row without a call would end the episode.
    script = [Turn(Text("Let me think about ship 5.")), Turn(ToolCall("get_situation")),
              Turn(Thinking("Ship 9 waits for the closure to end " * 8), stop="max_tokens"),
              Turn(ToolCall("submit_plan", optimal_args()))]
    with ChatPeer(script) as peer:
        monkeypatch.setenv("HF_ROUTER_URL", peer.url + "/v1")
        monkeypatch.setenv("HF_TOKEN", "hf_test")
        live = list(stream_episode(EpisodeRequest.of("hf:org/planner", "dock-24B-w06x1-busy-0", env_url=env_url,
                                                     max_turns=4)))
    validate_all(live)
    record = live[-1]["record"]
    assert record["reward"] == 1.0
    assert notes(live) == ["nudge", "cutoff", "last_turn"]
    replayed = record_events(record)
    validate_all(replayed)
    stored = notes(replayed)  # the cut-off notes are a message of their own in the record
    assert stored == ["nudge", "cutoff", "cutoff", "last_turn"]
    assert notes(record_events(without_kinds(record))) == stored


@pytest.mark.parametrize("text, place, kind", [
    (NUDGE, {"after_toolless_turn": True}, "nudge"),
    (CUTOFF_NUDGE, {"after_toolless_turn": True, "after_cut_off_turn": True}, "cutoff"),
    (CUTOFF_NOTES.format(notes="ship 4 first"), {}, "cutoff"),
    (LAST_TURN, {"before_last_turn": True}, "last_turn"),
    ("This is your last turn: submit now.", {}, "last_turn"),
    # "last turn" here means the previous one: the words say nudge wherever it stands.
    ("Your last turn had no tool call. Test a plan with check_plan.", {"before_last_turn": True}, "nudge"),
    # Words we do not know: the place decides, and a note nothing gives away is a nudge.
    ("Please continue.", {"after_toolless_turn": True, "after_cut_off_turn": True}, "cutoff"),
    ("Please continue.", {"before_last_turn": True}, "last_turn"),
    ("Please continue.", {}, "nudge"),
])
def test_note_kinds_are_read_from_words_then_place(text, place, kind):
    assert note_kind(text, **place) == kind


@pytest.mark.parametrize("change, field", [
    (lambda e: e.pop("seq"), "seq"),
    (lambda e: e.update(turn="3"), "turn"),
    (lambda e: e.update(reward="1.0"), "reward"),
    (lambda e: e.update(surprise=1), "surprise"),
    (lambda e: e.update(type="tool_outcome"), "type"),
])
def test_a_malformed_event_is_refused_naming_the_field(change, field):
    event = ev.tool_result(2, "c1", "check_plan", "{}", data={}, reward=0.5)
    event.update(seq=4, t=1.25)
    ev.validate_event(event)
    change(event)
    with pytest.raises(ev.EventError, match=field):
        ev.validate_event(event)


def test_a_note_of_an_unknown_kind_is_refused_where_it_is_made():
    with pytest.raises(ValueError, match="message"):
        ev.note(1, "message", "hello")  # type: ignore[arg-type]
    bad = {"type": "note", "turn": 1, "kind": "message", "text": "hello", "seq": 0}
    with pytest.raises(ev.EventError, match=r"note\.kind"):
        ev.validate_event(bad)
