"""Shared pieces for the agent-loop tests: play an episode, and read the event stream it gave.

The task with known reference plans (TASK_ID, optimal_args, naive_args) is in testkit/tasks.py.
"""

from __future__ import annotations

import json

from agent.loop import stream_episode
from agent.request import EpisodeRequest
from testkit.tasks import TASK_ID

RUN_OPTIONS = ("episode_id", "stop", "progress")  # what one run of a request has; the rest is the request's


def play(model: str, env_url: str, **options) -> tuple[list[dict], dict]:
    """Run one episode of `model` (a spec's text, parsed into the request here); returns (events without the last,
    record). `options`: the request's fields (agent.request.EpisodeRequest.of) and the run's (RUN_OPTIONS)."""
    options.setdefault("retry_base_s", 0.01)
    run = {name: options.pop(name) for name in RUN_OPTIONS if name in options}
    request = EpisodeRequest.of(model, options.pop("task_id", TASK_ID), env_url=env_url, **options)
    events = list(stream_episode(request, **run))
    assert events[-1]["type"] == "episode_finished"
    json.dumps(events)  # every event is plain JSON-serialisable data
    return events[:-1], events[-1]["record"]


def types(events: list[dict]) -> list[str]:
    """Event types with consecutive repeats collapsed: the shape of the stream."""
    shape: list[str] = []
    for event in events:
        if not shape or shape[-1] != event["type"]:
            shape.append(event["type"])
    return shape


def joined(events: list[dict], kind: str, turn: int | None = None) -> str:
    return "".join(e["text"] for e in events if e["type"] == kind and (turn is None or e["turn"] == turn))


def count(events: list[dict], kind: str) -> int:
    return sum(1 for e in events if e["type"] == kind)
