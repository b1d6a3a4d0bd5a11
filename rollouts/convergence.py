"""How fast each model closes in on the optimum, check by check: the data behind Browse's convergence plot.

Input: index rows (an Arrow table or dicts) with `model`, `check_costs` (rollouts.metrics: every check's cost in order,
null where infeasible, as JSON text), `optimal_cost` and `naive_cost`. Nothing is read from the records.

After check k an episode's best plan so far is its cheapest feasible checked plan among checks 1..k. An episode
that stopped checking before k keeps the best it had (it is still part of the population at k, so the share below
only rises with k). Its gap to the optimum is

    gap = (best so far - optimal cost) / max(1, naive cost - optimal cost)

the share of the naive plan's excess over the optimum still left: 0 at the optimum, 1 no better than the naive
plan. It puts tasks on one scale: the optimum of the eval tasks ranges from 10 to thousands, so a gap relative to
the optimum alone would let the cheapest tasks dominate every median (a plan 50 over an optimum of 10 would be a
gap of 5). It is the normalisation of the v2 reward.

Before its first feasible check an episode has no gap; instead of inventing one, the gap's median and quartiles at
k are over the episodes with a feasible plan by k, and `feasible_pct` says what share of the model's episodes that
is. Rows whose `check_costs` is null (not filled in) are left out; rows without reference costs count in
`feasible_pct` but have no gap.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from itertools import chain

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MAX_CHECKS = 50  # checks past this are not drawn (the servers allow 10)
COLUMNS = ["model", "check", "episodes", "feasible_pct", "gap_q1", "gap_median", "gap_q3"]
SCHEMA = pa.schema([("model", pa.string()), ("check", pa.int64()), ("episodes", pa.int64()),
                    *[(name, pa.float64()) for name in COLUMNS[3:]]])
_PLAIN = r"\[(?:\s*(?:-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|null)\s*(?:,\s*(?:-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|null)\s*)*)?\]"


def best_so_far(lists: list[list]) -> np.ndarray:
    """An (episodes x checks) matrix of the cheapest feasible cost among checks 1..k, from each episode's check
    costs (None for an infeasible check); NaN before an episode's first feasible check."""
    lengths = np.fromiter((min(len(costs), MAX_CHECKS) for costs in lists), dtype=np.int64, count=len(lists))
    width = int(lengths.max()) if len(lists) else 0
    matrix = np.full((len(lists), width), np.nan)
    if not width:
        return matrix
    flat = np.array(list(chain.from_iterable(costs[:MAX_CHECKS] for costs in lists)), dtype=float)  # None: NaN
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    matrix[np.repeat(np.arange(len(lists)), lengths), np.arange(len(flat)) - starts] = flat
    # fmin skips NaN: a check that was not feasible (or past an episode's last check) keeps the best so far.
    return np.fmin.accumulate(matrix, axis=1)


def convergence(rows: pa.Table | Iterable[dict]) -> pa.Table:
    """Per model and check number k = 1, 2, ...: how many episodes, the share with a feasible plan by k (%), and the
    quartiles of their gap to the optimum (module docstring). Columns: COLUMNS; models in order of appearance."""
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(list(rows))
    if not table.num_rows or not {"model", "check_costs"} <= set(table.column_names):
        return _empty()
    lists = check_cost_lists(table.column("check_costs").to_pylist())
    kept = np.array([costs is not None for costs in lists], dtype=bool)
    table = table.filter(pa.array(kept))
    best = best_so_far([costs for costs in lists if costs is not None])
    if not table.num_rows or not best.shape[1]:
        return _empty()
    optimum = _numbers(table, "optimal_cost")
    scale = np.maximum(1.0, _numbers(table, "naive_cost") - optimum)
    gaps = (best - optimum[:, None]) / scale[:, None]
    checks = np.arange(1, best.shape[1] + 1)
    models = np.array([str(m) for m in table.column("model").to_pylist()], dtype=object)
    columns: dict[str, list] = {name: [] for name in COLUMNS}
    for model in dict.fromkeys(models):
        mine = models == model
        q1, median, q3 = column_quantiles(gaps[mine], (0.25, 0.5, 0.75))
        columns["model"] += [model] * len(checks)
        columns["check"] += checks.tolist()
        columns["episodes"] += [int(mine.sum())] * len(checks)
        columns["feasible_pct"] += (100.0 * (~np.isnan(best[mine])).mean(axis=0)).tolist()
        for name, values in (("gap_q1", q1), ("gap_median", median), ("gap_q3", q3)):
            columns[name] += values.tolist()
    return pa.table(columns, schema=SCHEMA)


def _empty() -> pa.Table:
    return SCHEMA.empty_table()


def column_quantiles(values: np.ndarray, quantiles: Iterable[float]) -> list[np.ndarray]:
    """Each column's quantiles over its known (non-NaN) values, interpolated linearly as numpy's default does;
    NaN for a column without any. (np.nanpercentile gives the same, but walks the columns in Python.)"""
    ordered = np.sort(values, axis=0)  # NaN sorts last
    known = (~np.isnan(values)).sum(axis=0)
    out = []
    for q in quantiles:
        position = q * np.maximum(known - 1, 0)
        below = np.floor(position).astype(np.int64)
        above = np.minimum(below + 1, np.maximum(known - 1, 0))
        low = np.take_along_axis(ordered, below[None, :], axis=0)[0]
        high = np.take_along_axis(ordered, above[None, :], axis=0)[0]
        out.append(np.where(known > 0, low + (high - low) * (position - below), np.nan))
    return out


def check_cost_lists(cells: list) -> list[list | None]:
    """Each `check_costs` cell as a list of costs (None where infeasible), or None when it is not one.

    Cells that are plain lists of numbers and nulls (all that index_row writes) are parsed in one JSON call for the
    whole column; anything else, cell by cell, so an odd cell can never spill into its neighbours."""
    texts = pa.array([c if isinstance(c, str) else None for c in cells], pa.string())
    plain = pc.fill_null(pc.match_substring_regex(texts, f"^{_PLAIN}$"), False).to_numpy(zero_copy_only=False)
    values: list = [None] * len(cells)
    if plain.any():
        # A plain cell holds only numbers and nulls, so the one parse needs no checking afterwards.
        parsed = json.loads("[" + ",".join(c for c, ok in zip(cells, plain, strict=True) if ok) + "]")
        for i, value in zip(np.flatnonzero(plain), parsed, strict=True):
            values[i] = value
    for i in np.flatnonzero(~plain):
        values[i] = _costs(_parse(cells[i]))
    return values


def _parse(cell: object) -> object:
    if not isinstance(cell, str):
        return None
    try:
        return json.loads(cell)
    except ValueError:
        return None


def _costs(value: object) -> list | None:
    if not isinstance(value, list):
        return None
    return [c if isinstance(c, int | float) and not isinstance(c, bool) else None for c in value]


def _numbers(table: pa.Table, column: str) -> np.ndarray:
    if column not in table.column_names:
        return np.full(table.num_rows, np.nan)
    values = table.column(column).to_pylist()
    return np.array([v if isinstance(v, int | float) and not isinstance(v, bool) else np.nan for v in values],
                    dtype=float)
