"""`python -m agent regrade [--dir DIR | --dataset REPO] [--write]`: grade every stored rollout again.

Prints the flips (rollouts whose reward moved by more than 1e-9 or whose feasibility changed under today's grader,
rollouts.regrade), the rollouts whose checked plans alone are judged differently, and a total line.

`--write` keeps each new grade beside the original in its record (`regrade`) and brings the index rows up to date;
the recorded fields are never changed. It works on a rollout folder (`--dir`), the source of truth its store pushes
from; a Hub dataset (`--dataset`) is a copy that writers keep pushing to, so it is only read: regrade the folder it
is pushed from, and its store pushes the new grades.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tqdm import tqdm

from agent import APP_VERSION
from berth_env import GRADER_VERSION, load_pack
from rollouts import settings
from rollouts.layout import RECORD_GLOB, default_rollout_dir
from rollouts.regrade import flips_table, regrade_records
from rollouts.store import RolloutStore

GRADER = f"{GRADER_VERSION}+app{APP_VERSION}"  # the grader's own version, and the app that ran it


def add_parser(commands: argparse._SubParsersAction) -> None:
    regrade = commands.add_parser("regrade", help="grade every stored rollout again and list what changed")
    where = regrade.add_mutually_exclusive_group()
    where.add_argument("--dir", type=Path, help="rollout folder (default: ROLLOUT_DIR or ./data/rollouts)")
    where.add_argument("--dataset", metavar="REPO", help="a Hub rollout dataset (read only; HF_TOKEN if private)")
    regrade.add_argument("--write", action="store_true",
                         help="keep each new grade in its record (`regrade`) and update the index (--dir only)")


def main(args: argparse.Namespace) -> int:
    if args.write and args.dataset:
        print("error: --write works on a rollout folder (--dir); a Hub dataset is a copy its writers push to, so "
              "regrade the folder it is pushed from", file=sys.stderr)
        return 2
    try:
        root = _snapshot(args.dataset) if args.dataset else (args.dir or default_rollout_dir())
    except Exception as exc:  # any Hub failure: one clear line, no traceback
        print(f"error: cannot read {args.dataset}: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
        return 1
    if not (root / "rollouts").is_dir():
        print(f"error: no rollouts in {args.dataset or root} (expected a rollouts/ folder)", file=sys.stderr)
        return 2
    files = sorted(root.glob(RECORD_GLOB))
    with tqdm(total=len(files), unit="rollout", file=sys.stderr, disable=None, leave=False) as bar:
        report = regrade_records(_records(files, bar), _task_of)
    print(flips_table(report, GRADER), end="")
    if args.write and report.regrades:
        with RolloutStore(root) as store:
            written = store.annotate("regrade", {r.episode_id: r.annotation(GRADER) for r in report.regrades})
        print(f"wrote the new grade into {written} record(s) (the others already had it)")
    return 0


def _records(files: list[Path], bar: tqdm) -> Iterator[tuple[str, Any]]:
    for path in files:
        try:
            yield path.name, json.loads(path.read_bytes())
        except (OSError, ValueError, RecursionError) as exc:
            yield path.name, exc
        bar.update(1)


def _task_of(task_id: str) -> dict | None:
    try:
        return load_pack().get(task_id)
    except KeyError:
        return None


def _snapshot(repo: str) -> Path:
    """The dataset's records, downloaded (huggingface_hub's cache; only files not cached yet are fetched)."""
    from huggingface_hub import snapshot_download

    # Read at call time, not at huggingface_hub's import: where to download from and to.
    folder = snapshot_download(repo, repo_type="dataset", allow_patterns=[RECORD_GLOB],
                               endpoint=settings.HF_ENDPOINT.get(), cache_dir=settings.HF_HUB_CACHE.get(),
                               token=settings.HF_TOKEN.get())
    return Path(folder)
