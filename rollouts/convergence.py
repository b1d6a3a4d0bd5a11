"""How fast each model closes in on the optimum, check by check: the data behind Browse's convergence plot.

Input: index rows (a frame or dicts) with `model`, `check_costs` (rollouts.metrics: every check's cost in order,
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
import warnings
from collections.abc import Iterable

import numpy as np
import pandas as pd

MAX_CHECKS = 50  # checks past this are not drawn (the servers allow 10)
COLUMNS = ["model", "check", "episodes", "feasible_pct", "gap_q1", "gap_median", "gap_q3"]


def best_so_far(lists: list[list | None]) -> np.ndarray:
    """An (episodes x checks) matrix of the cheapest feasible cost among checks 1..k, from each episode's check
    costs (None for an infeasible check); NaN before an episode's first feasible check."""
    width = min(MAX_CHECKS, max((len(c) for c in lists if c), default=0))
    matrix = np.full((len(lists), width), np.nan)
    for i, costs in enumerate(lists):
        if costs:
            row = np.array([np.nan if c is None else c for c in costs[:width]], dtype=float)
            matrix[i, : len(row)] = row
    # fmin skips NaN: a check that was not feasible (or past an episode's last check) keeps the best so far.
    return np.fmin.accumulate(matrix, axis=1) if width else matrix


def convergence(rows: pd.DataFrame | Iterable[dict]) -> pd.DataFrame:
    """Per model and check number k = 1, 2, ...: how many episodes, the share with a feasible plan by k (%), and the
    quartiles of their gap to the optimum (module docstring). Columns: COLUMNS; models in order of appearance."""
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if frame.empty or not {"model", "check_costs"} <= set(frame.columns):
        return pd.DataFrame(columns=COLUMNS)
    lists = [_costs(text) for text in frame["check_costs"]]
    frame = frame[np.array([costs is not None for costs in lists], dtype=bool)]
    best = best_so_far([costs for costs in lists if costs is not None])
    if frame.empty or not best.shape[1]:
        return pd.DataFrame(columns=COLUMNS)
    optimum = _numbers(frame, "optimal_cost")
    scale = np.maximum(1.0, _numbers(frame, "naive_cost") - optimum)
    gaps = (best - optimum[:, None]) / scale[:, None]
    checks = np.arange(1, best.shape[1] + 1)
    parts = []
    models = frame["model"].astype(str).to_numpy()
    for model in dict.fromkeys(models):
        mine = models == model
        with warnings.catch_warnings():  # a check where no episode has a gap yet: NaN quartiles, on purpose
            warnings.simplefilter("ignore", RuntimeWarning)
            q1, median, q3 = np.nanpercentile(gaps[mine], [25, 50, 75], axis=0)
        parts.append(pd.DataFrame({
            "model": model, "check": checks, "episodes": int(mine.sum()),
            "feasible_pct": 100.0 * (~np.isnan(best[mine])).mean(axis=0),
            "gap_q1": q1, "gap_median": median, "gap_q3": q3,
        }))
    return pd.concat(parts, ignore_index=True)[COLUMNS]


def _costs(text: object) -> list | None:
    """A `check_costs` cell as a list of costs (None where infeasible); None when it is not one."""
    if not isinstance(text, str):
        return None
    try:
        costs = json.loads(text)
    except ValueError:
        return None
    if not isinstance(costs, list):
        return None
    return [c if isinstance(c, int | float) and not isinstance(c, bool) else None for c in costs]


def _numbers(frame: pd.DataFrame, column: str) -> np.ndarray:
    if column not in frame.columns:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)
