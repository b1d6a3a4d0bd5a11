"""The Arena's verdict offers "Try to beat this" from either side's plan once the names are shown, and names no
episode while they are hidden (an episode id would name a hidden side)."""

from __future__ import annotations

from rollouts.links import beat_query
from rollouts.record import Record
from testkit.records import make_records
from viewer.arena.view import Snapshot, verdict_markdown


def snapshot(names_shown: bool) -> Snapshot:
    a, b = make_records(2, seed=7, task_id="dock-24B-w06x1-busy-0")
    row = {"winner": "a" if a["reward"] >= b["reward"] else "b", "votes": {}}
    return Snapshot("m1", "random", a["task_id"], (a["model"], b["model"]), (a["episode_id"], b["episode_id"]),
                    (a, b), True, row, None, names_shown, "closed")


def test_the_verdict_links_play_from_each_sides_plan_once_the_names_show():
    shown = snapshot(True)
    text = verdict_markdown(shown)
    planned = [bool(Record(record).plan_steps) for record in shown.records]
    assert planned == [False, True]  # one side sent no plan: nothing of it to start from
    for episode, sent in zip(shown.episodes, planned, strict=True):
        assert (f"(?{beat_query(shown.task_id, episode)})" in text) == sent
    assert "Try to beat this in Play, from [B's plan]" in text


def test_a_hidden_match_names_no_episode_in_its_verdict():
    hidden = snapshot(False)
    text = verdict_markdown(hidden)
    assert "Try to beat" not in text and not any(episode in text for episode in hidden.episodes)
