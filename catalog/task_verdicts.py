"""Whether a task row of the tasks dataset may be offered: its task, and its references checked under our grader.

A row (DESIGN.md "The tasks dataset") carries the task as JSON plus its reference costs and plans as columns. The
task offered is the row's `task` with `reference` set from the columns; it passes only when its optimal plan is
feasible at `optimal_cost` (reward 1.0) and its naive plan costs `naive_cost` under berth_env's grader, so a
grade in this app always measures against an optimum that really is one. A row too large to grade in reasonable
time (its JSON, its ships or its disruptions past agent/limits.py's bounds) is left out the same way, before
anything reads or grades it.

Checking 1,100 tasks takes a second or two, so verdicts are kept in a small JSON file keyed by the Parquet file's
sha256 and by a digest of the grader's own source: a new file or a changed grader is checked again, nothing else.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import berth_env
from agent.limits import TASK_MAX_BYTES, input_size, task_size_problem
from berth_env import check, grade, parse_plan
from berth_env.pack import task_problem

REFERENCE_COLUMNS = ("optimal_cost", "naive_cost", "greedy_cost", "proven_optimal", "optimal_plan", "naive_plan")
# The grader modules a verdict depends on; a change to any of them checks every task again.
GRADER_MODULES = ("plan.py", "check.py", "rules.py", "grade.py")
FILES_KEPT = 6  # Parquet files whose verdicts the cache keeps (two splits, a few revisions)
_UNKNOWN = object()  # a task the verdict cache has no word on


def row_task(row: Mapping[str, Any]) -> dict:
    """The task a row offers: its `task` JSON with `split` from the row and `reference` from the row's columns.

    Raises ValueError naming what is wrong with the row (too large, unreadable JSON, an id or split that
    disagrees).
    """
    for column in ("task", "optimal_plan", "naive_plan"):
        if input_size(row.get(column), TASK_MAX_BYTES) > TASK_MAX_BYTES:
            raise ValueError(f"it is too large: its `{column}` is over {TASK_MAX_BYTES // 1024} KB")
    try:
        task = json.loads(row["task"]) if isinstance(row.get("task"), str) else row.get("task")
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"its `task` is not valid JSON ({exc})") from None
    if not isinstance(task, dict):
        raise ValueError("its `task` is not a JSON object")
    task = dict(task)
    too_large = task_size_problem(task)
    if too_large:
        raise ValueError(too_large)
    if task.get("task_id") != row.get("task_id"):
        raise ValueError(f"its `task` holds task {str(task.get('task_id'))[:80]!r}")
    if row.get("split") is not None:
        if task.get("split") not in (None, row["split"]):
            raise ValueError(f"its `task` says split {str(task.get('split'))[:40]!r}, the row {row['split']!r}")
        task["split"] = row["split"]
    reference = dict(task.get("reference") or {})
    for column in REFERENCE_COLUMNS:
        value = row.get(column)
        if value is None:
            continue
        if column.endswith("_plan") and isinstance(value, str):
            try:
                value = json.loads(value)
            except (ValueError, RecursionError):
                raise ValueError(f"its `{column}` is not valid JSON") from None
        if column.endswith("_cost") and reference.get(column) not in (None, value):
            raise ValueError(f"its `{column}` {value} disagrees with its task's reference ({reference[column]})")
        reference[column] = value
    task["reference"] = reference
    problem = task_problem(task)
    if problem:
        raise ValueError(problem)
    return task


def reference_problem(task: Mapping[str, Any]) -> str | None:
    """Why the task's references do not hold under our grader, or None when they do."""
    reference = task.get("reference") or {}
    for name in ("optimal_cost", "naive_cost", "optimal_plan", "naive_plan"):
        if reference.get(name) is None:
            return f"it has no `{name}`"
    optimal = grade(task, reference["optimal_plan"])
    if not optimal["feasible"]:
        broken = (optimal["violations"] or [{}])[0].get("problem") or (optimal["parse_problems"] or ["?"])[0]
        return f"its optimal plan is infeasible under our grader ({len(optimal['violations'])} violations: " \
               f"{str(broken)[:120]})"
    if optimal["cost"] != reference["optimal_cost"]:
        return f"its optimal plan costs {optimal['cost']} under our grader, not optimal_cost {reference['optimal_cost']}"
    if optimal["reward"] != 1.0:
        return f"its optimal plan earns {optimal['reward']} under our grader, not 1.0"
    naive = check(task, parse_plan(task, reference["naive_plan"]).entries)
    if naive.cost != reference["naive_cost"]:
        said = "is infeasible" if naive.cost is None else f"costs {naive.cost}"
        return f"its naive plan {said} under our grader, not naive_cost {reference['naive_cost']}"
    return None


def row_verdict(row: Mapping[str, Any]) -> tuple[dict | None, str | None]:
    """(the task, None) when the row may be offered, else (None, why not). Never raises."""
    try:
        task = row_task(row)
        problem = reference_problem(task)
    except ValueError as exc:
        return None, str(exc)
    except Exception as exc:  # a task our grader cannot read at all
        return None, f"our grader cannot read it ({type(exc).__name__}: {str(exc)[:160]})"
    return (None, problem) if problem else (task, None)


def file_sha256(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def grader_digest() -> str:
    """A digest of the grader's source: verdicts made by another grader are not reused."""
    root = Path(berth_env.__file__).resolve().parent
    digest = hashlib.sha256()
    for name in GRADER_MODULES:
        digest.update(name.encode() + b"\0" + (root / name).read_bytes())
    return digest.hexdigest()[:16]


class VerdictCache:
    """Verdicts (`{task_id: None or why it is left out}`) per Parquet file sha256, and which pack a set of files
    made, in one small JSON file.

    A missing, unreadable or other-grader file reads as empty; writes replace the file whole, so two processes
    sharing a cache folder never see half a file (the last writer wins, and both wrote true verdicts).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.grader = grader_digest()

    def _read(self) -> dict[str, dict]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        if not isinstance(data, dict) or data.get("grader") != self.grader:
            return {"files": {}, "packs": {}}
        return {part: data[part] if isinstance(data.get(part), dict) else {} for part in ("files", "packs")}

    def get(self, sha256: str) -> dict[str, str | None] | None:
        verdicts = self._read()["files"].get(sha256)
        return verdicts if isinstance(verdicts, dict) else None

    def put(self, sha256: str, verdicts: Mapping[str, str | None]) -> None:
        self._update("files", sha256, dict(verdicts))

    def pack(self, key: str) -> dict | None:
        """What `put_pack` kept for these files: `{"pack": directory name, "left_out": [[task_id, why], ...]}`."""
        made = self._read()["packs"].get(key)
        return made if isinstance(made, dict) and isinstance(made.get("pack"), str) else None

    def put_pack(self, key: str, pack: str, left_out: list[tuple[str, str]]) -> None:
        self._update("packs", key, {"pack": pack, "left_out": [list(item) for item in left_out]})

    def _update(self, part: str, key: str, value: dict) -> None:
        data = self._read()
        entries = {k: v for k, v in data[part].items() if k != key}
        entries[key] = value
        data[part] = dict(list(entries.items())[-FILES_KEPT:])
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(prefix=".verdicts-", dir=self.path.parent)
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            json.dump({"grader": self.grader, **data}, f)
        os.replace(temp, self.path)


def checked_rows(rows: Iterable[Mapping[str, Any]], cached: Mapping[str, str | None] | None
                 ) -> tuple[list[dict], dict[str, str | None], list[tuple[str, str]]]:
    """The tasks of `rows` that pass (in row order), every task id's verdict (for the cache), and the rows left
    out as (task id, why).

    With `cached` verdicts a passing row is only read, not graded again; a row the cache does not know is checked.
    A task id seen before in `rows` is left out (the first one stands).
    """
    tasks: list[dict] = []
    verdicts: dict[str, str | None] = {}
    left_out: list[tuple[str, str]] = []
    for row in rows:
        task_id = str(row.get("task_id"))
        if task_id in verdicts:
            left_out.append((task_id, "the same task id appears earlier in the file"))
            continue
        known = cached.get(task_id, _UNKNOWN) if cached is not None else _UNKNOWN
        if known is None:  # passed before: read the task, skip the grading
            try:
                task, problem = row_task(row), None
            except ValueError as exc:
                task, problem = None, str(exc)
        elif known is not _UNKNOWN:
            task, problem = None, known
        else:
            task, problem = row_verdict(row)
        verdicts[task_id] = problem
        if task is None:
            left_out.append((task_id, problem or "?"))
        else:
            tasks.append(task)
    return tasks, verdicts, left_out
