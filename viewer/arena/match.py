"""Starting an arena match and showing it: the checks and the start (the page and the API alike), both sides
streamed into the section at once, and a stored match replayed from its row and records (`?match=<id>`).

A match is two ordinary episodes: `begin_match` puts both models through the Run section's checks
(viewer/request_check.check_request: specs, task, server, keys for this run only) and the registry starts them together
within the caps (live/match_runs.py). Each side is streamed by the Run section's EpisodeFrames into its own slots,
masked while the visitor may not see the names.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import gradio as gr

from agent.providers.registry import runs_here
from live.match_runs import LiveMatch, draw_pair, match_stop_token
from live.runs import CapacityError
from rollouts.archive import RolloutNotFound
from rollouts.sources import SourceError
from viewer.arena.components import ArenaSection
from viewer.arena.view import (
    Snapshot,
    ballot_markdown,
    head_markdown,
    live_snapshot,
    stored_snapshot,
    verdict_markdown,
)
from viewer.context import AppContext
from viewer.frames import FRAME_S, EpisodeFrames, replay_frame
from viewer.markdown import escape_cell
from viewer.models import PRESETS
from viewer.request_check import FormError, check_request
from viewer.visitors import visitor_of
from viewer.wiring import base_url, in_worker

CONCLUDE_WAIT_S = 30.0  # both rollouts saved, the row written: milliseconds, unless the disk is in trouble


def random_pool() -> list[str]:
    """The models a random pair is drawn from: the app's suggestions this Space can play on its own keys
    (the baselines always)."""
    return [model for model in PRESETS if runs_here(model)]


def begin_match(ctx: AppContext, model_a: Any, model_b: Any, task_id: Any, random: Any, keys: dict[str, Any],
                owner: str, visitor: str) -> LiveMatch:
    """Check a match request and start both episodes; FormError naming the field to fix. In random mode the pair
    is drawn here (typed models and keys are ignored: it plays on the Space's own keys). Blocking: call it from a
    worker thread."""
    random = random is True or (isinstance(random, str) and random.strip().lower() in ("true", "1", "yes"))
    hold_as = None
    if random:
        pool = random_pool()
        try:
            model_a, model_b = draw_pair(pool)
        except ValueError as exc:
            raise FormError("model_a", str(exc)) from None
        keys = {}
        # Whatever is drawn, the budget holds the pool's dearest pair: what it holds must not name the models.
        budget = ctx.registry.budget
        hold_as = budget.dearest(pool) if budget is not None else None
    checked = check_request(ctx, {"model_a": model_a, "model_b": model_b}, task_id, None, None, "embedded", "",
                            keys)
    if checked.models[0] == checked.models[1]:
        raise FormError("model_b", "Model B is model A again: pick another model, or a random pair.")
    try:
        return ctx.matches.start(*checked.requests, mode="random" if random else "named", owner=owner,
                                 visitor=visitor, hold_as=hold_as)
    except CapacityError as exc:
        raise FormError("capacity", str(exc)) from None


async def match_frames(section: ArenaSection, match: LiveMatch, request: gr.Request | None, *,
                       can_stop: bool = False) -> AsyncIterator[dict]:
    """Both sides from their first event to the verdict, as one stream of frames; then the verdict and the vote.
    `can_stop`: this page started the match, so its state keeps the match's stop token."""
    ctx, visitor = section.ctx, visitor_of(request)
    snap = live_snapshot(match, visitor)
    masked = not snap.names_shown
    task = await in_worker(ctx.task_for, match.task_id, None)
    frames = [EpisodeFrames(side.slots(ctx, masked=masked), run, task, request, masked=masked)
              for side, run in zip(section.sides, match.runs, strict=True)]
    state = {"id": match.match_id, "task_id": match.task_id,
             "stop_token": match_stop_token(match.match_id) if can_stop else None}
    first = {**await in_worker(frames[0].first), **await in_worker(frames[1].first)}
    yield {**first, **match_frame(section, snap, request), section.match: state}
    while not all(f.finished for f in frames):
        out: dict = {}
        for f in frames:
            if not f.finished:
                out.update(await f.next() or {})
        if out:
            yield out
        await asyncio.sleep(FRAME_S / 2)
    await in_worker(match.concluded.wait, CONCLUDE_WAIT_S)
    # Each side's chart and slider again: a stream's last frame must not leave out what it drew (EpisodeFrames).
    yield {**frames[0].drawn, **frames[1].drawn, **match_frame(section, live_snapshot(match, visitor), request)}


def match_frame(section: ArenaSection, snap: Snapshot, request: gr.Request | None) -> dict:
    """The match's own lines: the verdict, the vote (shown while this visitor may vote), the link, the heads."""
    link = section.ctx.share_link(f"match={snap.match_id}", base_url(request))
    # Hidden names: no episode links either (they open the rollouts, which name their models), not even a
    # previous match's left on the page.
    unlinked = {} if snap.names_shown else {side.info: "" for side in section.sides}
    return {**unlinked, section.verdict: verdict_markdown(snap), section.vote_row: gr.Row(visible=snap.ballot == "open"),
            section.skip: gr.Button(visible=snap.mode == "random" and not snap.names_shown),
            section.ballot: ballot_markdown(snap),
            section.link: f"Match `{snap.match_id}` · [link to this match]({link}) (watch it live, replay it later)",
            section.a.head: head_markdown(snap, "a"), section.b.head: head_markdown(snap, "b"),
            section.sides_row: gr.Row(visible=True)}


def revealed_frame(section: ArenaSection, match: LiveMatch, request: gr.Request | None) -> dict:
    """After a vote or a skip: the match's lines, and in random mode both sides again, names and links now in."""
    snap = live_snapshot(match, visitor_of(request))
    out = match_frame(section, snap, request)
    if match.mode == "random" and snap.names_shown:
        for side, run in zip(section.sides, match.runs, strict=True):
            if run.record is not None:
                out.update(replay_frame(side.slots(section.ctx, masked=False), run.record, request))
    return out


def stored_match_frame(section: ArenaSection, row: dict, request: gr.Request | None) -> dict:
    """A match no longer held whole here, replayed side by side from its row and both stored records (none while
    its ballot hides them: an undecided random pair's rollouts are not public)."""
    records, out = [], {}
    ballot = section.ctx.matches.ballot_of(row["match_id"])
    for side, episode_id in zip(section.sides, (row["episode_a"], row["episode_b"]), strict=True):
        if ballot is not None and not ballot.names_shown_to(visitor_of(request)):
            records.append(None)
            out[side.status] = "The rollouts show once you vote or skip."
            continue
        try:
            record = section.ctx.records.find(episode_id, running=False).record
        except (RolloutNotFound, SourceError) as exc:
            records.append(None)
            out[side.status] = f"⚠️ Rollout `{escape_cell(episode_id)}`: {escape_cell(exc)}"
            continue
        records.append(record)
        out.update(replay_frame(side.slots(section.ctx, masked=False), record, request))
    snap = stored_snapshot(row, (records[0], records[1]), ballot, visitor_of(request))
    state = {"id": row["match_id"], "task_id": row["task_id"], "stop_token": None}
    return {**out, **match_frame(section, snap, request), section.match: state}
