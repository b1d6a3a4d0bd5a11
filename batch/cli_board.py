"""`python -m agent board [--dir DIR] [--wide | --json] [--sort COLUMN] [--run RUN] [--snapshot [--dataset REPO]]
[--plot FILE.png|FILE.svg] [--card MODEL]`: the leaderboard of a folder.

The same board as Browse and its API, arena figures included (rollouts.board, through the archive's read side,
rollouts.archive.Archive.board), over every rollout of the folder (or of one run): the folder is left byte for byte
as it was. Rows written by an older version lack the newest columns until `python -m rollouts fill-index` (or the
app's start) fills them in; their figures read as unknown meanwhile. By default a compact table that fits a
100-column terminal (model, n, mean reward with its interval, per tier, feasible); `--wide` prints every figure as a
Markdown table (a run's board.md, without the arena's); `--json` one JSON object per model and line, under the keys
Browse's API gives (rollouts.board_text.board_json). The notes under the table (small samples, prices) are
rollouts.board_text's, as Browse shows them. `--snapshot` is the one writer: today's board of every rollout in the
folder and the battles of its ratings, as dated files (rollouts.board_files), pushed with `--dataset`.
`--plot` writes the board's cost x reward frontier (rollouts.frontier, drawn by rollouts.board_plot, a PNG through
rollouts.raster), the same figure as Browse's and `/board.png`; with `--json` it prints the figure's points.
`--card MODEL` prints that model's reproducibility card (rollouts.board_trust) against the app's standard
(catalog.standard): verified, or which condition fails; provisional, or not.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rollouts import settings
from rollouts.board import columns, sort_board
from rollouts.layout import INDEX_DIR, RECORDS_DIR, default_rollout_dir

if TYPE_CHECKING:
    from rollouts.archive import Archive

PUSH_TIMEOUT_S = 300.0


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
    command.add_argument("--snapshot", action="store_true",
                         help="write today's board (every rollout of the folder) and its battles to "
                              "boards/<YYYY-MM-DD>.jsonl and battles/<YYYY-MM-DD>.jsonl in the folder, instead of printing it")
    command.add_argument("--dataset", help="with --snapshot: push the folder's new files to this Hub dataset "
                                           "(needs HF_TOKEN)")
    command.add_argument("--plot", type=Path, metavar="FILE",
                         help="write the cost x reward frontier to FILE (.png, 1200x630, or .svg)")
    command.add_argument("--card", metavar="MODEL", help="print one model's reproducibility card (verified or not, "
                                                         "and why)")


def main(args: argparse.Namespace) -> int:
    root = args.dir or default_rollout_dir()
    if not (root / RECORDS_DIR).is_dir() and not (root / INDEX_DIR).is_dir():
        print(f"error: no rollouts in {root} (expected rollouts/ and index/ folders)", file=sys.stderr)
        return 2
    from rollouts.archive import Archive
    from rollouts.board_text import board_document, board_json, board_terminal
    from rollouts.filters import Filters

    if args.plot is not None and args.plot.suffix.lower() not in (".png", ".svg"):
        print(f"error: --plot writes a .png or an .svg file, not {args.plot.name!r}", file=sys.stderr)
        return 2
    from catalog.standard import default_standard

    archive = Archive.of_folder(root)
    archive.standard = default_standard()
    if args.snapshot:
        return _snapshot(archive, root, args.dataset)
    if args.dataset:
        print("error: --dataset goes with --snapshot (the board itself only reads)", file=sys.stderr)
        return 2
    lines = sort_board(archive.board(Filters(), same_tasks=args.same_tasks, run=args.run), args.sort,
                       descending=not args.ascending)
    if args.card is not None:
        return _card(archive, args, lines)
    if args.plot is not None:
        return _plot(lines, args.plot, as_json=args.json)
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


def _snapshot(archive: Archive, root: Path, dataset: str | None) -> int:
    """Today's snapshot files in the folder (rollouts.board_files), then, with a dataset, one push of the folder."""
    from rollouts.board_files import write_snapshot

    token = settings.HF_TOKEN.get()
    if dataset and not token:
        print("error: --dataset needs HF_TOKEN to push", file=sys.stderr)
        return 2
    for path in write_snapshot(archive, root):
        print(f"wrote {path}")
    if not dataset:
        return 0
    from rollouts.hub_push import HubPusher

    pusher = HubPusher(root, dataset, token=token, endpoint=settings.HF_ENDPOINT.get())
    pusher.start()
    try:
        pushed = pusher.flush(timeout=PUSH_TIMEOUT_S)
    finally:
        pusher.close()
    error = pusher.status()["last_error"]
    if not pushed or error:
        print(f"error: the push to {dataset} did not finish: {error or 'timed out'}; the files stay in {root} and "
              "the next push takes them", file=sys.stderr)
        return 1
    print(f"pushed to {dataset}")
    return 0


def _plot(lines: list[dict], path: Path, *, as_json: bool) -> int:
    """The frontier to `path` (PNG or SVG by its suffix); its points as JSON lines with `as_json`."""
    from rollouts.board_plot import frontier_svg, subtitle
    from rollouts.frontier import frontier, point_json

    figure = frontier(lines)
    svg = frontier_svg(figure, subtitle=subtitle(lines))
    if path.suffix.lower() == ".png":
        from rollouts.raster import svg_png

        body = svg_png(svg)
    else:
        body = svg.encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    if as_json:
        for point in figure.points:
            print(json.dumps(point_json(point), ensure_ascii=False))
    names = ", ".join(p.model for p in figure.frontier) or "none"
    print(f"wrote {path}: {len(figure.points)} models placed, on the frontier: {names}", file=sys.stderr)
    return 0


def _card(archive: Archive, args: argparse.Namespace, lines: list[dict]) -> int:
    """One model's reproducibility card, or a clear error naming the models there are."""
    from rollouts.board_trust import card_markdown
    from rollouts.filters import Filters

    facts = archive.trust(Filters(), same_tasks=args.same_tasks, run=args.run).get(args.card)
    if facts is None or archive.standard is None:
        known = ", ".join(line["model"] for line in lines) or "none"
        print(f"error: no model {args.card!r} on this board (models: {known})", file=sys.stderr)
        return 2
    print(f"# {args.card}\n\n{card_markdown(facts, archive.standard)}")
    return 0
