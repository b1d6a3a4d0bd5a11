"""The board with its frontier, trust marks and pass^k at scale (issue 31): what Browse's leaderboard, `/board.png`
and `python -m agent board --plot` cost over a million index rows, against the board alone.

    python bench/frontier_bench.py [--rows 1000000] [--rounds 5]

Writes `--rows` index rows (testkit/index_rows.py) as a rollout folder's Parquet index files, opens the folder as
the CLI does (rollouts.archive.Archive.of_folder) and times, fresh each round (nothing remembered) and interleaved:

- board: rollouts.board.board with the arena ratings joined (pass^k included: it is one of the board's figures);
- + marks: the same with the standard (catalog.standard), adding the trust query (rollouts.board_trust);
- + frontier: the marked board, then its frontier (rollouts.frontier) and the SVG (rollouts.board_plot);
- + PNG: all that rasterised (rollouts.raster), what `/board.png` draws once per board (then kept by hash).

Each over every row and over one tier (a filtered board). Prints a Markdown table of medians, each with its ratio
to the board alone, for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from catalog.standard import default_standard  # noqa: E402
from rollouts import board as boards  # noqa: E402
from rollouts.archive import Archive  # noqa: E402
from rollouts.board_plot import frontier_svg, subtitle  # noqa: E402
from rollouts.filters import Filters  # noqa: E402
from rollouts.frontier import frontier  # noqa: E402
from rollouts.raster import svg_png  # noqa: E402
from testkit.index_rows import index_table, write_index_folder  # noqa: E402

STEPS = ("board", "+ marks", "+ frontier", "+ PNG")


def one_round(archive: Archive, filters: Filters) -> dict[str, float]:
    where, params = archive.where(filters)
    rated = archive.ratings(filters)  # remembered after the first round: the ratings are not what is timed
    standard = default_standard()
    out = {}
    start = time.perf_counter()
    boards.board(archive.engine, where, params, rated=rated)
    out["board"] = time.perf_counter() - start
    start = time.perf_counter()
    lines = boards.board(archive.engine, where, params, rated=rated, standard=standard)
    out["+ marks"] = time.perf_counter() - start
    svg = frontier_svg(frontier(lines), subtitle=subtitle(lines))
    out["+ frontier"] = time.perf_counter() - start
    svg_png(svg)
    out["+ PNG"] = time.perf_counter() - start
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        made = time.perf_counter()
        write_index_folder(root, index_table(args.rows))
        (root / "rollouts").mkdir()
        print(f"{args.rows:,} rows written in {time.perf_counter() - made:.1f} s", file=sys.stderr)
        archive = Archive.of_folder(root)
        cases = {"every row": Filters(), "one tier (storm)": Filters.parse(tier="storm")}
        for filters in cases.values():
            one_round(archive, filters)  # warm: the ratings remembered, DuckDB's caches filled
        timings = {case: {step: [] for step in STEPS} for case in cases}
        for _ in range(args.rounds):
            for case, filters in cases.items():
                for step, seconds in one_round(archive, filters).items():
                    timings[case][step].append(seconds)
    print(f"| {args.rows:,} rows | " + " | ".join(STEPS) + " |")
    print("|---|" + "---:|" * len(STEPS))
    for case, steps in timings.items():
        base = statistics.median(steps["board"])
        cells = [f"{statistics.median(v) * 1000:.0f} ms ({statistics.median(v) / base:.2f}x)" for v in steps.values()]
        print(f"| {case} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
