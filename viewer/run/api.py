"""Run for scripts (`gradio_client`): play an episode, read a rollout, stop a run.

Each function takes the app's context first (app.py binds it) and enforces its own limits: whether or not it is
listed in the API page, a handler may be called by anyone who can reach the Space.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import gradio as gr

from agent.limits import DEFAULT_MAX_TOKENS, DEFAULT_MAX_TURNS
from rollouts.archive import RolloutNotFound
from rollouts.schema import valid_episode_id
from rollouts.sources import SourceError
from viewer.context import AppContext
from viewer.run.stream import api_updates


async def run(ctx: AppContext, model: str, task_id: str, max_turns: int = DEFAULT_MAX_TURNS, max_tokens: int = DEFAULT_MAX_TOKENS,
              server: str = "embedded", request: gr.Request = None) -> AsyncIterator[dict]:
    """Play one episode; streams {episode_id, state, status, events, last}, then the outcome (reward, end_reason,
    feasible, cost, errors, saved). Keys come from the Space's environment only."""
    async for update in api_updates(ctx, model, task_id, max_turns, max_tokens, server, request):
        yield update


def rollout(ctx: AppContext, episode_id: str) -> dict:
    """The rollout record of a finished episode (or its live state while it runs)."""
    episode_id = (episode_id or "").strip()
    if not valid_episode_id(episode_id):
        raise gr.Error("malformed episode id")
    if not ctx.public(episode_id):  # a hidden side of a random match: as unknown until the vote
        raise gr.Error(f"no rollout {episode_id}")
    found = ctx.records.find(episode_id)
    if found.running:
        return {"episode_id": episode_id, "state": "running", "events": len(found.run.events)}
    try:
        return dict(found.record.data)
    except RolloutNotFound:
        raise gr.Error(f"no rollout {episode_id}") from None
    except (SourceError, ValueError) as exc:
        raise gr.Error(str(exc)) from None


def stop(ctx: AppContext, episode_id: str, stop_token: str = "", request: gr.Request = None) -> bool:
    """Stop a running episode: `stop_token` is the one `/run` gave its caller (the client that started it may also
    leave it out). It ends as `stopped` and its rollout is kept. False when it was not running here, or neither
    the token nor the client is the one that started it: knowing the episode id only lets one watch."""
    episode_id = episode_id.strip() if isinstance(episode_id, str) else ""
    if not valid_episode_id(episode_id):
        return False
    owner = getattr(request, "session_hash", None)
    return ctx.registry.stop(episode_id, owner=owner, token=stop_token if isinstance(stop_token, str) else None)
