"""The leaderboard's numbers (rollouts.board over a real engine): bootstrap intervals, per-tier means, optimal %,
same-task comparison, the newest rows of a cell, the Markdown."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rollouts.board import BOOTSTRAP_MAX_EPISODES, BOOTSTRAP_RESAMPLES, aggregates, sort_board
from rollouts.board_text import TERMINAL_COLUMNS, board_compact, board_markdown, board_notes
from rollouts.sample_size import MIN_RANKED, provisional_note
from testkit.boards import board_of, by_model


def row(model, task, reward, *, tier="busy", feasible=True, cost=100, optimal=100, submitted=True, tokens=10):
    return {"model": model, "task_id": task, "difficulty": tier, "reward": reward, "feasible": feasible,
            "submitted": submitted, "cost": cost, "optimal_cost": optimal, "input_tokens": tokens,
            "output_tokens": tokens, "seconds": 2.0}


def interval(values) -> tuple[float, float]:
    [line] = board_of([row("m", f"t{i}", float(v)) for i, v in enumerate(values)])
    return line["ci_low"], line["ci_high"]


def test_bootstrap_interval_is_seeded_contains_the_mean_and_narrows_with_more_episodes():
    rng = np.random.default_rng(3)
    small = rng.uniform(0, 1, 20)
    large = rng.uniform(0, 1, 800)
    low, high = interval(small)
    assert low < small.mean() < high and interval(small) == (low, high)
    picks = np.random.default_rng(0).integers(0, 20, size=(BOOTSTRAP_RESAMPLES, 20))
    assert (low, high) == pytest.approx(tuple(np.percentile(small[picks].mean(axis=1), [2.5, 97.5])))
    low2, high2 = interval(large)
    assert high2 - low2 < (high - low) / 3


def test_past_the_bootstrap_limit_the_normal_interval_agrees_with_a_bootstrap():
    values = np.random.default_rng(5).uniform(0.2, 1.0, BOOTSTRAP_MAX_EPISODES + 1)
    normal = interval(values)
    rng = np.random.default_rng(0)
    means = values[rng.integers(0, len(values), size=(2000, len(values)))].mean(axis=1)
    resampled = np.percentile(means, [2.5, 97.5])
    assert normal[0] == pytest.approx(resampled[0], abs=0.002)
    assert normal[1] == pytest.approx(resampled[1], abs=0.002)


def test_per_model_means_tiers_feasibility_and_optimal_share():
    rows = [row("a", "t1", 1.0, tier="busy"), row("a", "t2", 0.5, tier="storm", cost=130),
            row("a", "t3", 0.1, tier="storm", feasible=False, cost=None, submitted=False),
            row("b", "t1", 0.3, tier="busy", cost=400)]
    lines = board_of(rows)
    assert [line["model"] for line in lines] == ["a", "b"]  # best mean first
    a = lines[0]
    assert a["n"] == 3 and a["mean_reward"] == pytest.approx(1.6 / 3)
    assert a["mean_busy"] == 1.0 and a["mean_storm"] == pytest.approx(0.3) and math.isnan(a["mean_extreme"])
    assert a["feasible_pct"] == pytest.approx(200 / 3) and a["optimal_pct"] == pytest.approx(100 / 3)
    assert a["no_submit"] == 1 and a["median_tokens"] == 20
    assert by_model(lines)["b"]["optimal_pct"] == 0


def test_same_tasks_only_drops_tasks_a_model_has_not_played():
    rows = [row("a", "t1", 1.0), row("a", "t2", 0.2), row("b", "t1", 0.4)]
    assert by_model(board_of(rows))["a"]["n"] == 2
    same = by_model(board_of(rows, same_tasks=True))
    assert same["a"]["n"] == 1 and same["a"]["mean_reward"] == 1.0


def test_latest_keeps_the_newest_rows_of_each_model_and_task():
    # Rows are newest first: a's first row on t1 is its newest there.
    rows = [row("a", "t1", 1.0), row("a", "t1", 0.0), row("a", "t1", 0.0), row("a", "t2", 0.5)]
    [one] = board_of(rows, latest=1)
    assert one["n"] == 2 and one["mean_reward"] == pytest.approx(0.75)
    assert board_of(rows, latest=2)[0]["n"] == 3


def test_board_markdown_has_one_line_per_model():
    text = board_markdown(board_of([row("a", "t1", 0.75), row("b", "t1", 0.25)]))
    lines = text.strip().splitlines()
    assert lines[0].startswith("| model | n | mark | tasks | mean reward (95% CI)") and len(lines) == 4
    assert lines[2].startswith("| a | 1 | provisional | 1 | 0.750 (n too small) |")  # one episode is no interval
    assert "- (" not in text and "(---)" not in text  # an unknown figure is a plain "-"


def test_one_episode_has_no_interval_and_a_small_model_is_listed_after_the_ranked():
    rows = [row("human", "t0", 1.0)]
    rows += [row("greedy", f"t{i}", 0.3 + 0.02 * i) for i in range(MIN_RANKED + 3)]
    rows += [row("pair", f"t{i}", 0.9) for i in range(2)]
    lines = board_of(rows)
    # human's mean (1.0) is the best, but one episode ranks nowhere: listed last, after the ranked greedy.
    assert [line["model"] for line in lines] == ["greedy", "human", "pair"]
    human = by_model(lines)["human"]
    assert human["mean_reward"] == 1.0
    for low, high in (f.interval for f in aggregates() if f.interval):
        assert math.isnan(human[low]) and math.isnan(human[high])
    pair = by_model(lines)["pair"]
    assert pair["ci_low"] == pair["ci_high"] == 0.9  # two episodes do give an interval (here a point)
    assert [line["model"] for line in sort_board(lines, "n", descending=False)] == ["greedy", "human", "pair"]
    notes = board_notes(lines, pass_k=False)  # pass^k's note: tests/rollouts/test_pass_k.py
    assert notes == ["n too small: no interval from fewer than 2 episodes",
                     f"fewer than {MIN_RANKED} episodes, so listed last and unranked (no arena rating or rank): "
                     "human, pair", provisional_note()]  # on fewer than 20 tasks: provisional
    # large enough to rank, on too few tasks to be settled
    assert board_notes(board_of(rows[1:MIN_RANKED + 4]), pass_k=False) == [provisional_note()]


def test_the_compact_board_fits_a_100_column_terminal_and_shows_unknowns_as_a_dash():
    long = "hf:meta-llama/Llama-3.3-70B-Instruct:novita|together"
    rows = [row(long, f"t{i}", 0.5, tier=tier) for i, tier in enumerate(("busy", "storm", "extreme", "standard"))]
    rows += [row("baseline:greedy", "t9", 0.25, tier="busy")]
    text = board_compact(board_of(rows))
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= TERMINAL_COLUMNS
    assert lines[0].split() == ["model", "n", "mean", "(95%", "CI)", "standard", "busy", "storm", "extreme",
                                "feasible"]
    greedy = next(line for line in lines if line.startswith("baseline:greedy"))
    assert greedy.split() == ["baseline:greedy", "1", "0.250", "(n", "too", "small)", "-", "0.250", "-", "-", "100%"]
    shortened = lines[2].split()[0]
    assert shortened.startswith("hf:meta-llama/") and shortened.endswith("|together") and "…" in shortened
    assert "(---)" not in text and "- (" not in text
    # every column starts where its header does
    assert len({len(line) for line in lines[:2]}) == 1
