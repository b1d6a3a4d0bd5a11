"""The leaderboard's newer figures (rollouts.board): beating the naive plan, checks to a feasible plan, tokens,
dollars, reward per dollar, their intervals, and sorting by any column."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rollouts.board import BOOTSTRAP_MAX_EPISODES, columns, sort_board
from rollouts.board_text import board_json
from testkit.boards import board_of, by_model


def row(model, reward, *, beat=None, checks=None, out=100, usd=None, task="t1"):
    return {"model": model, "task_id": task, "difficulty": "busy", "reward": reward, "feasible": True,
            "submitted": True, "cost": 100, "optimal_cost": 100, "input_tokens": 1000, "output_tokens": out,
            "seconds": 1.0, "beat_naive": beat, "checks_to_feasible": checks, "usd": usd}


def test_each_figure_is_over_the_episodes_it_applies_to():
    rows = [row("a", 1.0, beat=True, checks=2, out=100, usd=0.5),
            row("a", 0.5, beat=False, checks=None, out=300, usd=None),
            row("a", 0.0, beat=None, checks=4, out=200, usd=1.5),
            row("a", 0.5, beat=True, checks=7, out=None, usd=0.0)]
    lines = board_of(rows)
    a = by_model(lines)["a"]
    assert a["beat_naive_pct"] == pytest.approx(200 / 3)  # the unknown one left out
    assert a["feasible_check_pct"] == 75.0 and a["median_checks_to_feasible"] == 4.0
    assert a["mean_output_tokens"] == 200.0  # the row without a count left out
    assert a["usd_per_episode"] == pytest.approx(2.0 / 3)  # over the three priced episodes
    assert a["reward_per_usd"] == pytest.approx((1.0 + 0.0 + 0.5) / 2.0)
    assert a["beat_naive_low"] <= a["beat_naive_pct"] <= a["beat_naive_high"]
    assert a["reward_per_usd_low"] <= a["reward_per_usd"] <= a["reward_per_usd_high"]
    assert list(a) == columns()


def test_a_model_without_prices_or_references_gets_unknowns_not_zeros():
    lines = board_of([row("b", 0.3), row("b", 0.6)])
    b = lines[0]
    for column in ("beat_naive_pct", "median_checks_to_feasible", "usd_per_episode", "reward_per_usd",
                   "reward_per_usd_low", "beat_naive_low"):
        assert math.isnan(b[column]), column
    assert b["feasible_check_pct"] == 0.0
    [item] = board_json(lines)
    assert item["usd_per_episode"] is None and item["beat_naive_pct"] is None and item["mean_reward"] == pytest.approx(0.45)


def test_rows_with_nulls_read_as_unknown_not_as_zero():
    [a] = board_of([row("a", 1.0, beat=True, usd=0.2), row("a", 0.0, beat=None, usd=None)])
    assert a["beat_naive_pct"] == 100.0 and a["usd_per_episode"] == pytest.approx(0.2)


def test_the_proportion_interval_matches_resampling_the_outcomes():
    outcomes = np.array([1] * 13 + [0] * 27, dtype=float)
    rng = np.random.default_rng(1)
    means = outcomes[rng.integers(0, len(outcomes), size=(4000, len(outcomes)))].mean(axis=1)
    resampled = 100 * np.percentile(means, [2.5, 97.5])
    [line] = board_of([row("a", 0.5, beat=bool(o)) for o in outcomes])
    assert line["beat_naive_low"] == pytest.approx(resampled[0], abs=3) and \
        line["beat_naive_high"] == pytest.approx(resampled[1], abs=3)
    assert board_of([row("a", 0.5, beat=bool(o)) for o in outcomes])[0]["beat_naive_low"] == line["beat_naive_low"]
    [every] = board_of([row("a", 0.5, beat=True)] * 5)
    assert (every["beat_naive_low"], every["beat_naive_high"]) == (100.0, 100.0)


def test_the_ratio_interval_is_a_bootstrap_and_becomes_normal_past_the_limit():
    rng = np.random.default_rng(2)
    spent = rng.uniform(0.01, 0.05, 300)
    reward = rng.uniform(0, 1, 300)
    [line] = board_of([row("a", float(r), usd=float(s)) for r, s in zip(reward, spent, strict=True)])
    low, high = line["reward_per_usd_low"], line["reward_per_usd_high"]
    assert low < reward.sum() / spent.sum() < high
    many_spent = rng.uniform(0.01, 0.05, BOOTSTRAP_MAX_EPISODES + 500)
    many_reward = rng.uniform(0, 1, len(many_spent))
    [big] = board_of([row("a", float(r), usd=float(s)) for r, s in zip(many_reward, many_spent, strict=True)])
    normal = big["reward_per_usd_low"], big["reward_per_usd_high"]
    picks = np.random.default_rng(0).integers(0, len(many_spent), size=(2000, len(many_spent)))
    ratios = many_reward[picks].sum(axis=1) / many_spent[picks].sum(axis=1)
    resampled = np.percentile(ratios, [2.5, 97.5])
    ratio = many_reward.sum() / many_spent.sum()
    assert normal[0] == pytest.approx(resampled[0], rel=0.01 * ratio / resampled[0])
    assert normal[1] == pytest.approx(resampled[1], rel=0.01 * ratio / resampled[1])
    [free] = board_of([row("a", 1.0, usd=0.0)])
    assert math.isnan(free["reward_per_usd_low"]) and math.isnan(free["reward_per_usd"])


def test_sorting_by_any_column_keeps_unknowns_last():
    lines = board_of([row("cheap", 0.2, usd=0.01), row("dear", 0.9, usd=2.0), row("free", 0.5)])

    def models(ordered):
        return [line["model"] for line in ordered]

    assert models(lines) == ["dear", "free", "cheap"]
    assert models(sort_board(lines, "usd_per_episode", descending=False)) == ["cheap", "dear", "free"]
    assert models(sort_board(lines, "reward_per_usd")) == ["cheap", "dear", "free"]
    assert models(sort_board(lines, "mean_reward", descending=False)) == ["cheap", "free", "dear"]
    with pytest.raises(ValueError, match="cannot sort the board by 'nope'"):
        sort_board(lines, "nope")
