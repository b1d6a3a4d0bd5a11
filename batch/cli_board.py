"""`python -m agent board [--dir DIR] [--wide | --json] [--sort COLUMN] [--run RUN]`: the leaderboard of a folder.

The same board as Browse and its API, arena figures included (rollouts.board, through the archive's read side,
rollouts.archive.Archive.board), over every rollout of the folder (or of one run): the folder is left byte for byte
as it was. Rows written by an older version lack the newest columns until `python -m rollouts fill-index` (or the
app's start) fills them in; their figures read as unknown meanwhile. By default a compact table that fits a
100-column terminal (model, n, mean reward with its interval, per tier, feasible); `--wide` prints every figure as a
Markdown table (a run's board.md, without the arena's); `--json` one JSON object per model and line, under the keys
Browse's API gives (rollouts.board_text.board_json). The notes under the table (small samples, prices) are
rollouts.board_text's, as Browse shows them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rollouts.board import columns, sort_board
from rollouts.layout import INDEX_DIR, RECORDS_DIR, default_rollout_dir


def add_parser(commands: argparse._SubParsersAction) -> None:
    command = commands.add_parser("board", help="the leaderboard of the rollouts in a folder")
    command.add_argument("--dir", type=Path, help="rollout folder (default: ROLLOUT_DIR or ./data/rollouts)")
    shown = command.add_mutually_exclusive_group()
    shown.add_argument("--wide", action="store_true", help="every figure, as a Markdown table (wider than a terminal)")
    shown.add_argument("--json", action="store_true", help="one JSON object per model, one per line")
    command.add_argument("--sort", default="mean_reward", choices=columns(rated=True), metavar="COLUMN",
                         help="board column to sort by, best first (default: %(default)s)")
    command.add_argument("--ascending", action="store_true", help="smallest first (e.g. usd_per_episode)")
    command.add_argument("--run", help="only the rollouts of this run")
    command.add_argument("--same-tasks", action="store_true", help="only tasks every model has played")


def main(args: argparse.Namespace) -> int:
    root = args.dir or default_rollout_dir()
    if not (root / RECORDS_DIR).is_dir() and not (root / INDEX_DIR).is_dir():
        print(f"error: no rollouts in {root} (expected rollouts/ and index/ folders)", file=sys.stderr)
        return 2
    from rollouts.archive import Archive
    from rollouts.board_text import board_document, board_json, board_terminal
    from rollouts.filters import Filters

    archive = Archive.of_folder(root)
    lines = sort_board(archive.board(Filters(), same_tasks=args.same_tasks, run=args.run), args.sort,
                       descending=not args.ascending)
    if args.json:
        for item in board_json(lines):
            print(json.dumps(item, ensure_ascii=False))
        return 0
    if not lines:
        print(f"no rollouts{f' in run {args.run}' if args.run else ''} in {root}", file=sys.stderr)
        return 0
    if args.wide:
        print(board_document(lines), end="")
        return 0
    print(board_terminal(lines), end="")
    return 0
