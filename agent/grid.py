"""The task x model grid of a batch run, and how it is cut into shards: one rule for `python -m agent run --shard`
and `python -m agent sweep`, which must agree on which machine plays which cell.

The grid is every (model, task) cell, each played `--repeats` times. `--shard K/N` keeps the K-th of N disjoint
slices: the cells are sorted by task id, then model spec (whatever order they were given in), and cell i goes to
shard i % N + 1 with all its repeats.
"""

from __future__ import annotations

import argparse
import re

from agent.task_api import TaskAPI, valid_task_id
from agent.tasks import closest_tasks, task_for
from berth_env import load_pack

TASK_API_TIMEOUT_S = 30.0
# The name goes into every record and the public board: a bounded, plain alphabet.
RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def check_run_name(run: str) -> None:
    """ValueError saying what is wrong with a run name, if anything."""
    if not RUN_NAME.fullmatch(run):
        raise ValueError(f"run name {run[:40]!r} must be 1-64 letters, digits, '.', '-' or '_', starting "
                         "with a letter or digit")
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}([T ].*)?", run):
        # Arrow reads a date-like string column as a timestamp, so such a run name would not round-trip
        # through datasets.load_dataset.
        raise ValueError(f"run name {run!r} looks like a date; add a word, e.g. 'board-{run}'")


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number of at least 1, not {text!r}")
    return int(text)


def parse_shard(text: str) -> tuple[int, int]:
    """`K/N` -> (K, N), 1 <= K <= N."""
    k, slash, n = text.partition("/")
    if not (slash and k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise argparse.ArgumentTypeError(f"a shard is K/N with 1 <= K <= N, e.g. 2/4; got {text!r}")
    return int(k), int(n)


def task_ids(tasks: list[str] | None, split: str | None, limit: int | None, env_url: str | None) -> list[str]:
    """The tasks a run plays: the ids given (once each, in order; ValueError naming any the catalog does not offer),
    or the first `limit` of a split as the server at `env_url` (else this process's pack) offers them."""
    if tasks:
        given = list(dict.fromkeys(tasks))
        check_task_ids(given, env_url)
        return given
    if env_url:
        with TaskAPI(env_url, timeout_s=TASK_API_TIMEOUT_S) as api:
            found = [t["task_id"] for t in api.tasks(split)]
    else:
        found = [t["task_id"] for t in load_pack().split(split)]
    if not found:
        raise ValueError(f"split {split!r} has no tasks")
    return found[:limit] if limit else found


def check_task_ids(ids: list[str], env_url: str | None) -> None:
    """ValueError naming the ids that are not tasks offered here (agent.tasks.task_for, the app's check too), with
    the closest ones that are, before anything is played."""
    for task_id in ids:
        if not valid_task_id(task_id):
            raise ValueError(f"task id {task_id[:80]!r} must be 1-128 letters, digits, '.', '-' or '_'")
    unknown = [task_id for task_id in ids if task_for(task_id, env_url) is None]
    if not unknown:
        return
    named = ", ".join(repr(t[:80]) for t in unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
    if env_url:
        # The URL is not repeated: it may carry a credential, and the user knows which one they gave.
        raise ValueError(f"unknown task {named}: the --env-url server does not offer it (or could not be reached)")
    raise ValueError(f"unknown task {named}: the closest tasks offered here are {', '.join(closest_tasks(unknown[0]))} "
                     f"(`python -m agent tasks` lists all {len(load_pack().tasks)})")


def grid_cells(task_ids: list[str], models: list[str], shard: tuple[int, int] | None = None) -> list[tuple[str, str]]:
    """The (model, task) cells of the grid, task-major (every model has episodes in flight from the start); with
    `shard` (K, N) only the K-th of N slices. The slices are cut from the grid sorted by task id and model spec, so
    they do not depend on the order the tasks and models were given in."""
    cells = [(model, task_id) for task_id in task_ids for model in models]
    if shard is None:
        return cells
    k, n = shard
    ordered = sorted(set(cells), key=lambda cell: (cell[1], cell[0]))
    mine = {cell for i, cell in enumerate(ordered) if i % n == k - 1}
    return [cell for cell in cells if cell in mine]
