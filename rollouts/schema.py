"""The rollout record and its flat index row: field names, types and the rules they follow, in one place.

A record is one JSON object per episode (DESIGN.md "The rollout record"); an index row is its flat summary, one
per rollout (DESIGN.md "The rollout dataset"). Every other module takes these names from here: the episode-id
pattern, the end reasons, the tiers, the index columns and their types.

Index columns have one fixed type each, and a value that does not fit becomes null rather than a different type:
the index files of many writers are read as one table (`datasets.load_dataset(folder, "index")`, the Hub's viewer),
and a single `"12"` among integers would break that for everyone.
"""

from __future__ import annotations

import json
import math
import re
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, NotRequired

import pydantic
from typing_extensions import TypedDict

from berth_env import TIERS
from rollouts.metrics import METRIC_COLUMNS, episode_metrics
from rollouts.model_spec import spec_parts
from rollouts.problems import id_problem, typed_problem
from rollouts.record import Record

__all__ = [
    "ANNOTATIONS",
    "BROWSE_COLUMNS",
    "COLUMNS",
    "END_REASONS",
    "EPISODE_ID",
    "SCHEMA_VERSION",
    "TIERS",
    "BrowseColumn",
    "RecordError",
    "RecordSchema",
    "coerce_cell",
    "index_row",
    "model_name",
    "new_episode_id",
    "parse_record",
    "record_problem",
    "started_at",
    "utc_stamp",
    "valid_episode_id",
    "validate_record",
]

SCHEMA_VERSION = 1
# Record fields added after the episode (`RolloutStore.annotate`); every other field stays as it was recorded.
ANNOTATIONS: tuple[str, ...] = ("regrade",)
# Episode ids name files in the store and on the Hub, so only a safe alphabet is allowed (checked with fullmatch:
# `$` would let a trailing newline through).
EPISODE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
EndReason = Literal["submitted", "no_tool_call", "turn_limit", "wall_clock", "tool_call_limit", "server_ended",
                    "stopped", "error", "interrupted"]
END_REASONS: tuple[str, ...] = EndReason.__args__  # type: ignore[attr-defined]


def new_episode_id() -> str:
    """12 hex characters, as upstream's harness makes them."""
    return uuid.uuid4().hex[:12]


def valid_episode_id(episode_id: Any) -> bool:
    return isinstance(episode_id, str) and EPISODE_ID.fullmatch(episode_id) is not None


def utc_stamp(epoch: float) -> str:
    """`started` as records write it: `YYYY-MM-DDTHH:MM:SSZ`."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def model_name(spec: str) -> str:
    """The model of a spec without provider, effort or `hf:` route list (the index's `model_name`).

    `hf:Qwen/Qwen3.8-27B:cerebras|ovhcloud` -> `Qwen/Qwen3.8-27B`; `openai:gpt-x@low` -> `gpt-x`.
    """
    return spec_parts(spec).model or spec


# -- the record ----------------------------------------------------------------------------------------------------

class _Strict(TypedDict):
    # Strict: a record that says "12" where a number belongs is refused, not silently converted.
    __pydantic_config__ = pydantic.ConfigDict(strict=True)  # type: ignore[misc]


class Final(_Strict):
    submitted: bool
    plan: Any
    grade: dict | None
    rubric: NotRequired[dict | None]


class Usage(_Strict):
    input_tokens: int
    output_tokens: int


class RecordSchema(_Strict):
    """One rollout (DESIGN.md "The rollout record"); keys not listed here are allowed and kept."""

    schema_version: int
    episode_id: str
    run: str | None
    source: str
    model: str
    task_id: str
    task: dict
    env_url: str | None
    limits: dict
    started: str
    seconds: float | None
    messages: list[dict]
    steps: list[dict]
    final: Final
    reward: float | None  # None only where a non-finite number could not be stored
    usage: Usage
    turns: int | None
    end_reason: EndReason | None
    errors: list[str]
    provider_switches: NotRequired[list[str]]
    app_version: NotRequired[str]
    regrade: NotRequired[dict]  # the grade under a later grader, beside the original (rollouts.regrade)
    player: NotRequired[dict]  # a hand-played rollout: the aids the person had and the plan they started from


_RECORD = pydantic.TypeAdapter(RecordSchema)


class RecordError(ValueError):
    """A record that does not follow the schema; the message names the field."""


def record_problem(record: Any) -> str | None:
    """What is wrong with a record, naming the field (`final.submitted: Input should be ...`); None when it is sound."""
    problem = (typed_problem(record, _RECORD, "record", "a rollout record")
               or id_problem(record, ("episode_id",), valid_episode_id))
    if problem:
        return problem
    try:
        started_at(record)
    except ValueError as exc:
        return f"started: {exc}"
    return None


def parse_record(data: bytes, episode_id: str) -> dict:
    """A stored record's bytes as a JSON object; RecordError with one message for a damaged or truncated file, the
    same from every reader (`/rollout`, a watch link, Browse), whatever the parser's complaint."""
    try:
        record = json.loads(data)
    except (ValueError, RecursionError):
        record = None
    if not isinstance(record, dict):
        raise RecordError(f"The record of {episode_id} cannot be read: the file is damaged or truncated.")
    return record


def validate_record(record: Any) -> RecordSchema:
    """The record itself when it follows the schema; RecordError naming the field otherwise."""
    problem = record_problem(record)
    if problem is not None:
        raise RecordError(problem)
    return record  # type: ignore[return-value]


# The ISO 8601 forms that both Python and Arrow read (the card declares `started` a timestamp).
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


# -- the index row -------------------------------------------------------------------------------------------------

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
    # The convergence, naive-plan and price figures (rollouts.metrics).
    **METRIC_COLUMNS,
    # The final plan graded again under a later grader (rollouts.regrade); null until a regrade is written.
    "regrade_reward": float,
    "regrade_feasible": bool,
    # How the episode was played, for the board's reproducibility card (rollouts.board_trust): the harness's
    # version, the turn and token limits, and how many provider fallbacks it took (null: not recorded).
    "app_version": str,
    "max_turns": int,
    "max_tokens": int,
    "provider_switches": int,
}
# Every source's name (an index row's `source`), in precedence order: an episode found in several is the first
# one's row; a row of the local folder that is also on the Hub is labelled `local+hub` (the labels Browse's
# `source` column and filter take). Here, below the filters, the index engine that applies the order and the
# sources (rollouts.sources) that feed it.
SOURCES = ("local", "hub", "upstream")
SOURCE_LABELS = ("local", "local+hub", "hub", "upstream")





@dataclass(frozen=True)
class BrowseColumn:
    """How the doors that list rollouts show one column of Browse's rows: Browse's list (its header, its width,
    how a cell reads, and `place`: "list" always shown, "more" offered in its "More columns" menu, None not in the
    list) and `/browse_rollouts` (`api`: the row's key there; "" the column's own name, None not in the API)."""

    header: str
    place: str | None = None
    cell: str = "count"  # how the list writes a cell: a key of viewer.browse.views.CELLS
    width: str = "100px"
    api: str | None = ""

    def api_name(self, column: str) -> str | None:
        return column if self.api == "" else self.api


# Browse's rows (rollouts.index.engine's view: the index row, with the record's `source` as `played_in`, `source`
# where the row came from, and `tokens`) as the list and the API show them, in the order both do. A column of the
# index reaches the store, every source, the engine, the card and the exports by COLUMNS alone; a row here shows
# it on Browse and in its API, with no viewer edit (tests/viewer/test_browse_views.py adds one in a test).
BROWSE_COLUMNS: dict[str, BrowseColumn] = {
    "model": BrowseColumn("model", "list", "text", "240px"),
    "model_name": BrowseColumn("model name"),
    "task_id": BrowseColumn("task", "list", "text", "226px"),
    "difficulty": BrowseColumn("tier", "list", "text", "90px"),
    "reward": BrowseColumn("reward", "list", "3", "72px"),
    "end_reason": BrowseColumn("ended", "list", "text", "150px"),
    "started": BrowseColumn("when", "list", "when", "156px"),
    "episode_id": BrowseColumn("id", "more", "text"),
    "quay": BrowseColumn("quay", "more", "text"),
    "num_ships": BrowseColumn("ships", "more"),
    "submitted": BrowseColumn("submitted", cell="yes_no"),
    "feasible": BrowseColumn("feasible", "more", "yes_no"),
    "cost": BrowseColumn("cost", "more"),
    "optimal_cost": BrowseColumn("optimum", "more"),
    "naive_cost": BrowseColumn("naive cost"),
    "turns": BrowseColumn("turns", "more"),
    "checks": BrowseColumn("checks", "more"),
    "tokens": BrowseColumn("tokens", "more", api=None),
    "input_tokens": BrowseColumn("input tokens"),
    "output_tokens": BrowseColumn("output tokens"),
    "seconds": BrowseColumn("seconds", "more", "1"),
    "errors": BrowseColumn("errors"),
    "run": BrowseColumn("run", "more", "text"),
    "played_in": BrowseColumn("played in", cell="text"),
    "source": BrowseColumn("source", "more", "text"),
    # Not an index column: the count of a page's flags on its steps, joined for the page's ids (Archive.flag_counts).
    "flags": BrowseColumn("flags", "more", "blank_if_none"),
}


def index_row(record: dict, path: str) -> dict[str, Any]:
    """The flat row for `record`, stored at `path` (repo-relative). Never raises on odd values: they become null."""
    view = Record(record)
    task, grade, usage = view.task, view.grade, _dict(record.get("usage"))
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
        "submitted": view.submitted,
        "feasible": bool(grade.get("feasible")),
        "cost": grade.get("cost"),
        "optimal_cost": _first(task.get("optimal_cost"), grade.get("optimal_cost")),
        "naive_cost": _first(task.get("naive_cost"), grade.get("naive_cost")),
        "turns": record.get("turns"),
        "checks": len(view.checks),
        "seconds": record.get("seconds"),
        "input_tokens": usage.get("input_tokens"),
        "output_tokens": usage.get("output_tokens"),
        "end_reason": record.get("end_reason"),
        "errors": len(record["errors"]) if isinstance(record.get("errors"), list) else 0,
        "episode_id": record.get("episode_id"),
        "started": f"{started_at(record):%Y-%m-%dT%H:%M:%SZ}",  # one canonical form for the whole column
        "source": record.get("source"),
        "env_url": record.get("env_url"),
        "schema_version": record.get("schema_version"),
        "path": path,
        **episode_metrics(record),
        **regrade_cells(record),
        **played_under(record),
    }
    return {name: coerce_cell(row[name], kind) for name, kind in COLUMNS.items()}


def regrade_cells(record: dict) -> dict[str, Any]:
    """The index cells of a record's `regrade` (null when it has none)."""
    regrade = _dict(record.get("regrade"))
    grade = _dict(regrade.get("grade"))
    return {"regrade_reward": regrade.get("reward"), "regrade_feasible": grade.get("feasible")}


def played_under(record: dict) -> dict[str, Any]:
    """The index cells of how an episode was played (the reproducibility card's): null where not recorded."""
    limits, switches = _dict(record.get("limits")), record.get("provider_switches")
    return {"app_version": record.get("app_version"), "max_turns": limits.get("max_turns"),
            "max_tokens": limits.get("max_tokens"),
            "provider_switches": len(switches) if isinstance(switches, list) else 0}


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
