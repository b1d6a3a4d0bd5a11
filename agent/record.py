"""The rollout record: one JSON object per episode (DESIGN.md "The rollout record", PORTSIM_SPEC §9.2)."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from agent import APP_VERSION
from rollouts.schema import SCHEMA_VERSION, utc_stamp


def new_record(*, episode_id: str, model: str, task_id: str, env_url: str, limits: dict, started: float,
               run: str | None, source: str) -> dict:
    """A record as it stands before the first turn; the loop fills it in as the episode goes."""
    return {
        "schema_version": SCHEMA_VERSION,
        "episode_id": episode_id,
        "run": run,
        "source": source,
        "model": model,
        "task_id": task_id,
        "task": {},
        "env_url": env_url,
        "limits": dict(limits),
        "started": utc_stamp(started),
        "seconds": 0.0,
        "messages": [],
        "steps": [],
        "final": {"submitted": False, "plan": None, "grade": None, "rubric": None},
        "reward": 0.0,
        "usage": {"input_tokens": 0, "output_tokens": 0},
        "turns": 0,
        "end_reason": None,
        "errors": [],
        "app_version": APP_VERSION,
    }


def task_summary(task_id: str, reset_metadata: dict, task: dict | None) -> dict:
    """What a record says about its task: enough to group and compare rollouts without the task pack."""
    summary: dict[str, Any] = {"split": reset_metadata.get("split"), "difficulty": reset_metadata.get("difficulty")}
    if task is not None:
        reference = task.get("reference") or {}
        summary.update(split=task.get("split"), difficulty=task.get("difficulty"), quay=task.get("quay"),
                       ships=len(task.get("ships") or []), optimal_cost=reference.get("optimal_cost"),
                       naive_cost=reference.get("naive_cost"))
    else:
        match = re.match(r"^dock-([0-9A-Z]+)-", task_id)
        summary["quay"] = match.group(1) if match else None
    return summary


def parse_json(text: str) -> Any:
    """A server's tool output parsed as JSON, or None when it is plain text.

    orjson reads it several times faster than `json` (it is on every tool call); what orjson refuses goes to `json`.
    Model-written arguments never come here: orjson turns integers past 64 bits into floats, and a plan's numbers
    must reach the server exactly as the model wrote them.
    """
    try:
        return orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError):
        pass
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError, TypeError):
        return None
