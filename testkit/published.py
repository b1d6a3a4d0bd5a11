"""Test data for Browse: upstream's published Parquet built from our records, and datasets put on testkit/fakehub.py.

`upstream_table(records)` has upstream's `rollouts` schema (the flat columns of its run index plus the JSON-string
columns `final_plan`, `grade`, `steps`, `messages`; no episode id, no start time), written with pyarrow.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

UPSTREAM_CARD = """---
configs:
- config_name: rollouts
  data_files:
  - split: train
    path: rollouts/eval-rollouts.parquet
- config_name: tasks
  data_files:
  - split: train
    path: tasks/tasks.parquet
---

# PortSimEnv (test copy)
"""
UPSTREAM_FILE = "rollouts/eval-rollouts.parquet"


def upstream_row(record: dict, run: str = "published-eval") -> dict:
    task = record.get("task") or {}
    final = record.get("final") or {}
    grade = final.get("grade") or {}
    usage = record.get("usage") or {}
    model = record["model"]
    return {
        "run": run, "model": model, "model_name": model.partition(":")[2].partition("@")[0],
        "task_id": record["task_id"], "difficulty": task.get("difficulty"), "quay": task.get("quay"),
        "num_ships": task.get("ships"), "reward": float(record["reward"]), "submitted": bool(final.get("submitted")),
        "feasible": bool(grade.get("feasible")), "cost": grade.get("cost"), "optimal_cost": task.get("optimal_cost"),
        "naive_cost": task.get("naive_cost"), "turns": record["turns"],
        "checks": sum(1 for s in record["steps"] if s.get("tool") == "check_plan"), "seconds": record["seconds"],
        "input_tokens": usage.get("input_tokens"), "output_tokens": usage.get("output_tokens"),
        "end_reason": record["end_reason"],
        "final_plan": json.dumps(final.get("plan")), "grade": json.dumps(final.get("grade")),
        "steps": json.dumps(record["steps"]), "messages": json.dumps(record["messages"]),
    }


def upstream_table(records: list[dict], run: str = "published-eval") -> pa.Table:
    schema = pa.schema([("run", pa.string()), ("model", pa.string()), ("model_name", pa.string()),
                        ("task_id", pa.string()), ("difficulty", pa.string()), ("quay", pa.string()),
                        ("num_ships", pa.int64()), ("reward", pa.float64()), ("submitted", pa.bool_()),
                        ("feasible", pa.bool_()), ("cost", pa.int64()), ("optimal_cost", pa.int64()),
                        ("naive_cost", pa.int64()), ("turns", pa.int64()), ("checks", pa.int64()),
                        ("seconds", pa.float64()), ("input_tokens", pa.int64()), ("output_tokens", pa.int64()),
                        ("end_reason", pa.string()), ("final_plan", pa.string()), ("grade", pa.string()),
                        ("steps", pa.string()), ("messages", pa.string())])
    return pa.Table.from_pylist([upstream_row(r, run) for r in records], schema=schema)


def parquet_bytes(table: pa.Table, row_group_size: int = 4) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=row_group_size)  # several row groups: opening one row must find its
    return sink.getvalue()


def publish(hub_url: str, repo: str, files: dict[str, bytes], token: str = "hf_test", message: str = "data") -> str:
    """Create `repo` (a dataset) on the fake Hub if needed and commit `files`; the new commit's sha."""
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi(endpoint=hub_url, token=token)
    api.create_repo(repo, repo_type="dataset", exist_ok=True)
    info = api.create_commit(repo, [CommitOperationAdd(path, data) for path, data in files.items()],
                             commit_message=message, repo_type="dataset")
    return info.oid


def folder_files(root: Path) -> dict[str, bytes]:
    """A store folder's dataset files (README, records, index), as the pusher would push them."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not rel.startswith(".") and "/." not in rel:
            out[rel] = path.read_bytes()
    return out
