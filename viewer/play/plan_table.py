"""The Play tab's plan table: one row per ship (ship, section, berth hour, cranes) to and from the plan list the tools
take (`[{ship, berth_hour, section, cranes}]`). The ship cell reads `<id> · <name>` and is not editable.

A cell that is not a whole number is refused here, naming its row and column, before anything reaches the server:
a typo must not cost a check. An empty cranes cell means the ship's standard count (the tools' rule).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from berth_env import PlanError, canonical_plan, parse_plan
from berth_env.rules import is_crane_task

HEADERS = ["ship", "section", "berth hour", "cranes"]
DATATYPES = ["str", "number", "number", "number"]
_FIELDS = {1: "section", 2: "berth_hour", 3: "cranes"}
_SHIP_CELL = re.compile(r"\s*(\d+)\b")


class TableError(ValueError):
    """A table that is not a plan yet; the message names the row and column to fix (plain text)."""


def plan_rows(task: Mapping[str, Any], plan: Any) -> list[list[Any]]:
    """The table for `plan` (any form the tools read): one row per ship of the task, in ship order; a ship the plan
    leaves out gets empty cells. Raises TableError when the plan cannot be read at all."""
    try:
        parsed = parse_plan(task, plan)
    except PlanError as exc:
        raise TableError(exc.message) from None
    if parsed.problems:
        raise TableError("; ".join(parsed.problems[:3]))
    entries = {entry["ship"]: entry for entry in canonical_plan(parsed.entries)}
    crane_rule = is_crane_task(task)
    rows = []
    for ship in task.get("ships") or []:
        entry = entries.get(ship["id"], {})
        rows.append([f"{ship['id']} · {ship.get('name', '')}".strip(" ·"), entry.get("section"),
                     entry.get("berth_hour"), entry.get("cranes") if crane_rule else None])
    return rows


def rows_plan(task: Mapping[str, Any], rows: Any) -> list[dict[str, int]]:
    """The plan list of a table (a list of rows, or Gradio's `{"headers", "data"}`); TableError for a bad cell."""
    if isinstance(rows, Mapping):
        rows = rows.get("data") or []
    if hasattr(rows, "values") and hasattr(rows, "columns"):  # a pandas frame
        rows = rows.values.tolist()
    ships = task.get("ships") or []
    plan = []
    for number, row in enumerate(rows or [], start=1):
        row = list(row) + [None] * (len(HEADERS) - len(row))
        ship = _ship_id(row[0])
        if ship is None and all(_blank(cell) for cell in row[1:]):
            continue  # an empty row added by mistake
        if ship is None or not 0 <= ship < len(ships):
            raise TableError(f"row {number}: the ship column must hold a ship id of this task")
        entry: dict[str, int] = {"ship": ship}
        for column, name in _FIELDS.items():
            cell = row[column]
            if name == "cranes" and _blank(cell):
                continue
            value = _whole(cell)
            if value is None:
                where = f"row {number} (ship {ship} {ships[ship].get('name', '')})".replace(" )", ")")
                raise TableError(f"{where}: {HEADERS[column]} must be a whole number, not {_shown(cell)}")
            entry[name] = value
        plan.append(entry)
    if not plan:
        raise TableError("the table is empty: every ship needs a row")
    return plan


def _ship_id(cell: Any) -> int | None:
    """The id in a ship cell (`3 · STEEN`, or a bare number)."""
    if isinstance(cell, str):
        match = _SHIP_CELL.match(cell)
        return int(match.group(1)) if match else None
    return _whole(cell)


def _blank(cell: Any) -> bool:
    return cell is None or (isinstance(cell, float) and math.isnan(cell)) or (isinstance(cell, str) and
                                                                             not cell.strip())


def _whole(cell: Any) -> int | None:
    if isinstance(cell, bool) or _blank(cell):
        return None
    if isinstance(cell, int):
        return cell
    try:
        value = float(str(cell).strip())
    except ValueError:
        return None
    return int(value) if math.isfinite(value) and value.is_integer() else None


def _shown(cell: Any) -> str:
    return "an empty cell" if _blank(cell) else repr(str(cell)[:20])


def plan_json(plan: Sequence[Mapping[str, Any]]) -> str:
    """A plan as the JSON text the paste box reads back (`json_rows`), one ship per line: the box shows the table's
    plan, to copy or to edit."""
    return "[\n" + ",\n".join(f"  {json.dumps(dict(entry))}" for entry in plan) + "\n]" if plan else "[]"


def json_rows(task: Mapping[str, Any], text: str) -> list[list[Any]]:
    """The table for a plan pasted as JSON (or anything else the tools read); TableError saying why not."""
    if not (text or "").strip():
        raise TableError("paste a plan first: a JSON list of {ship, berth_hour, section, cranes} objects")
    return plan_rows(task, text)

