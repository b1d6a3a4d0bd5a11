"""`python -m agent ratings [--dir DIR] [--json]`: the arena ratings of a rollout folder.

The same ratings as the `arena` column of Browse's leaderboard (rollouts.ratings, through the archive's read side,
rollouts.archive.Archive.ratings): for every task, every two models with rollouts on it make one battle, decided
by their mean reward there; a Bradley–Terry fit on the Elo scale, baseline:naive at 1000 (without it, the rated
models' mean), 95% intervals from 100 resamples of the tasks, no rating below rollouts.sample_size's minimum of
tasks. Under the table the notes Browse shows under its board (rollouts.ratings.ratings_notes): the real anchor,
who is rated, the ranks several models share and why, each model without a rating and why. The folder is left
byte for byte as it was. `--json` prints one JSON list of
{model, rating, ci_low, ci_high, rank, battles, wins, losses, ties, note, provisional} (null without a rating;
`note` says why; `provisional`: fewer battles than a settled place needs).
Votes on arena matches never enter a rating.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rollouts.layout import INDEX_DIR, RECORDS_DIR, default_rollout_dir


def add_parser(commands: argparse._SubParsersAction) -> None:
    command = commands.add_parser("ratings", help="the arena ratings (Bradley-Terry) of the rollouts in a folder")
    command.add_argument("--dir", type=Path, help="rollout folder (default: ROLLOUT_DIR or ./data/rollouts)")
    command.add_argument("--json", action="store_true", help="one JSON list, one object per model")


def main(args: argparse.Namespace) -> int:
    root = args.dir or default_rollout_dir()
    if not (root / RECORDS_DIR).is_dir() and not (root / INDEX_DIR).is_dir():
        print(f"error: no rollouts in {root} (expected rollouts/ and index/ folders)", file=sys.stderr)
        return 2
    # Imported here: `python -m agent --help` needs neither DuckDB nor numpy.
    from rollouts.archive import Archive
    from rollouts.filters import Filters
    from rollouts.ratings import ratings_json, ratings_markdown

    lines = Archive.of_folder(root).ratings(Filters())
    if args.json:
        print(json.dumps(ratings_json(lines), ensure_ascii=False))
        return 0
    if not lines:
        print(f"no rollouts in {root}", file=sys.stderr)
        return 0
    print(ratings_markdown(lines), end="")
    return 0
