"""The board as files to take home: `/board.json` and `/board.csv` (viewer/share/board_files.py serves them) and the
dated snapshots `python -m agent board --snapshot` writes.

- JSON: rollouts.board_text.board_json's objects, the same as `python -m agent board --json` and Browse's API.
- CSV: the same objects as a typed table (rollouts.board.figure_kinds), one row per model, unknown figures empty;
  a model name that a spreadsheet would run as a formula starts with a quote (rollouts.archive.inert_cells).
- Snapshots: the day's board, every figure under the same keys with a `date`, in `boards/<YYYY-MM-DD>.jsonl`, and
  the battles its arena ratings come from (rollouts.ratings.battles) in `battles/<YYYY-MM-DD>.jsonl` (rollouts.layout);
  written again, a day's file is replaced whole. The pusher takes both to the dataset, whose card reads them as the
  `boards` and `battles` configs. JSON lines rather than Parquet: `datasets` reads a whole repo with the builder of its
  first config, which is JSON (rollouts.card).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv

from rollouts.archive import Archive, inert_cells
from rollouts.board import figure_kinds
from rollouts.board_text import board_json, carried
from rollouts.filters import Filters
from rollouts.index.format import ARROW_TYPES
from rollouts.jsonio import atomic_write
from rollouts.layout import BATTLES_DIR, BOARDS_DIR, snapshot_rel
from rollouts.ratings import battles


def board_table(lines: list[dict]) -> pa.Table:
    """The board's JSON objects as one table, each column of its figure's type whatever values are missing."""
    schema = pa.schema([(name, ARROW_TYPES[kind]) for name, kind in figure_kinds(carried(lines)).items()])
    return pa.Table.from_pylist(board_json(lines), schema=schema)


def board_csv(lines: list[dict]) -> bytes:
    """The board as CSV: a header of the JSON keys, one row per model."""
    out = pa.BufferOutputStream()
    pa_csv.write_csv(inert_cells(board_table(lines)), out)
    return out.getvalue().to_pybytes()


def today() -> str:
    return time.strftime("%Y-%m-%d", time.gmtime())


def write_snapshot(archive: Archive, root: Path, day: str | None = None) -> list[Path]:
    """The board of every rollout the archive holds and its battles, as `day`'s snapshot files in `root`
    (default: today, UTC); the paths written."""
    day = day or today()
    board_rows = [{"date": day, **item} for item in board_json(archive.board(Filters()))]
    battle_rows = [{"date": day, **battle} for battle in battles(archive.cells(Filters()))]
    written = []
    for folder, rows in ((BOARDS_DIR, board_rows), (BATTLES_DIR, battle_rows)):
        path = root / snapshot_rel(folder, day)
        atomic_write(path, "".join(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n"
                                   for row in rows).encode("utf-8"))
        written.append(path)
    return written
