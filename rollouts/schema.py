"""One rollout record -> one flat index row (DESIGN.md "The rollout dataset").

Every column has one fixed type, and a value that does not fit becomes null rather than a different type: the
index files of many writers are read as one table (`datasets.load_dataset(folder, "index")`, the Hub's viewer),
and a single `"12"` among integers would break that for everyone.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any

from agent.spec import model_name

# Column -> type, in row order. `int` and `float` columns are nullable; `str` too unless noted in the card.
COLUMNS: dict[str, type] = {
    "run": str,
    "model": str,
    "model_name": str,
    "task_id": str,
    "difficulty": str,
    "quay": str,
    "num_ships": int,
    "reward": float,
    "submitted": bool,
    "feasible": bool,
    "cost": int,
    "optimal_cost": int,
    "naive_cost": int,
    "turns": int,
    "checks": int,
    "seconds": float,
    "input_tokens": int,
    "output_tokens": int,
    "end_reason": str,
    "errors": int,
    "episode_id": str,
    "started": str,
    "source": str,
    "env_url": str,
    "schema_version": int,
    "path": str,
}


# The ISO 8601 forms that both Python and Arrow read (the card declares `started` a timestamp, see dataset_card).
_STARTED = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})?$")


def started_at(record: dict) -> datetime:
    """The record's `started` as an aware UTC datetime; ValueError when it is missing or not ISO 8601."""
    text = record.get("started")
    if not isinstance(text, str) or not text:
        raise ValueError("record has no `started` time (ISO 8601 UTC expected, e.g. 2026-11-29T10:15:00Z)")
    try:
        if not _STARTED.match(text):
            raise ValueError
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"record `started` is not ISO 8601 like 2026-11-29T10:15:00Z: {text[:40]!r}") from None
    # A stamp without an offset is taken as UTC, as the loop writes them.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def record_path(record: dict) -> str:
    """Where the record lives in the dataset: `rollouts/<YYYY-MM-DD>/<episode_id>.json` (date of `started`, UTC)."""
    return f"rollouts/{started_at(record):%Y-%m-%d}/{record['episode_id']}.json"


def index_row(record: dict, path: str) -> dict[str, Any]:
    """The flat row for `record`, stored at `path` (repo-relative). Never raises on odd values: they become null."""
    task = _dict(record.get("task"))
    final = _dict(record.get("final"))
    grade = _dict(final.get("grade"))
    usage = _dict(record.get("usage"))
    steps = record.get("steps") if isinstance(record.get("steps"), list) else []
    errors = record.get("errors") if isinstance(record.get("errors"), list) else []
    model = record.get("model")
    row = {
        "run": record.get("run"),
        "model": model,
        "model_name": model_name(model) if isinstance(model, str) else None,
        "task_id": record.get("task_id"),
        "difficulty": task.get("difficulty"),
        "quay": task.get("quay"),
        "num_ships": task.get("ships") if not isinstance(task.get("ships"), list) else len(task["ships"]),
        "reward": record.get("reward", 0.0),
        "submitted": bool(final.get("submitted")),
        "feasible": bool(grade.get("feasible")),
        "cost": grade.get("cost"),
        "optimal_cost": _first(task.get("optimal_cost"), grade.get("optimal_cost")),
        "naive_cost": _first(task.get("naive_cost"), grade.get("naive_cost")),
        "turns": record.get("turns"),
        "checks": sum(1 for step in steps if isinstance(step, dict) and step.get("tool") == "check_plan"),
        "seconds": record.get("seconds"),
        "input_tokens": usage.get("input_tokens"),
        "output_tokens": usage.get("output_tokens"),
        "end_reason": record.get("end_reason"),
        "errors": len(errors),
        "episode_id": record.get("episode_id"),
        "started": f"{started_at(record):%Y-%m-%dT%H:%M:%SZ}",  # one canonical form for the whole column
        "source": record.get("source"),
        "env_url": record.get("env_url"),
        "schema_version": record.get("schema_version"),
        "path": path,
    }
    return {name: coerce_cell(row[name], kind) for name, kind in COLUMNS.items()}


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _first(*values: Any) -> Any:
    return next((value for value in values if value is not None), None)


def coerce_cell(value: Any, kind: type) -> Any:
    """A value of the column's type, or None: every index file, whoever wrote it, reads back with fixed types."""
    if value is None:
        return None
    if kind is bool:
        return value if isinstance(value, bool) else None
    if kind is str:
        return value if isinstance(value, str) else None
    if isinstance(value, bool):  # True is an int to Python, not to a table
        return None
    if kind is int:
        if isinstance(value, int):
            return value
        return int(value) if isinstance(value, float) and value.is_integer() else None
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None
