"""Run for scripts: `api_updates` plays one episode through the one request check (viewer/request_check.py) and
yields small JSON updates for `gradio_client`, from the same live view the page's frames read (viewer/frames.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import gradio as gr

from live.runs import EpisodeRun, stop_token
from rollouts.record import Record
from viewer.context import AppContext
from viewer.frames import FRAME_S
from viewer.live import LiveView
from viewer.request_check import FormError, start_episode
from viewer.visitors import visitor_of
from viewer.wiring import in_worker

API_FRAME_S = 0.25


async def api_updates(ctx: AppContext, model: str, task_id: str, max_turns: int, max_tokens: int, server: str,
                      request: gr.Request | None) -> AsyncIterator[dict]:
    """The `run` API: the same episode as the Run tab, as small JSON updates for scripts; each carries the
    episode's stop token, which `/stop` asks for (the episode id alone only lets one watch)."""
    owner = getattr(request, "session_hash", None) or "api"
    try:
        started = await in_worker(start_episode, ctx, model, task_id, max_turns, max_tokens,
                                          server or "embedded", "", {}, owner, visitor_of(request))
    except FormError as exc:
        raise gr.Error(str(exc)) from None
    run = started.run
    view = LiveView(None)
    position, last = 0, 0.0
    while True:
        batch, finished = run.wait(position, 0)
        position += len(batch)
        view.extend(batch)
        now = time.monotonic()
        # A script gets an update at every step of the episode (a turn, a call, a result), and at most four a
        # second while tokens stream.
        step = any(e["type"] not in ("text_delta", "reasoning_delta", "tool_args_delta") for e in batch)
        if finished or step or (batch and now - last >= API_FRAME_S):
            last = now
            yield _api_update(run, view, position, batch, finished)
            if finished:
                return
        await asyncio.sleep(FRAME_S / 2)


def _api_update(run: EpisodeRun, view: LiveView, position: int, batch: list[dict], finished: bool) -> dict:
    update = {"episode_id": run.episode_id, "stop_token": stop_token(run.episode_id),
              "state": "finished" if finished else "running",
              "status": view.status(), "events": position, "last": batch[-1]["type"] if batch else None}
    if finished:
        finished = Record(run.record or {})
        update.update(reward=finished.reward, end_reason=finished.end_reason or None,
                      feasible=finished.feasible if finished.grade else None, cost=finished.cost,
                      errors=finished.errors, saved=run.save_error is None)
    return update
