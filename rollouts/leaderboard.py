"""The leaderboard: per model, over index rows (one per rollout). Pure functions, shared by the CLI and Browse."""

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
           "optimal_pct", "no_submit", "median_tokens", "median_seconds"]


def bootstrap_ci(values: np.ndarray, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """A 95% percentile-bootstrap interval for the mean (seeded, so a board is reproducible)."""
    values = np.asarray(values, dtype=float)
    n = len(values)
    if n == 0:
        return float("nan"), float("nan")
    if n == 1:
        return float(values[0]), float(values[0])
    if n > BOOTSTRAP_MAX_EPISODES:
        half = 1.96 * values.std(ddof=1) / np.sqrt(n)
        return float(values.mean() - half), float(values.mean() + half)
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, n, size=(resamples, n))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def rows_frame(rows: Iterable[dict] | pd.DataFrame) -> pd.DataFrame:
    """Index rows as a frame with the columns the board reads, whatever the source left out."""
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    for column, default in (("model", ""), ("task_id", ""), ("difficulty", None), ("reward", 0.0),
                            ("feasible", False), ("submitted", False), ("cost", None), ("optimal_cost", None),
                            ("input_tokens", 0), ("output_tokens", 0), ("seconds", 0.0)):
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


def leaderboard(rows: Iterable[dict] | pd.DataFrame, *, same_tasks: bool = False) -> pd.DataFrame:
    """One row per model, best mean reward first; columns as in COLUMNS."""
    frame = rows_frame(rows)
    if same_tasks:
        frame = common_tasks(frame)
    if frame.empty:
        return pd.DataFrame(columns=COLUMNS)
    frame = frame.assign(
        reward=pd.to_numeric(frame["reward"], errors="coerce").fillna(0.0),
        feasible=frame["feasible"].fillna(False).astype(bool),
        submitted=frame["submitted"].fillna(False).astype(bool),
        tokens=pd.to_numeric(frame["input_tokens"], errors="coerce").fillna(0)
        + pd.to_numeric(frame["output_tokens"], errors="coerce").fillna(0),
    )
    cost = pd.to_numeric(frame["cost"], errors="coerce")
    optimum = pd.to_numeric(frame["optimal_cost"], errors="coerce")
    frame["optimal"] = frame["feasible"] & cost.notna() & optimum.notna() & (cost <= optimum)
    board = []
    for model, group in frame.groupby("model", sort=False):
        rewards = group["reward"].to_numpy()
        low, high = bootstrap_ci(rewards)
        tier_means = group.groupby("difficulty")["reward"].mean()
        board.append({
            "model": model, "n": len(group), "mean_reward": float(rewards.mean()), "ci_low": low, "ci_high": high,
            **{f"mean_{t}": float(tier_means[t]) if t in tier_means.index else float("nan") for t in TIERS},
            "feasible_pct": 100.0 * group["feasible"].mean(),
            "optimal_pct": 100.0 * group["optimal"].mean(),
            "no_submit": int((~group["submitted"]).sum()),
            "median_tokens": float(group["tokens"].median()),
            "median_seconds": float(pd.to_numeric(group["seconds"], errors="coerce").median()),
        })
    result = pd.DataFrame(board, columns=COLUMNS)
    return result.sort_values(["mean_reward", "n"], ascending=[False, False], ignore_index=True)


def board_markdown(board: pd.DataFrame) -> str:
    """The leaderboard as a Markdown table (the CLI's board.md)."""
    header = ("| model | n | mean reward (95% CI) | " + " | ".join(TIERS)
              + " | feasible | optimal | no submit | median tokens | median s |")
    lines = [header, "|---|---:|---:|" + "---:|" * len(TIERS) + "---:|---:|---:|---:|---:|"]
    for row in board.to_dict("records"):
        tiers = " | ".join(_num(row[f"mean_{t}"]) for t in TIERS)
        lines.append(
            f"| {row['model']} | {row['n']} | {row['mean_reward']:.3f} ({_num(row['ci_low'])}-{_num(row['ci_high'])}) "
            f"| {tiers} | {row['feasible_pct']:.0f}% | {row['optimal_pct']:.0f}% | {row['no_submit']} "
            f"| {row['median_tokens']:.0f} | {_num(row['median_seconds'], 1)} |")
    return "\n".join(lines) + "\n"


def _num(value: float, digits: int = 3) -> str:
    return "-" if value is None or (isinstance(value, float) and np.isnan(value)) else f"{value:.{digits}f}"
