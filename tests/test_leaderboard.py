"""The leaderboard's numbers: bootstrap intervals, per-tier means, optimal %, same-task comparison."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rollouts.leaderboard import BOOTSTRAP_MAX_EPISODES, board_markdown, bootstrap_ci, leaderboard


def row(model, task, reward, *, tier="busy", feasible=True, cost=100, optimal=100, submitted=True, tokens=10):
    return {"model": model, "task_id": task, "difficulty": tier, "reward": reward, "feasible": feasible,
            "submitted": submitted, "cost": cost, "optimal_cost": optimal, "input_tokens": tokens,
            "output_tokens": tokens, "seconds": 2.0}


def test_bootstrap_interval_is_seeded_contains_the_mean_and_narrows_with_more_episodes():
    rng = np.random.default_rng(3)
    small = rng.uniform(0, 1, 20)
    large = rng.uniform(0, 1, 800)
    low, high = bootstrap_ci(small)
    assert low < small.mean() < high and bootstrap_ci(small) == (low, high)
    low2, high2 = bootstrap_ci(large)
    assert high2 - low2 < (high - low) / 3


def test_past_the_bootstrap_limit_the_normal_interval_agrees_with_a_bootstrap():
    values = np.random.default_rng(5).uniform(0.2, 1.0, BOOTSTRAP_MAX_EPISODES + 1)
    normal = bootstrap_ci(values)
    rng = np.random.default_rng(0)
    means = values[rng.integers(0, len(values), size=(2000, len(values)))].mean(axis=1)
    resampled = np.percentile(means, [2.5, 97.5])
    assert normal[0] == pytest.approx(resampled[0], abs=0.002)
    assert normal[1] == pytest.approx(resampled[1], abs=0.002)


def test_per_model_means_tiers_feasibility_and_optimal_share():
    rows = [row("a", "t1", 1.0, tier="busy"), row("a", "t2", 0.5, tier="storm", cost=130),
            row("a", "t3", 0.1, tier="storm", feasible=False, cost=None, submitted=False),
            row("b", "t1", 0.3, tier="busy", cost=400)]
    board = leaderboard(rows).set_index("model")
    assert list(board.index) == ["a", "b"]  # best mean first
    a = board.loc["a"]
    assert a["n"] == 3 and a["mean_reward"] == pytest.approx(1.6 / 3)
    assert a["mean_busy"] == 1.0 and a["mean_storm"] == pytest.approx(0.3) and math.isnan(a["mean_extreme"])
    assert a["feasible_pct"] == pytest.approx(200 / 3) and a["optimal_pct"] == pytest.approx(100 / 3)
    assert a["no_submit"] == 1 and a["median_tokens"] == 20
    assert board.loc["b", "optimal_pct"] == 0


def test_same_tasks_only_drops_tasks_a_model_has_not_played():
    rows = [row("a", "t1", 1.0), row("a", "t2", 0.2), row("b", "t1", 0.4)]
    assert leaderboard(rows).set_index("model").loc["a", "n"] == 2
    same = leaderboard(rows, same_tasks=True).set_index("model")
    assert same.loc["a", "n"] == 1 and same.loc["a", "mean_reward"] == 1.0


def test_board_markdown_has_one_line_per_model():
    text = board_markdown(leaderboard([row("a", "t1", 0.75), row("b", "t1", 0.25)]))
    lines = text.strip().splitlines()
    assert lines[0].startswith("| model | n | mean reward (95% CI)") and len(lines) == 4
    assert lines[2].startswith("| a | 1 | 0.750 (0.750-0.750)")
