"""The pandas Browse engine the DuckDB one (rollouts.index.engine) replaced, kept as the oracle it is tested against:
index rows from every source in one pandas frame.

The frame holds only index rows (one flat row per rollout, `rollouts.schema.COLUMNS`). Its `source` column says
where a row came from: `local`, `hub`, `local+hub` (both) or `upstream`; the record's own `source` (`space` or
`cli`) is kept as `played_in`. Filter, sort and page it with tests.oracle.pandas_query; `heatmap_of` is the heatmap.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from rollouts.board import Heatmap
from rollouts.schema import COLUMNS, TIERS
from rollouts.sources import SOURCES

CATEGORIES = ("run", "model", "model_name", "task_id", "difficulty", "quay", "end_reason", "played_in",
              "env_url", "source")


# -- the frame -------------------------------------------------------------------------------------------------


def frame_from_tables(tables: dict[str, pa.Table | None]) -> pd.DataFrame:
    """One frame from each source's index table (keys from SOURCES), one row per episode id.

    A rollout both in the local folder and on the Hub is one `local+hub` row (the local row, which is never older).
    Rows are sorted newest first, rows without a start time (upstream's) last.
    """
    tables = {name: t for name, t in tables.items() if t is not None and t.num_rows}
    local, hub = tables.get("local"), tables.get("hub")
    on_hub = None
    if local is not None and hub is not None:
        # In Arrow, not pandas: pandas' isin on Arrow strings walks the value list in Python (0.3 s per 100k ids).
        on_hub = pc.is_in(local.column("episode_id"), value_set=hub.column("episode_id")).to_numpy(
            zero_copy_only=False)
        tables["hub"] = hub.filter(pc.invert(pc.is_in(hub.column("episode_id"),
                                                       value_set=local.column("episode_id"))))
    parts = []
    for name in SOURCES:
        table = tables.get(name)
        if table is None:
            continue
        part = table.to_pandas().rename(columns={"source": "played_in"})
        part["source"] = name
        if name == "local" and on_hub is not None:
            part.loc[on_hub, "source"] = "local+hub"
        parts.append(part)
    if not parts:
        return _empty_frame()
    frame = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    frame = frame.drop_duplicates("episode_id", keep="first")
    return _finish(frame)


def _finish(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.assign(
        submitted=frame["submitted"].fillna(False).astype(bool),
        feasible=frame["feasible"].fillna(False).astype(bool),
        reward=pd.to_numeric(frame["reward"], errors="coerce").fillna(0.0),
        tokens=pd.to_numeric(frame["input_tokens"], errors="coerce").fillna(0)
        + pd.to_numeric(frame["output_tokens"], errors="coerce").fillna(0),
        date=frame["started"].str.slice(0, 10),
    )
    for column in CATEGORIES:
        frame[column] = frame[column].astype("category")
    frame = frame.sort_values("started", ascending=False, na_position="last", kind="stable")
    return frame.reset_index(drop=True)


def _empty_frame() -> pd.DataFrame:
    frame = pd.DataFrame({name: pd.Series(dtype=_DTYPES[kind]) for name, kind in COLUMNS.items()})
    return _finish(frame.rename(columns={"source": "played_in"}).assign(source=pd.Series(dtype="str")))


_DTYPES = {str: "str", int: "float64", float: "float64", bool: "bool"}


def heatmap_of(rows: pd.DataFrame) -> Heatmap:
    if rows.empty:
        return Heatmap([], [], [], [], [])
    rows = rows.assign(task_id=rows["task_id"].astype("str"), model=rows["model"].astype("str"),
                       difficulty=rows["difficulty"].astype("str"))
    groups = rows.groupby(["task_id", "model"], sort=False, observed=True)
    stats = groups["reward"].agg(["mean", "size"])
    # The best rollout of a cell: highest reward; rows are newest first, so the first of equals is the newest.
    best = rows.loc[groups["reward"].idxmax().to_numpy(), ["task_id", "model", "episode_id"]]
    best_of = {(r.task_id, r.model): r.episode_id for r in best.itertuples()}
    rank = {tier: i for i, tier in enumerate(TIERS)}
    tiers = rows.groupby("task_id", sort=False)["difficulty"].first()
    tasks = sorted(((str(tiers[t]), t) for t in tiers.index), key=lambda p: (rank.get(p[0], len(rank)), p[1]))
    models = list(rows["model"].value_counts().index)
    cells = stats.to_dict("index")
    mean = [[_plain_number(cells.get((t, m), {}).get("mean")) for m in models] for _, t in tasks]
    count = [[int(cells.get((t, m), {}).get("size", 0)) for m in models] for _, t in tasks]
    best_ids = [[best_of.get((t, m)) for m in models] for _, t in tasks]
    return Heatmap(tasks, models, mean, count, best_ids)


def _plain_number(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


