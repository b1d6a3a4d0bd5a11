"""Upstream's published rollouts (one Parquet table) in our shapes: a flat index row and a rollout record.

Upstream's `rollouts` config has the flat columns of its run index (PORTSIM_SPEC §9.3: `run, model, model_name,
task_id, difficulty, quay, num_ships, reward, submitted, feasible, cost, optimal_cost, naive_cost, turns, checks,
seconds, input_tokens, output_tokens, end_reason`, sometimes `errors`) plus four JSON-string columns: `final_plan`,
`grade`, `steps` and `messages`. It has no episode ids, so each row gets a stable one made from what identifies an
upstream episode (run, model, task), prefixed `up-` so it can never collide with ours.

Pure functions: the Parquet reading lives in viewer/sources.py.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

JSON_COLUMNS = ("final_plan", "grade", "steps", "messages")
UPSTREAM_PREFIX = "up-"


def upstream_episode_id(run: Any, model: Any, task_id: Any, occurrence: int = 0) -> str:
    """A stable, store-safe id for an upstream row; `occurrence` tells apart repeats of one (run, model, task)."""
    key = json.dumps([run, model, task_id, occurrence], ensure_ascii=False)
    return UPSTREAM_PREFIX + hashlib.sha1(key.encode()).hexdigest()[:16]


def upstream_ids(rows: Iterable[tuple[Any, Any, Any]]) -> list[str]:
    """Ids for (run, model, task_id) rows in file order; a repeated triple gets the next occurrence number."""
    seen: dict[tuple, int] = {}
    ids = []
    for run, model, task_id in rows:
        key = (run, model, task_id)
        count = seen.get(key, 0)
        seen[key] = count + 1
        ids.append(upstream_episode_id(run, model, task_id, count))
    return ids


def decode_json(text: Any, column: str, problems: list[str]) -> Any:
    """A JSON-string cell decoded; an unreadable one becomes None and a line in `problems` (the viewer shows it)."""
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return None
    if not isinstance(text, str | bytes):
        return text  # already decoded (a reader that typed the column)
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        problems.append(f"upstream column `{column}` is not valid JSON; shown without it")
        return None


def record_from_row(row: Mapping[str, Any], *, episode_id: str, repo: str | None = None,
                    file: str | None = None, row_number: int | None = None) -> dict:
    """Our rollout record (DESIGN.md "The rollout record") for one upstream Parquet row.

    Fields upstream does not keep (limits, usage per turn, provider switches) are left empty or null; decoding
    problems go to `errors`, so the viewer says what is missing instead of failing.
    """
    problems: list[str] = []
    messages = decode_json(row.get("messages"), "messages", problems)
    steps = decode_json(row.get("steps"), "steps", problems)
    grade = decode_json(row.get("grade"), "grade", problems)
    plan = decode_json(row.get("final_plan"), "final_plan", problems)
    if not isinstance(messages, list):
        messages = []
    if not isinstance(steps, list):
        steps = []
    if not isinstance(grade, dict):
        grade = None
    rubric = None
    if grade is not None and isinstance(grade.get("rubric"), dict):
        rubric = grade["rubric"]
    submitted = bool(_scalar(row.get("submitted")))
    errors = row.get("errors")
    error_list = [str(e) for e in errors] if isinstance(errors, list) else []
    if isinstance(errors, int | float) and not isinstance(errors, bool) and _scalar(errors):
        error_list.append(f"{int(errors)} provider or transport error(s) (texts not published upstream)")
    ships = _scalar(row.get("num_ships", row.get("ships")))
    record = {
        "schema_version": 1,
        "episode_id": episode_id,
        "run": _scalar(row.get("run")),
        "source": "upstream",
        "model": _scalar(row.get("model")),
        "task_id": _scalar(row.get("task_id")),
        "task": {"split": _scalar(row.get("split")), "difficulty": _scalar(row.get("difficulty")),
                 "quay": _scalar(row.get("quay")), "ships": ships,
                 "optimal_cost": _scalar(row.get("optimal_cost")), "naive_cost": _scalar(row.get("naive_cost"))},
        "env_url": None,
        "limits": {},
        "started": _scalar(row.get("started")),
        "seconds": _scalar(row.get("seconds")),
        "messages": messages,
        "steps": [s for s in steps if isinstance(s, dict)],
        "final": {"submitted": submitted, "plan": plan if submitted else None,
                  "grade": grade if submitted else None, "rubric": rubric},
        "reward": _scalar(row.get("reward")) or 0.0,
        "usage": {"input_tokens": _scalar(row.get("input_tokens")) or 0,
                  "output_tokens": _scalar(row.get("output_tokens")) or 0},
        "turns": _scalar(row.get("turns")),
        "end_reason": _scalar(row.get("end_reason")),
        "errors": error_list + problems,
        "upstream": {"repo": repo, "file": file, "row": row_number},
    }
    return record


def _scalar(value: Any) -> Any:
    """NaN (pandas' missing number) as None; numpy scalars as Python ones."""
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
