"""The Run tab's live frames (viewer/frames.live_frame): what each frame of an episode carries to the page."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from berth_env import load_pack
from rollouts.replay import record_events
from testkit.records import make_record
from viewer import frames
from viewer.live import LiveView
from viewer.rollout_panel import RolloutPanel

PANEL = ("chat", "chart", "plan_step", "steps", "grade", "optimal")
PARTS = ("status", "episode_info", "preview", "live")


@pytest.fixture
def section(monkeypatch):
    """The frame's keys stand in for the components; the episode line needs a running app, so it is a stub."""
    monkeypatch.setattr(frames, "episode_markdown", lambda ctx, run, request: "episode")
    panel = RolloutPanel(**{part: part for part in PANEL}, slider_label="Draft")
    return SimpleNamespace(ctx=None, panel=panel, **{part: part for part in PARTS})


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
    before = frames.live_frame(section, view, task, SimpleNamespace(record=None), None, final=False)
    assert "submitted" in title(before)
    view.extend(events[-1:])
    quiet = frames.live_frame(section, view, task, SimpleNamespace(record=None), None, final=False)
    assert "chart" not in quiet  # between the ends nothing new is drawn again
    last = frames.live_frame(section, view, task, SimpleNamespace(record=record), None, final=True)
    assert title(last) == title(before) and last["steps"] == record["steps"]
    assert "infeasible, reward" in last["grade"]


def test_every_frame_shows_the_episode_not_the_preview(section):
    """A finished episode opened by its link gets two frames in a blink; the page sometimes applied only the
    second, and the first one's switch from the task preview to the episode was lost (a browser test caught it)."""
    record = submitted_record()
    task = load_pack().get(record["task_id"])
    view = LiveView(task)
    view.extend(record_events(record))
    for final in (False, True):
        frame = frames.live_frame(section, view, task, SimpleNamespace(record=record), None, final=final)
        assert frame["preview"].visible is False and frame["live"].visible is True


def test_a_preview_that_arrives_after_run_leaves_the_running_episode_on_screen(tmp_path):
    from testkit.app import settings_for
    from viewer.context import AppContext
    from viewer.run.section import show_preview

    ctx = AppContext.create(settings_for(tmp_path))
    page = SimpleNamespace(ctx=ctx, preview="preview", live="live", preview_text="text", preview_chart="chart",
                           status="status")
    task_id = "dock-24B-w06x1-busy-0"
    idle = show_preview(page, task_id, "embedded", "", SimpleNamespace(session_hash="page-1"))
    assert idle["preview"].visible and not idle["live"].visible and task_id in idle["text"]
    ctx.registry.running_for = lambda owner: owner == "page-1"  # this page's Run was clicked meanwhile
    late = show_preview(page, task_id, "embedded", "", SimpleNamespace(session_hash="page-1"))
    assert set(late) == {"text", "chart"} and task_id in late["text"]
    other = show_preview(page, task_id, "embedded", "", SimpleNamespace(session_hash="page-2"))
    assert other["preview"].visible  # another page's run changes nothing here
    ctx.store.close()
