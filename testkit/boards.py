"""The leaderboard over a handful of made-up rows, computed as the product computes it: rollouts.board over a real
index engine holding the rows (each gets an episode id, and start times newest first in the order given, so the
bootstrap resamples them in that order)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from rollouts.board import board
from rollouts.index.engine import IndexEngine
from rollouts.index.format import INDEX_SCHEMA


def rows_table(rows: list[dict]) -> pa.Table:
    cells = []
    for i, row in enumerate(rows):
        moment = f"2026-11-01T{23 - i // 3600 % 24:02d}:{59 - i // 60 % 60:02d}:{59 - i % 60:02d}Z"
        cells.append({**{name: None for name in INDEX_SCHEMA.names}, "episode_id": f"e{i:06d}", "started": moment,
                      **row})
    return pa.Table.from_pylist(cells, schema=INDEX_SCHEMA)


def board_of(rows: list[dict], **options: Any) -> list[dict]:
    engine = IndexEngine()
    engine.set_table("local", rows_table(rows))
    return board(engine, **options)


def by_model(lines: list[dict]) -> dict[str, dict]:
    return {line["model"]: line for line in lines}
