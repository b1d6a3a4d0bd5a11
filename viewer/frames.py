"""One episode's display, frame by frame, shared by Run and the Arena: `EpisodeFrames` follows an episode and
builds its display as dicts keyed by the components of one `EpisodeSlots` (the Run section's, or one side of an
arena match, masked while its model's name is hidden); `page_frames` yields them for one episode; `replay_frame`
shows a stored one. Episodes run in their own workers, so a closed tab never ends one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import gradio as gr

from live.runs import EpisodeRun, stop_token
from rollouts.record import Record
from viewer.chart import preview_chart
from viewer.context import AppContext
from viewer.live import LiveView
from viewer.rollout_panel import RolloutPanel, draft, draft_slider, shown_optimum, stored_rollout
from viewer.summary import grade_panel
from viewer.wiring import base_url, in_worker

# Redraw the page at most this often while tokens stream; the chat diff is small, the chart only on new plans.
FRAME_S = 0.05


IDLE_TICK_S = 1.0  # the status line's clock still ticks when nothing arrives


def episode_markdown(ctx: AppContext, run: EpisodeRun, request: gr.Request | None) -> str:
    link = ctx.share_link(f"episode={run.episode_id}", base_url(request))
    lines = [f"Episode `{run.episode_id}` · [watch link]({link})"]
    if run.finished:
        if run.save_error:
            lines.append(f"⚠️ {run.save_error}")
        elif run.saved is not None:
            status = ctx.store.status()
            waiting = status.get("waiting") or 0
            where = ("saved locally" if not status.get("dataset")
                     else f"saved locally, {waiting} waiting to push" if waiting else "saved and pushed to the Hub")
            share = ctx.rollout_link(run.episode_id, base_url(request))
            lines.append(f"Rollout {where} · [share link]({share})")
    return "\n\n".join(lines)


OPTIMUM_LABEL = "the model's last plan"


@dataclass
class EpisodeSlots:
    """Where one episode shows: a rollout panel and the lines around it. The Run section is one (it has these
    names); each side of an arena match is another, without the task preview, and without the episode's links
    while its model's name is hidden."""

    ctx: AppContext
    panel: RolloutPanel
    status: Any
    episode_info: Any = None  # the episode's id and links; None: not shown
    episode: Any = None  # a gr.State of {"id", "task_id", "server", "stop_token"}; None: not kept
    preview: Any = None  # the task preview, hidden once an episode shows; None: there is none
    live: Any = None  # the episode's column, shown once an episode shows


class EpisodeFrames:
    """One episode's display, frame by frame, into one set of slots: `first()`, then `await next()` until
    `finished` (a frame when one is due, else None). `masked`: the model's name never reaches the page (an arena
    match in random mode), nor its token counts, which would tell a baseline from a model.

    Frames are built in worker threads: charts and the chat are CPU work, and on the event loop they would hold up
    every other visitor's page (a watcher's link would sit "in queue" while a long reasoning stream renders).

    `drawn` is the chart and the draft slider as the last frame left them. A stream that yields anything after this
    episode's last frame (the arena's verdict) sends them again with it: Gradio's page applies each frame to its
    copy of the previous one in place, and a frame that leaves the chart out turns that copy into an empty update
    before a plot still loading has read it (a `?match=` link's charts came up empty)."""

    def __init__(self, slots: Any, run: EpisodeRun, task: dict | None, request: gr.Request | None, *,
                 can_stop: bool = False, masked: bool = False) -> None:
        self.slots, self.run, self.task, self.request = slots, run, task, request
        self.can_stop, self.masked = can_stop, masked
        self.view = LiveView(task, show_tokens=not masked and not run.model.startswith("baseline:"))
        self.position, self.last_frame, self.dirty, self.finished = 0, 0.0, False, False
        self.drawn: dict = {}

    def first(self) -> dict:
        return self._keep(first_frame(self.slots, self.run, self.task, self.request, self.can_stop))

    def _keep(self, frame: dict) -> dict:
        panel = self.slots.panel
        self.drawn.update({part: frame[part] for part in (panel.chart, panel.plan_step) if part in frame})
        return frame

    async def next(self) -> dict | None:
        batch, finished = self.run.wait(self.position, 0)
        self.position += len(batch)
        if batch:
            await in_worker(self.view.extend, masked_events(batch) if self.masked else batch)
        self.dirty = self.dirty or bool(batch)
        now = time.monotonic()
        if finished or (self.dirty and now - self.last_frame >= FRAME_S) or now - self.last_frame >= IDLE_TICK_S:
            self.last_frame, self.dirty, self.finished = now, False, finished
            return self._keep(await in_worker(live_frame, self.slots, self.view, self.task, self.run,
                                              self.request, final=finished))
        return None


def masked_events(events: list[dict]) -> list[dict]:
    """The events without the model's name (the episode's start and its record name it)."""
    out = []
    for event in events:
        if event.get("type") == "episode_started":
            event = {**event, "model": ""}
        elif event.get("type") == "episode_finished" and isinstance(event.get("record"), dict):
            event = {**event, "record": masked_record(event["record"])}
        out.append(event)
    return out


def masked_record(record: dict) -> dict:
    return {**record, "model": ""}


async def page_frames(slots: Any, run: EpisodeRun, task: dict | None, request: gr.Request | None, *,
                      can_stop: bool = False) -> AsyncIterator[dict]:
    """The display of one episode (the Run section's, or any EpisodeSlots), from its first event to its grade.
    `can_stop`: this page started it, so its state keeps the stop token (a page that only watches never gets one)."""
    frames = EpisodeFrames(slots, run, task, request, can_stop=can_stop)
    yield await in_worker(frames.first)
    while not frames.finished:
        frame = await frames.next()
        if frame is not None:
            yield frame
        if not frames.finished:
            await asyncio.sleep(FRAME_S / 2)


def first_frame(slots: Any, run: EpisodeRun, task: dict | None, request: gr.Request | None,
                can_stop: bool) -> dict:
    panel = slots.panel
    frame = {panel.chat: [], slots.status: "starting…", panel.chart: preview_chart(task) if task else None,
             **_episode_shown(slots)}
    for part, empty in ((panel.plan_step, gr.Slider(visible=False)), (panel.steps, []), (panel.grade, ""),
                        (panel.optimal, gr.Plot(visible=False))):
        if part is not None:  # a panel built without some parts (rollout_panel.PARTS)
            frame[part] = empty
    if slots.episode_info is not None:
        frame[slots.episode_info] = episode_markdown(slots.ctx, run, request)
    if slots.episode is not None:
        frame[slots.episode] = {"id": run.episode_id, "task_id": run.task_id, "server": None,
                                "stop_token": stop_token(run.episode_id) if can_stop else None}
    return frame


def _episode_shown(slots: Any) -> dict:
    """The episode's column shown and the task preview hidden (when the slots have them)."""
    shown = {}
    if slots.preview is not None:
        shown[slots.preview] = gr.Column(visible=False)
    if slots.live is not None:
        shown[slots.live] = gr.Column(visible=True)
    return shown


def live_frame(slots: Any, view: LiveView, task: dict | None, run: EpisodeRun,
               request: gr.Request | None, *, final: bool) -> dict:
    panel = slots.panel
    # Every frame shows the episode, not only the first: two frames yielded in a blink (a finished episode opened by
    # its link) sometimes reach the page as one, and the first one's switch from the preview was lost with it.
    frame: dict = {panel.chat: view.messages, slots.status: view.status(), **_episode_shown(slots)}
    # The last frame draws the last plan again: the page must end on the submitted plan even if a busy browser
    # lost or reordered an earlier chart (seen once on a loaded machine: the chart stayed on the previous draft).
    if view.new_plan or (final and view.steps):
        view.new_plan = False
        count = len(view.steps)
        frame[panel.chart] = draft(panel, task, view.steps, count)
        if panel.plan_step is not None:
            frame.update({panel.plan_step: draft_slider(panel, count), panel.steps: list(view.steps)})
    if final:
        finished = Record(view.record or run.record or {})
        if panel.grade is not None:
            frame[panel.grade] = grade_panel(finished, task)
        if panel.optimal is not None:
            frame[panel.optimal] = shown_optimum(finished, task, OPTIMUM_LABEL)
        if slots.episode_info is not None:
            frame[slots.episode_info] = episode_markdown(slots.ctx, run, request)
    return frame


def replay_frame(slots: Any, rollout: Record | Mapping[str, Any], request: gr.Request | None, *,
                 masked: bool = False) -> dict:
    """The display of a finished, stored episode (a watch link opened after it ended, an arena match replayed);
    `masked` as for EpisodeFrames."""
    ctx, stored = slots.ctx, Record.of(rollout)
    task = ctx.task_for(stored.task_id, None)
    view = LiveView(task, show_tokens=not masked and not stored.baseline)
    view.extend(stored.events())
    episode_id = stored.episode_id
    frame = {**stored_rollout(slots.panel, masked_record(dict(stored.data)) if masked else stored, task,
                              optimum_label=OPTIMUM_LABEL),
             slots.status: view.status(), **_episode_shown(slots)}
    if slots.episode_info is not None:
        share = ctx.rollout_link(episode_id, base_url(request))
        frame[slots.episode_info] = f"Episode `{episode_id}` (finished) · [share link]({share})"
    if slots.episode is not None:
        frame[slots.episode] = {"id": episode_id, "task_id": stored.task_id, "server": None}
    return frame
