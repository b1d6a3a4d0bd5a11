"""The numpy leaderboard the SQL one (rollouts.board) replaced, kept as the oracle it is tested against: per model,
over index rows in the order given (one per rollout)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from rollouts.schema import TIERS

BOOTSTRAP_RESAMPLES = 2000
# Resampling costs resamples x episodes; past this many episodes the bootstrap distribution of a mean is normal
# to within the digits we print, so the CI is mean +- 1.96 s/sqrt(n).
BOOTSTRAP_MAX_EPISODES = 1000

COLUMNS = ["model", "n", "mean_reward", "ci_low", "ci_high", *[f"mean_{t}" for t in TIERS], "feasible_pct",
           "optimal_pct", "no_submit", "median_tokens", "median_seconds",
           # How soon and how well (rollouts.metrics), and at what price (rollouts.prices).
           "beat_naive_pct", "beat_naive_low", "beat_naive_high", "feasible_check_pct", "median_checks_to_feasible",
           "mean_output_tokens", "usd_per_episode", "reward_per_usd", "reward_per_usd_low", "reward_per_usd_high"]


def bootstrap_ci(values: np.ndarray, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0,
                 picks: np.ndarray | None = None) -> tuple[float, float]:
    """A 95% percentile-bootstrap interval for the mean (seeded, so a board is reproducible). `picks`: resample
    indices already drawn (resamples x n) to use instead of drawing them."""
    values = np.asarray(values, dtype=float)
    n = len(values)
    if n == 0:
        return float("nan"), float("nan")
    if n == 1:
        return float(values[0]), float(values[0])
    if n > BOOTSTRAP_MAX_EPISODES:
        half = 1.96 * values.std(ddof=1) / np.sqrt(n)
        return float(values.mean() - half), float(values.mean() + half)
    if picks is None:
        picks = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    means = values[picks].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def proportion_ci(hits: int, n: int, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """A 95% percentile-bootstrap interval for a share of yes/no outcomes. Resampling n 0/1 outcomes gives a
    binomial count, so the bootstrap draws the count directly: the same distribution, at no cost per episode."""
    if n == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    shares = rng.binomial(n, hits / n, size=resamples) / n
    low, high = np.percentile(shares, [2.5, 97.5])
    return float(low), float(high)


def ratio_ci(numerator: np.ndarray, denominator: np.ndarray, *, resamples: int = BOOTSTRAP_RESAMPLES,
             seed: int = 0, picks: np.ndarray | None = None) -> tuple[float, float]:
    """A 95% interval for sum(numerator) / sum(denominator) over episodes: percentile bootstrap over episodes, and
    past BOOTSTRAP_MAX_EPISODES the delta method's normal interval (as `bootstrap_ci` does for a mean)."""
    numerator, denominator = np.asarray(numerator, dtype=float), np.asarray(denominator, dtype=float)
    n = len(numerator)
    if n == 0 or denominator.sum() <= 0:
        return float("nan"), float("nan")
    ratio = numerator.sum() / denominator.sum()
    if n == 1:
        return float(ratio), float(ratio)
    if n > BOOTSTRAP_MAX_EPISODES:
        residual = numerator - ratio * denominator
        half = 1.96 * residual.std(ddof=1) / (np.sqrt(n) * denominator.mean())
        return float(ratio - half), float(ratio + half)
    if picks is None:
        picks = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    spent = denominator[picks].sum(axis=1)
    ratios = numerator[picks].sum(axis=1)[spent > 0] / spent[spent > 0]
    low, high = np.percentile(ratios, [2.5, 97.5])
    return float(low), float(high)


_DEFAULTS = (("model", ""), ("task_id", ""), ("difficulty", None), ("reward", 0.0), ("feasible", False),
             ("submitted", False), ("cost", None), ("optimal_cost", None), ("input_tokens", 0), ("output_tokens", 0),
             ("seconds", 0.0), ("beat_naive", None), ("checks_to_feasible", None), ("usd", None))


def rows_frame(rows: Iterable[dict] | pd.DataFrame) -> pd.DataFrame:
    """Index rows as a frame with the columns the board reads, whatever the source left out."""
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    for column, default in _DEFAULTS:
        if column not in frame.columns:
            frame[column] = default
    return frame


def common_tasks(frame: pd.DataFrame) -> pd.DataFrame:
    """Only the tasks every model in the frame has played, so models are compared on the same ground."""
    if frame.empty:
        return frame
    models = frame["model"].nunique()
    per_task = frame.groupby("task_id")["model"].nunique()
    shared = per_task.index[per_task == models]
    return frame[frame["task_id"].isin(shared)]


def leaderboard(rows: Iterable[dict] | pd.DataFrame, *, same_tasks: bool = False, sort: str = "mean_reward",
                descending: bool = True) -> pd.DataFrame:
    """One row per model, columns as in COLUMNS, sorted by `sort` (best mean reward first by default).

    Every figure is over the model's episodes where it applies: the naive-plan share over episodes whose task's
    naive cost is known, the median checks to a feasible plan over episodes that found one (`feasible_check_pct`
    says how many did), dollars and reward per dollar over priced episodes. Intervals are 95% bootstrap intervals.
    """
    if sort not in COLUMNS:
        raise ValueError(f"cannot sort the board by {sort!r}: one of {', '.join(COLUMNS)}")
    frame = rows_frame(rows)
    if same_tasks:
        frame = common_tasks(frame)
    if frame.empty:
        return pd.DataFrame(columns=COLUMNS)
    columns = _numbers(frame)
    # Groups by array slices rather than pandas' groupby: a board has a handful of models, and per-group pandas
    # calls would cost more than the arithmetic (the board is redrawn on every filter change).
    codes, models = pd.factorize(frame["model"].astype(object), sort=False)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(models) + 1))
    columns = {name: values[order] for name, values in columns.items()}  # each model's rows now one slice
    board = [_model_row(str(model), {name: values[bounds[g]:bounds[g + 1]] for name, values in columns.items()})
             for g, model in enumerate(models)]
    return sort_board(pd.DataFrame(board, columns=COLUMNS), sort, descending=descending)


def sort_board(board: pd.DataFrame, by: str, *, descending: bool = True) -> pd.DataFrame:
    """The board sorted by one of its columns, more episodes first among equals, unknown values last."""
    if by not in board.columns:
        raise ValueError(f"cannot sort the board by {by!r}: one of {', '.join(board.columns)}")
    return board.sort_values([by, "n"], ascending=[not descending, False], na_position="last", kind="stable",
                             ignore_index=True)


def _numbers(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """The board's inputs as numpy arrays (NaN where unknown), whatever types the source gave."""
    def number(column: str) -> np.ndarray:
        return pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float, na_value=np.nan)

    def flag(column: str) -> np.ndarray:
        return frame[column].fillna(False).astype(bool).to_numpy()

    naive = frame["beat_naive"].astype(object).map({True: 1.0, False: 0.0})  # anything else (null) stays NaN
    feasible, cost, optimum = flag("feasible"), number("cost"), number("optimal_cost")
    output = number("output_tokens")
    return {
        "reward": np.nan_to_num(number("reward"), nan=0.0), "feasible": feasible, "submitted": flag("submitted"),
        "optimal": feasible & ~np.isnan(cost) & ~np.isnan(optimum) & (cost <= optimum),
        "tokens": np.nan_to_num(number("input_tokens"), nan=0.0) + np.nan_to_num(output, nan=0.0),
        "output_tokens": output, "seconds": number("seconds"),
        "tier": pd.Categorical(frame["difficulty"].astype(object), categories=list(TIERS)).codes,
        "beat_naive": naive.to_numpy(dtype=float, na_value=np.nan),
        "checks_to_feasible": number("checks_to_feasible"), "usd": number("usd"),
    }


def _model_row(model: str, group: dict[str, np.ndarray]) -> dict:
    """One model's line of the board from its episodes' arrays."""
    rewards, n = group["reward"], len(group["reward"])
    # The reward and reward-per-dollar bootstraps share their resamples when every episode is priced.
    picks = np.random.default_rng(0).integers(0, n, size=(BOOTSTRAP_RESAMPLES, n)) \
        if 1 < n <= BOOTSTRAP_MAX_EPISODES else None
    low, high = bootstrap_ci(rewards, picks=picks)
    naive = _known(group["beat_naive"])
    naive_low, naive_high = proportion_ci(int(naive.sum()), len(naive))
    spent = group["usd"]
    priced = ~np.isnan(spent)
    per_usd = rewards[priced].sum() / spent[priced].sum() if spent[priced].sum() > 0 else float("nan")
    per_usd_low, per_usd_high = ratio_ci(rewards[priced], spent[priced], picks=picks if priced.all() else None)
    tier = group["tier"]
    return {
        "model": model, "n": n, "mean_reward": float(rewards.mean()), "ci_low": low, "ci_high": high,
        **{f"mean_{t}": float(rewards[tier == i].mean()) if (tier == i).any() else float("nan")
           for i, t in enumerate(TIERS)},
        "feasible_pct": 100.0 * group["feasible"].mean(), "optimal_pct": 100.0 * group["optimal"].mean(),
        "no_submit": int(n - group["submitted"].sum()),
        "median_tokens": float(np.median(group["tokens"])), "median_seconds": _median(group["seconds"]),
        "beat_naive_pct": 100.0 * naive.mean() if len(naive) else float("nan"),
        "beat_naive_low": 100.0 * naive_low, "beat_naive_high": 100.0 * naive_high,
        "feasible_check_pct": 100.0 * (~np.isnan(group["checks_to_feasible"])).mean(),
        "median_checks_to_feasible": _median(group["checks_to_feasible"]),
        "mean_output_tokens": _mean(group["output_tokens"]), "usd_per_episode": _mean(spent),
        "reward_per_usd": float(per_usd), "reward_per_usd_low": per_usd_low, "reward_per_usd_high": per_usd_high,
    }


def _known(values: np.ndarray) -> np.ndarray:
    return values[~np.isnan(values)]


def _median(values: np.ndarray) -> float:
    known = _known(values)
    return float(np.median(known)) if len(known) else float("nan")


def _mean(values: np.ndarray) -> float:
    known = _known(values)
    return float(known.mean()) if len(known) else float("nan")
