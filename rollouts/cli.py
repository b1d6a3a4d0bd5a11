"""`python -m rollouts`: maintain a rollout folder (the write side; reading is `python -m agent board`).

    python -m rollouts compact [--dir D] [--min-bytes N]   fold the appended JSONL index rows into Parquet
    python -m rollouts fill-index [--dir D]                fill the columns older index rows lack, from the records
    python -m rollouts traces --backfill [--dir D]         write the agent-trace files its records lack
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rollouts.layout import default_rollout_dir


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rollouts", description="Maintain a rollout folder.")
    commands = parser.add_subparsers(dest="command", required=True)
    compact = commands.add_parser("compact", help="fold the appended JSONL index rows into Parquet index files")
    compact.add_argument("--min-bytes", type=int, default=0, help="only JSONL files at least this large")
    fill = commands.add_parser("fill-index", help="fill in the index columns that rows of an older version lack")
    traces = commands.add_parser("traces", help="a folder's agent-trace files, traces/<date>/<episode_id>.jsonl")
    traces.add_argument("--backfill", action="store_true",
                        help="write the trace file of every record that lacks one (rollouts saved before traces)")
    for command in (compact, fill, traces):
        command.add_argument("--dir", type=Path, help="rollout folder (default: ROLLOUT_DIR or ./data/rollouts)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "traces" and not args.backfill:
        parser.error("nothing to do: `traces --backfill` writes the trace files the folder's records lack")
    root = args.dir or default_rollout_dir()
    if not root.is_dir():
        print(f"error: no rollout folder at {root}", file=sys.stderr)
        return 2
    if args.command == "compact":
        from rollouts.index.compaction import compact

        done = compact(root, min_bytes=args.min_bytes)
        print(f"folded {done.rows} index row(s) from {done.files} file(s) into Parquet; {done.kept} line(s) left in "
              "the JSONL files (unreadable, or lacking columns until `fill-index`)")
        return 0
    if args.command == "traces":
        return _backfill_traces(root)
    from rollouts.store import RolloutStore

    with RolloutStore(root) as store:
        filled = store.fill_index()
    print(f"filled in the index columns of {filled} row(s)")
    return 0


def _backfill_traces(root: Path) -> int:
    from rollouts.traces import backfill

    done = backfill(root)
    print(f"wrote {done.new} missing trace file(s) and {done.updated} outdated one(s); {done.same} already up to "
          f"date; {len(done.damaged)} damaged record(s) skipped")
    for rel, why in done.damaged:
        print(f"skipped {rel}: {why}")
    return 0
