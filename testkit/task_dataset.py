"""The tasks dataset's files (DESIGN.md "The tasks dataset") built from real tasks, for tests and benchmarks.

`dataset_files(eval_tasks, train_tasks)` gives `{path: bytes}` for `tasks/eval.parquet`, `tasks/train.parquet` and
a card, ready to publish on testkit/fakehub.py. Rows have the upstream columns: the task as JSON, the two reference
plans as JSON strings, the costs as integers. `as_train(task, n)` relabels a bundled eval task as a train task with a
new id (the bundled pack already serves the eval ids), and `train_copies(tasks, count)` makes many of them.
"""

from __future__ import annotations

import copy
import io
import json
import re
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from berth_env.server import PROMPT_VERSION
from berth_env.texts import rules_text, situation_text

CARD = """---
configs:
- config_name: tasks
  data_files:
  - split: train
    path: tasks/train.parquet
  - split: eval
    path: tasks/eval.parquet
---

# PortSimEnv tasks (test copy)
"""

SCHEMA = pa.schema([
    ("task_id", pa.string()), ("split", pa.string()), ("quay", pa.string()), ("terminal", pa.string()),
    ("difficulty", pa.string()), ("week", pa.int64()), ("week_start_utc", pa.string()), ("num_ships", pa.int64()),
    ("num_disruptions", pa.int64()), ("system_prompt", pa.string()), ("situation", pa.string()),
    ("optimal_cost", pa.int64()), ("naive_cost", pa.int64()), ("greedy_cost", pa.int64()),
    ("proven_optimal", pa.bool_()), ("optimal_plan", pa.string()), ("naive_plan", pa.string()), ("task", pa.string()),
    ("prompt_version", pa.int64()),
])


def task_row(task: dict) -> dict:
    """One dataset row for a full task (reference included)."""
    reference = task["reference"]
    return {
        "task_id": task["task_id"], "split": task["split"], "quay": task["quay"], "terminal": task["terminal"],
        "difficulty": task["difficulty"], "week": task["week"], "week_start_utc": task["week_start_utc"],
        "num_ships": len(task["ships"]), "num_disruptions": len(task.get("disruptions") or []),
        "system_prompt": rules_text(task, 10), "situation": situation_text(task),
        "optimal_cost": reference["optimal_cost"], "naive_cost": reference["naive_cost"],
        "greedy_cost": reference.get("greedy_cost"), "proven_optimal": reference.get("proven_optimal"),
        "optimal_plan": json.dumps(reference["optimal_plan"]), "naive_plan": json.dumps(reference["naive_plan"]),
        "task": json.dumps(task, ensure_ascii=False), "prompt_version": PROMPT_VERSION,
    }


def parquet_bytes(rows: list[dict]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), sink, row_group_size=256)
    return sink.getvalue()


def dataset_files(eval_tasks: Iterable[dict], train_tasks: Iterable[dict], *,
                  broken_rows: Iterable[dict] = ()) -> dict[str, bytes]:
    """The dataset's files; `broken_rows` (already rows) go at the end of the train file."""
    return {
        "README.md": CARD.encode(),
        "tasks/eval.parquet": parquet_bytes([task_row(t) for t in eval_tasks]),
        "tasks/train.parquet": parquet_bytes([*(task_row(t) for t in train_tasks), *broken_rows]),
    }


def as_train(task: dict, number: int) -> dict:
    """The task relabeled `train`, its id's seed replaced by `number` (`dock-24B-w06x1-busy-0` -> `...-busy-<n>`)."""
    copied = copy.deepcopy(task)
    copied["task_id"] = re.sub(r"-\d+$", f"-{number}", task["task_id"])
    copied["split"] = "train"
    return copied


def train_copies(tasks: list[dict], count: int, *, first_number: int = 100) -> list[dict]:
    """`count` train tasks cycling through `tasks`, numbered from `first_number` (ids stay unique)."""
    return [as_train(tasks[i % len(tasks)], first_number + i) for i in range(count)]
