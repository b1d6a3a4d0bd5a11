"""The Run tab's live frames (viewer/run_stream.live_frame): what each frame of an episode carries to the page."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from berth_env import load_pack
from testkit.records import make_record
from viewer import run_stream
from viewer.live import LiveView
from viewer.replay import record_events

PARTS = ("chat", "status", "chart", "plan_step", "steps", "grade", "optimal", "episode_info")


@pytest.fixture
def section(monkeypatch):
    """The frame's keys stand in for the components; the episode line needs a running app, so it is a stub."""
    monkeypatch.setattr(run_stream, "episode_markdown", lambda ctx, run, request: "episode")
    return SimpleNamespace(ctx=None, **{part: part for part in PARTS})


def submitted_record() -> dict:
    for seed in range(100):
        record = make_record(seed=seed, end_reason="submitted")
        if len(record["steps"]) >= 2 and record["steps"][-1]["tool"] == "submit_plan":
            return record
    raise AssertionError("no suitable record")


def title(frame: dict) -> str:
    return frame["chart"].layout.title.text


def test_the_last_frame_draws_the_submitted_plan_even_when_no_plan_is_new(section):
    record = submitted_record()
    task = load_pack().get(record["task_id"])
    events = record_events(record)
    assert events[-1]["type"] == "episode_finished"
    view = LiveView(task)
    view.extend(events[:-1])  # every plan, the submitted one last, drawn by a frame before the end
    before = run_stream.live_frame(section, view, task, SimpleNamespace(record=None), None, final=False)
    assert "submitted" in title(before)
    view.extend(events[-1:])
    quiet = run_stream.live_frame(section, view, task, SimpleNamespace(record=None), None, final=False)
    assert "chart" not in quiet  # between the ends nothing new is drawn again
    last = run_stream.live_frame(section, view, task, SimpleNamespace(record=record), None, final=True)
    assert title(last) == title(before) and last["steps"] == record["steps"]
    assert "Reward" in last["grade"]
