"""`python -m agent tasks [--split train|eval] [--json]`: the tasks offered here, and loading them for the CLI.

The tasks are the bundled eval tasks plus every checked task of `TASKS_DATASET` (catalog/task_dataset.py), loaded
now and bounded by its timeouts: offline, the bundled ones. `--json` prints one object a line with `task_id, split,
difficulty, quay, num_ships, optimal_cost, naive_cost`; without it, the same as an aligned table.
"""

from __future__ import annotations

import argparse
import json
import sys

from berth_env import load_pack
from catalog.task_dataset import serve_tasks_dataset, tasks_status
from catalog.tasks import choice_of

FIELDS = ("task_id", "split", "difficulty", "quay", "num_ships", "optimal_cost", "naive_cost")


def add_parser(commands: argparse._SubParsersAction) -> None:
    listing = commands.add_parser("tasks", help="list the tasks offered (the bundled ones and the checked tasks of "
                                                "TASKS_DATASET)")
    listing.add_argument("--split", help="only this split (e.g. train, eval)")
    listing.add_argument("--json", action="store_true", help="one JSON object a line")


def serve_tasks() -> None:
    """Load the tasks dataset into this process (bounded) and say on stderr what is served."""
    serve_tasks_dataset()
    status = tasks_status()
    print(f"tasks: {status.text}" + (f" ({status.detail})" if status.detail else ""), file=sys.stderr)


def main(args: argparse.Namespace) -> int:
    """Print the offered tasks in pack order (the bundled ones, then the dataset's)."""
    rows = []
    for task in load_pack().tasks:
        if args.split and task["split"] != args.split:
            continue
        c = choice_of(task)
        rows.append(dict(zip(FIELDS, (c.task_id, c.split, c.difficulty, c.quay, c.ships, c.optimal_cost,
                                      c.naive_cost), strict=True)))
    if args.split and not rows:
        print(f"error: no tasks in split {args.split!r}; splits: {', '.join(load_pack().splits())}", file=sys.stderr)
        return 2
    if args.json:
        sys.stdout.writelines(json.dumps(row) + "\n" for row in rows)
        return 0
    widths = {f: max([len(f), *(len(str(r[f])) for r in rows)]) for f in FIELDS}
    for line in [dict(zip(FIELDS, FIELDS, strict=True)), *rows]:
        print("  ".join(str(line[f]).ljust(widths[f]) for f in FIELDS).rstrip())
    return 0
