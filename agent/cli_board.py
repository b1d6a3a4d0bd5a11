"""`python -m agent board [--dir DIR] [--json] [--sort COLUMN] [--run RUN]`: the leaderboard of a rollout folder.

The same board as Browse and a run's board.md (rollouts.leaderboard), over every rollout of the folder (or of one
run). Rows written before a column existed are filled in from their records first (`RolloutStore.fill_index`).
`--json` prints one JSON object per model and line, with the keys of `rollouts.leaderboard.JSON_KEYS`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rollouts.layout import default_rollout_dir
from rollouts.leaderboard import COLUMNS, board_json, board_markdown, leaderboard, price_note
from rollouts.store import RolloutStore


def add_parser(commands: argparse._SubParsersAction) -> None:
    board = commands.add_parser("board", help="the leaderboard of the rollouts in a folder")
    board.add_argument("--dir", type=Path, help="rollout folder (default: ROLLOUT_DIR or ./data/rollouts)")
    board.add_argument("--json", action="store_true", help="one JSON object per model, one per line")
    board.add_argument("--sort", default="mean_reward", choices=COLUMNS, metavar="COLUMN",
                       help="board column to sort by, best first (default: %(default)s)")
    board.add_argument("--ascending", action="store_true", help="smallest first (e.g. usd_per_episode)")
    board.add_argument("--run", help="only the rollouts of this run")
    board.add_argument("--same-tasks", action="store_true", help="only tasks every model has played")


def main(args: argparse.Namespace) -> int:
    root = args.dir or default_rollout_dir()
    if not (root / "rollouts").is_dir() and not (root / "index").is_dir():
        print(f"error: no rollouts in {root} (expected rollouts/ and index/ folders)", file=sys.stderr)
        return 2
    with RolloutStore(root) as store:
        store.fill_index()
        rows = store.rows()
    if args.run:
        rows = [row for row in rows if row.get("run") == args.run]
    board = leaderboard(rows, same_tasks=args.same_tasks, sort=args.sort, descending=not args.ascending)
    if args.json:
        for item in board_json(board):
            print(json.dumps(item, ensure_ascii=False))
        return 0
    if board.empty:
        print(f"no rollouts{f' in run {args.run}' if args.run else ''} in {root}", file=sys.stderr)
        return 0
    print(board_markdown(board))
    print(price_note(), end="")
    return 0
