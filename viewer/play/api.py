"""Playing by hand from a script (`gradio_client`): `/play_start`, `/play_check`, `/play_submit`.

`plan` is the JSON list the tools take (`[{ship, berth_hour, section, cranes}]`, or the same as JSON text) and each
answer is the server's own JSON (`reward` on submit). Only the client that started an episode may play it (Gradio's
session of that client); the caps count the visitor (viewer.visitors: the account or address, however many
sessions it opens). The rollout (model `human`) is saved when the episode ends. Each function takes the app's
context first (app.py binds it); live.hand_play enforces the limits, since any client that reaches the Space may
call these.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from berth_env.baselines import published_plan
from live.hand_play import PlayError, human_model
from viewer.context import AppContext
from viewer.visitors import visitor_of


def play_start(ctx: AppContext, task_id: str, request: gr.Request = None) -> dict:
    """Open a hand-played episode on `task_id`: {episode_id, plan} (the published plan, a place to start)."""
    task_id = task_id.strip() if isinstance(task_id, str) else ""
    try:
        episode = ctx.plays.start(task_id, owner=_owner(request), visitor=visitor_of(request), model=human_model())
    except PlayError as exc:
        raise gr.Error(str(exc)) from None
    task = ctx.task_for(task_id, None)
    return {"episode_id": episode.episode_id, "plan": published_plan(task) if task else [],
            "checks_left": episode.checks_left}


def play_check(ctx: AppContext, episode_id: str, plan: Any, request: gr.Request = None) -> dict:
    """check_plan on the episode: the server's answer (violations, cost, checks_left)."""
    try:
        return ctx.plays.check(episode_id, _owner(request), plan)
    except PlayError as exc:
        raise gr.Error(str(exc)) from None


def play_submit(ctx: AppContext, episode_id: str, plan: Any, request: gr.Request = None) -> dict:
    """submit_plan on the episode: the server's answer (with `reward`); the rollout is saved as it ends."""
    try:
        return ctx.plays.submit(episode_id, _owner(request), plan)
    except PlayError as exc:
        raise gr.Error(str(exc)) from None


def _owner(request: gr.Request | None) -> str:
    return getattr(request, "session_hash", None) or "api"
