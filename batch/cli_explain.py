"""`python -m agent explain EPISODE_ID [--dir DIR] [--json]`: where a rollout's final plan loses to the optimum.

The gap between the plan's cost and the task's proven optimum, split ship by ship (berth_env/gap.py: each ship's
cost here minus its cost in the reference optimum; the differences sum to the gap exactly); for an infeasible
plan, which ships break which rules. The task comes from the catalog (the embedded pack, or the tasks dataset once
loaded), since the split needs the task's reference plans. The folder is only read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rollouts.layout import default_rollout_dir


def add_parser(commands: argparse._SubParsersAction) -> None:
    command = commands.add_parser("explain", help="a rollout's gap to the optimum, ship by ship")
    command.add_argument("episode_id", help="the rollout's episode id (the end of its /r/<id> link)")
    command.add_argument("--dir", type=Path, help="rollout folder (default: ROLLOUT_DIR or ./data/rollouts)")
    command.add_argument("--json", action="store_true", help="one JSON object: gap, cost, ships or broken")


def main(args: argparse.Namespace) -> int:
    from berth_env import PlanError
    from berth_env.gap import split_gap
    from catalog.tasks import task_for
    from rollouts.archive import Archive, RolloutNotFound
    from rollouts.record import Record
    from rollouts.sources import SourceError

    root = args.dir or default_rollout_dir()
    try:
        record, _ = Archive.of_folder(root).record(args.episode_id, wait=0)
    except (RolloutNotFound, SourceError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    view = Record(record)
    task = task_for(view.task_id)
    if task is None or "optimal_plan" not in (task.get("reference") or {}):
        print(f"error: task {view.task_id!r} is not in this catalog with its reference plans, so its optimum is "
              "unknown here", file=sys.stderr)
        return 1
    if view.final_plan is None:
        print(f"{args.episode_id} sent no plan: nothing to explain.")
        return 1
    try:
        split = split_gap(task, view.final_plan)
    except PlanError as exc:
        print(f"{args.episode_id}'s final plan cannot be read as a plan: {exc}")
        return 1
    if args.json:
        print(json.dumps({"episode_id": args.episode_id, "task_id": view.task_id, "feasible": split.feasible,
                          "cost": split.cost, "optimal_cost": split.optimal_cost, "gap": split.gap,
                          "ships": [{**_fields(s), "difference": s.difference,
                                     "share": s.share(split.gap or 0)} for s in split.ships],
                          "broken": {str(k): v for k, v in split.broken.items()}}, ensure_ascii=False))
        return 0
    print(f"{args.episode_id}: {view.model} on {view.task_id}, {'submitted' if view.submitted else 'last draft'}\n")
    print(split.markdown(limit=60), end="")
    return 0


def _fields(ship: object) -> dict:
    return {name: getattr(ship, name) for name in ship.__slots__}
