"""The leaderboard and the heatmap as DuckDB queries over rollouts.index_sql's view, with rollouts.leaderboard's numbers.

The board's figures are per model. A model with more than BOOTSTRAP_MAX_EPISODES episodes gets the normal interval
`rollouts.leaderboard` uses past that size, so its line is a handful of SQL aggregates (mean, sample deviation,
medians, counts, the delta method's variances for reward per dollar) and no row leaves DuckDB. A model with fewer
episodes gets the seeded bootstrap, which resamples its episodes in the index's order: its rows (a thousand at most,
a few columns) are read and `rollouts.leaderboard.leaderboard` computes its line, so both engines print the same
intervals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from rollouts.index_sql import FRAME_ORDER, IndexEngine
from rollouts.leaderboard import (
    BOOTSTRAP_MAX_EPISODES,
    COLUMNS,
    leaderboard,
    proportion_ci,
    ratio_ci,
    sort_board,
)
from rollouts.schema import TIERS

BOARD_INPUTS = ("model, task_id, difficulty, reward, feasible, submitted, cost, optimal_cost, input_tokens, "
                "output_tokens, seconds, beat_naive, checks_to_feasible, usd")
_AGGREGATES = ", ".join([
    "count(*) AS n", "avg(reward) AS mean_reward", "stddev_samp(reward) AS sd",
    *[f"avg(reward) FILTER (WHERE difficulty = '{t}') AS mean_{t}" for t in TIERS],
    "100.0 * avg(feasible::DOUBLE) AS feasible_pct",
    "100.0 * avg((feasible AND cost IS NOT NULL AND optimal_cost IS NOT NULL AND cost <= optimal_cost)::DOUBLE)"
    " AS optimal_pct",
    "count(*) - sum(submitted::INT) AS no_submit", "quantile_cont(tokens, 0.5) AS median_tokens",
    "quantile_cont(seconds, 0.5) AS median_seconds", "sum(beat_naive::INT) AS naive_hits",
    "count(beat_naive) AS naive_known", "100.0 * count(checks_to_feasible) / count(*) AS feasible_check_pct",
    "quantile_cont(checks_to_feasible, 0.5) AS median_checks_to_feasible",
    "avg(output_tokens) AS mean_output_tokens", "avg(usd) AS usd_per_episode", "count(usd) AS priced",
    "sum(reward) FILTER (WHERE usd IS NOT NULL) AS priced_reward", "sum(usd) AS spent",
    "var_samp(reward) FILTER (WHERE usd IS NOT NULL) AS var_reward", "var_samp(usd) AS var_usd",
    "covar_samp(reward, usd) AS covar", "max(started) AS newest",
])


def _matched(where: str, same_tasks: bool) -> str:
    """A WITH clause naming the board's rows `m`: the filtered rows, on the tasks every model played if asked."""
    rows = f"SELECT * FROM rollouts WHERE ({where}) AND model IS NOT NULL"
    if not same_tasks:
        return f"WITH m AS ({rows})"
    return (f"WITH f AS ({rows}), m AS (SELECT * FROM f WHERE task_id IN (SELECT task_id FROM f GROUP BY task_id "
            "HAVING count(DISTINCT model) = (SELECT count(DISTINCT model) FROM f)))")


def board(engine: IndexEngine, where: str, params: Sequence[Any], *, same_tasks: bool = False) -> pd.DataFrame:
    """rollouts.leaderboard.leaderboard over the rows matching `where`, best mean reward first."""
    head = _matched(where, same_tasks)
    with engine.lock:
        stats = engine.sql(f"{head} SELECT model, {_AGGREGATES} FROM m GROUP BY model ORDER BY newest DESC, model",
                           params).fetch_df()
        small = [str(m) for m, n in zip(stats["model"], stats["n"], strict=True) if n <= BOOTSTRAP_MAX_EPISODES]
        few = engine.sql(f"{head} SELECT {BOARD_INPUTS} FROM m WHERE list_contains(?, model) ORDER BY {FRAME_ORDER}",
                         [*params, small]).fetch_df() if small else None
        large = [s for s in stats.to_dict("records") if s["n"] > BOOTSTRAP_MAX_EPISODES]
        # A large model with a few priced episodes bootstraps reward per dollar over them: one read for all.
        priced = [str(s["model"]) for s in large if 1 <= s["priced"] <= BOOTSTRAP_MAX_EPISODES]
        spends = engine.sql(f"{head} SELECT model, reward, usd FROM m WHERE list_contains(?, model) AND usd IS NOT "
                            f"NULL ORDER BY {FRAME_ORDER}", [*params, priced]).fetch_df() if priced else None
        lines = {str(s["model"]): _large_line(s, spends) for s in large}
    if few is not None and len(few):
        for line in leaderboard(few).to_dict("records"):
            lines[str(line["model"])] = line
    if not lines:
        return pd.DataFrame(columns=COLUMNS)
    ordered = [lines[str(m)] for m in stats["model"] if str(m) in lines]
    return sort_board(pd.DataFrame(ordered, columns=COLUMNS), "mean_reward")


def _large_line(stat: dict, spends: pd.DataFrame | None) -> dict:
    """One model's line past BOOTSTRAP_MAX_EPISODES episodes, from its aggregates (the normal intervals)."""
    n, mean = int(stat["n"]), float(stat["mean_reward"])
    half = 1.96 * _number(stat["sd"]) / math.sqrt(n)
    hits, known = int(_number(stat["naive_hits"], 0)), int(stat["naive_known"])
    naive_low, naive_high = proportion_ci(hits, known)
    priced, spent = int(stat["priced"]), _number(stat["spent"], 0.0)
    per_usd = _number(stat["priced_reward"], 0.0) / spent if spent > 0 else float("nan")
    if priced > BOOTSTRAP_MAX_EPISODES and spent > 0:
        spread = stat["var_reward"] + per_usd ** 2 * stat["var_usd"] - 2 * per_usd * stat["covar"]
        usd_half = 1.96 * math.sqrt(max(spread, 0.0)) / (math.sqrt(priced) * stat["usd_per_episode"])
        usd_ci = (per_usd - usd_half, per_usd + usd_half)
    elif priced >= 1 and spent > 0 and spends is not None:
        # A few priced episodes among many: their bootstrap, as rollouts.leaderboard draws it.
        rows = spends[spends["model"] == stat["model"]]
        usd_ci = ratio_ci(rows["reward"].to_numpy(dtype=float), rows["usd"].to_numpy(dtype=float))
    else:
        usd_ci = (float("nan"), float("nan"))
    return {
        "model": str(stat["model"]), "n": n, "mean_reward": mean, "ci_low": mean - half, "ci_high": mean + half,
        **{f"mean_{t}": _number(stat[f"mean_{t}"]) for t in TIERS},
        "feasible_pct": float(stat["feasible_pct"]), "optimal_pct": float(stat["optimal_pct"]),
        "no_submit": int(stat["no_submit"]), "median_tokens": float(stat["median_tokens"]),
        "median_seconds": _number(stat["median_seconds"]),
        "beat_naive_pct": 100.0 * hits / known if known else float("nan"),
        "beat_naive_low": 100.0 * naive_low, "beat_naive_high": 100.0 * naive_high,
        "feasible_check_pct": float(stat["feasible_check_pct"]),
        "median_checks_to_feasible": _number(stat["median_checks_to_feasible"]),
        "mean_output_tokens": _number(stat["mean_output_tokens"]), "usd_per_episode": _number(stat["usd_per_episode"]),
        "reward_per_usd": float(per_usd), "reward_per_usd_low": usd_ci[0], "reward_per_usd_high": usd_ci[1],
    }


def _number(value: Any, default: float = float("nan")) -> float:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return default
    return float(value)


# -- the heatmap ---------------------------------------------------------------------------------------------------


@dataclass
class Heatmap:
    tasks: list[tuple[str, str]]            # (tier, task id), tiers easiest first, then task id
    models: list[str]                       # most rollouts first
    mean: list[list[float | None]]          # [task][model]
    count: list[list[int]]
    best: list[list[str | None]]            # the episode id a click on the cell opens


def heatmap(engine: IndexEngine, where: str, params: Sequence[Any]) -> Heatmap:
    """Mean reward per task and model; each cell's best rollout is its highest reward, the newest of equals."""
    head = f"WITH m AS (SELECT * FROM rollouts WHERE ({where}) AND model IS NOT NULL AND task_id IS NOT NULL)"
    with engine.lock:
        cells = engine.sql(f"""{head} SELECT task_id, model, avg(reward), count(*),
            arg_max(episode_id, row(reward, coalesce(started, ''), -grp)) FROM m GROUP BY task_id, model""",
                           params).fetchall()
        tiers = dict(engine.sql(f"""{head} SELECT task_id, arg_max(difficulty, row(coalesce(started, ''), -grp))
            FILTER (WHERE difficulty IS NOT NULL) FROM m GROUP BY task_id""", params).fetchall())
        models = [r[0] for r in engine.sql(f"{head} SELECT model FROM m GROUP BY model ORDER BY count(*) DESC, "
                                           "model", params).fetchall()]
    if not cells:
        return Heatmap([], [], [], [], [])
    rank = {tier: i for i, tier in enumerate(TIERS)}
    tasks = sorted(((str(tier), task) for task, tier in tiers.items()),
                   key=lambda p: (rank.get(p[0], len(rank)), p[1]))
    by_cell = {(task, model): (mean, size, best) for task, model, mean, size, best in cells}
    empty = (None, 0, None)
    return Heatmap(tasks, models,
                   [[_cell_mean(by_cell.get((t, m), empty)[0]) for m in models] for _, t in tasks],
                   [[int(by_cell.get((t, m), empty)[1]) for m in models] for _, t in tasks],
                   [[by_cell.get((t, m), empty)[2] for m in models] for _, t in tasks])


def _cell_mean(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
