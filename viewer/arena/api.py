"""The arena for scripts (`gradio_client`): start a match, read it as it stands, vote, stop it.

Each function takes the app's context first (app.py binds it) and enforces its own limits: a match goes through the
checks every run gets (viewer/arena/match.begin_match: specs, task id, server, caps per visitor and in total, the
Space's own keys), and counts as two runs. In random mode the models' names are withheld from the caller until they
vote or skip (viewer/arena/view.api_view).
"""

from __future__ import annotations

import gradio as gr

from agent.limits import InputTooLarge, check_input
from live.match_runs import VoteRefused, match_stop_token
from rollouts.archive import RolloutNotFound
from rollouts.schema import valid_episode_id
from rollouts.sources import SourceError
from viewer.arena.match import begin_match
from viewer.arena.view import api_view, live_snapshot, stored_snapshot
from viewer.context import AppContext
from viewer.request_check import FormError
from viewer.visitors import visitor_of


def arena_start(ctx: AppContext, model_a: str = "", model_b: str = "", task_id: str = "", random: bool = False,
                request: gr.Request = None) -> dict:
    """Start a match: `model_a` and `model_b` on `task_id` (random: a pair drawn from the models this Space can
    run, the two specs ignored). Returns {match_id, episode_a, episode_b, stop_token}; `/arena_stop` takes the
    token. In random mode the episode ids are null (each would name its model): `/arena_match` gives them once the
    caller has voted or skipped. Keys come from the Space's environment only."""
    owner = getattr(request, "session_hash", None) or "api"
    try:
        match = begin_match(ctx, model_a, model_b, task_id, random, {}, owner, visitor_of(request))
    except FormError as exc:
        raise gr.Error(str(exc)) from None
    named = match.mode == "named"
    return {"match_id": match.match_id, "episode_a": match.a.episode_id if named else None,
            "episode_b": match.b.episode_id if named else None, "stop_token": match_stop_token(match.match_id)}


def arena_match(ctx: AppContext, match_id: str, request: gr.Request = None) -> dict:
    """The match as it stands: {match_id, mode, task_id, state (running|ended), names, model_a, model_b,
    episode_a, episode_b, reward_a, reward_b, end_reason_a, end_reason_b, winner, verdict, votes, ballot, saved,
    problem}. In random mode the models and the episodes are null until the caller votes or skips; votes are null
    until then too."""
    match_id = _match_id(match_id)
    live = ctx.matches.get(match_id)
    if live is not None:
        return api_view(live_snapshot(live, visitor_of(request)))
    return stored_view(ctx, match_id, visitor_of(request))


def stored_view(ctx: AppContext, match_id: str, visitor: str) -> dict:
    """A match no longer held whole, from its row and records (its ballot, when open, decides what is shown)."""
    row = ctx.matches.book.get(match_id)
    if row is None:
        raise gr.Error(f"no match {match_id} is running here or stored in this Space's folder")
    records = []
    for episode_id in (row["episode_a"], row["episode_b"]):
        try:
            records.append(ctx.records.find(episode_id, running=False).record)
        except (RolloutNotFound, SourceError):
            records.append(None)
    return api_view(stored_snapshot(row, (records[0], records[1]), ctx.matches.ballot_of(match_id), visitor))


def arena_vote(ctx: AppContext, match_id: str, choice: str, request: gr.Request = None) -> dict:
    """Say which agent you would trust with the port: `a`, `b`, `tie` or `both_bad` (or `skip`: see the names
    without voting). Once both have ended, once per visitor; returns the match as `/arena_match` does."""
    match_id = _match_id(match_id)
    if not isinstance(choice, str) or len(choice) > 20:
        raise gr.Error("a vote is one of a, b, tie, both_bad (or skip)")
    visitor = visitor_of(request)
    try:
        match = ctx.matches.vote(match_id, choice.strip(), visitor=visitor)
    except VoteRefused as exc:
        raise gr.Error(str(exc)) from None
    if ctx.matches.get(match_id) is None:  # counted on its ballot: shown from its row
        return stored_view(ctx, match_id, visitor)
    return api_view(live_snapshot(match, visitor))


def arena_stop(ctx: AppContext, match_id: str, stop_token: str = "", request: gr.Request = None) -> bool:
    """Stop both episodes of a match: `stop_token` is the one `/arena_start` gave (the client that started it may
    leave it out). Both rollouts are kept. False when nothing was stopped."""
    match_id = match_id.strip() if isinstance(match_id, str) else ""
    if not valid_episode_id(match_id):
        return False
    owner = getattr(request, "session_hash", None)
    return ctx.matches.stop(match_id, owner=owner, token=stop_token if isinstance(stop_token, str) else None)


def _match_id(match_id: object) -> str:
    try:
        check_input(match_id, "the match id")
    except InputTooLarge as exc:
        raise gr.Error(str(exc)) from None
    match_id = match_id.strip() if isinstance(match_id, str) else ""
    if not valid_episode_id(match_id):
        raise gr.Error("malformed match id")
    return match_id
