"""The tasks of a batch run, the task x model grid, and how it is cut into shards: one rule for `python -m agent run`
(`--shard` included) and `python -m agent sweep`, which must agree on which tasks are played and which machine
plays which cell.

The tasks: the ids given, or a split's, only of the tiers asked for (`--tier`); `--limit N` takes N of them spread
over the tiers (`spread_sample`: each tier its share of N, at least one each while N allows, drawn with a fixed
seed from the tier's ids in sorted order), so every machine that asks draws the same N, and a board of ten tasks
has a figure in every tier.

The grid is every (model, task) cell, each played `--repeats` times. `--shard K/N` keeps the K-th of N disjoint
slices: the cells are sorted by task id, then model spec (whatever order they were given in), and cell i goes to
shard i % N + 1 with all its repeats.
"""

from __future__ import annotations

import argparse
import math
import random
import re
import textwrap
from collections.abc import Sequence

from agent.limits import valid_task_id
from berth_env import TIERS, load_pack
from catalog.task_api import TaskAPI
from catalog.tasks import closest_tasks, task_for

TASK_API_TIMEOUT_S = 30.0
LINE_COLUMNS = 100  # the chosen ids, wrapped for a terminal
SAMPLE_SEED = "berth-arena-tasks-1"  # changing it changes every --limit sample: resumed runs would not resume
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


def task_ids(tasks: list[str] | None, split: str | None, limit: int | None, env_url: str | None,
             tiers: Sequence[str] | None = None) -> list[str]:
    """The tasks a run plays: the ids given (once each, in order; ValueError naming any the catalog does not offer),
    or a split's as the server at `env_url` (else this process's pack) offers them, only of `tiers` if given,
    `limit` of them spread over the tiers."""
    if tasks:
        if tiers:
            raise ValueError("--tier picks from a split: give --split with it, not --task")
        given = list(dict.fromkeys(tasks))
        check_task_ids(given, env_url)
        return given
    if env_url:
        with TaskAPI(env_url, timeout_s=TASK_API_TIMEOUT_S) as api:
            found = [(t["task_id"], str(t.get("difficulty") or "")) for t in api.tasks(split)]
    else:
        found = [(t["task_id"], str(t.get("difficulty") or "")) for t in load_pack().split(split)]
    if not found:
        raise ValueError(f"split {split!r} has no tasks")
    if tiers:
        offered = sorted({tier for _, tier in found}, key=_tier_rank)
        found = [(task, tier) for task, tier in found if tier in tiers]
        if not found:
            raise ValueError(f"split {split!r} has no tasks of tier {', '.join(tiers)}; its tiers: "
                             f"{', '.join(offered)}")
    if limit is not None and limit < 1:
        raise ValueError(f"--limit must be at least 1, not {limit}")
    return spread_sample(found, limit) if limit else [task for task, _ in found]


def spread_sample(tasks: Sequence[tuple[str, str]], n: int, seed: str = SAMPLE_SEED) -> list[str]:
    """n of the (task id, tier) pairs, spread over the tiers: each tier its share of n by its size (the largest
    remainders rounding up), at least one each while n allows; within a tier a seeded draw from its ids sorted, so
    the same tasks and n give the same sample in any order. The sample comes tier by tier, easiest first."""
    groups: dict[str, list[str]] = {}
    for task, tier in tasks:
        groups.setdefault(tier, []).append(task)
    if n >= len(tasks):
        return [task for task, _ in tasks]
    order = sorted(groups, key=_tier_rank)
    share = {tier: n * len(groups[tier]) / len(tasks) for tier in order}
    least = int(n >= len(order))
    take = {tier: min(len(groups[tier]), max(math.floor(share[tier]), least)) for tier in order}
    while sum(take.values()) > n:  # the minimum of one each overshot: give back from a tier above it, never below
        tier = max((t for t in order if take[t] > least), key=lambda t: (take[t] - share[t], take[t]))
        take[tier] -= 1
    while sum(take.values()) < n:
        tier = max((t for t in order if take[t] < len(groups[t])), key=lambda t: (share[t] - take[t], len(groups[t])))
        take[tier] += 1
    return [task for tier in order
            for task in sorted(random.Random(f"{seed}:{tier}").sample(sorted(set(groups[tier])), take[tier]))]


def _tier_rank(tier: str) -> tuple[int, str]:
    return (TIERS.index(tier) if tier in TIERS else len(TIERS), tier)


def describe_tasks(tasks: list[str], split: str | None, limit: int | None, tiers: Sequence[str] | None) -> str:
    """The line a run or a sweep prints about the tasks it chose, when it chose them (--limit or --tier)."""
    how = [f"{len(tasks)} task{'s' * (len(tasks) != 1)} of split {split}"]
    if tiers:
        how.append(f"tier {', '.join(tiers)}")
    if limit:
        how.append("a seeded sample spread over the tiers")
    ids = textwrap.fill(" ".join(tasks), LINE_COLUMNS, initial_indent="  ", subsequent_indent="  ",
                        break_long_words=False, break_on_hyphens=False)
    return ", ".join(how) + ":\n" + ids


def check_task_ids(ids: list[str], env_url: str | None) -> None:
    """ValueError naming the ids that are not tasks offered here (catalog.tasks.task_for, the app's check too), with
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
