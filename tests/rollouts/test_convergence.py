"""The convergence curves (rollouts.convergence) worked out by hand, Browse's filtered curves, and the figure.

Three episodes of model a on a task with optimum 100 and naive cost 300 (a gap is the share of the naive plan's
200 excess still left): checks [infeasible, 150, 120], [200], and none at all.
  check 1: one of three has a feasible plan (200: gap 0.5)
  check 2: two of three (150: 0.25, 200: 0.5) -> median 0.375, quartiles 0.3125 and 0.4375
  check 3: two of three (120: 0.1, 200 kept: 0.5) -> median 0.3
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from rollouts.archive import Archive
from rollouts.convergence import COLUMNS, check_cost_lists, column_quantiles, convergence
from rollouts.filters import Filters
from rollouts.schema import index_row
from rollouts.store import RolloutStore
from testkit.hand_records import feasible, hand_record, infeasible
from viewer.convergence import convergence_figure

ROWS = [{"model": "a", "check_costs": "[null,150,120]", "optimal_cost": 100, "naive_cost": 300},
        {"model": "a", "check_costs": "[200]", "optimal_cost": 100, "naive_cost": 300},
        {"model": "a", "check_costs": "[]", "optimal_cost": 100, "naive_cost": 300}]


def test_the_curves_follow_the_best_plan_so_far():
    curves = convergence(ROWS).to_pandas()
    assert list(curves.columns) == COLUMNS and list(curves["check"]) == [1, 2, 3]
    assert list(curves["episodes"]) == [3, 3, 3]
    assert list(curves["feasible_pct"]) == pytest.approx([100 / 3, 200 / 3, 200 / 3])
    assert list(curves["gap_median"]) == pytest.approx([0.5, 0.375, 0.3])
    assert curves["gap_q1"].iloc[1] == pytest.approx(0.3125) and curves["gap_q3"].iloc[1] == pytest.approx(0.4375)


def test_unknown_costs_are_left_out_and_missing_references_have_no_gap():
    rows = [*ROWS, {"model": "a", "check_costs": None, "optimal_cost": 100, "naive_cost": 300},
            {"model": "b", "check_costs": "[null]", "optimal_cost": 100, "naive_cost": 300},
            {"model": "c", "check_costs": "[90]", "optimal_cost": None, "naive_cost": None},
            {"model": "d", "check_costs": "[100]", "optimal_cost": 100, "naive_cost": 100}]
    curves = convergence(rows).to_pandas().set_index(["model", "check"])
    assert curves.loc[("a", 1), "episodes"] == 3  # the row not filled in is left out
    assert curves.loc[("b", 1), "feasible_pct"] == 0 and math.isnan(curves.loc[("b", 1), "gap_median"])
    assert curves.loc[("c", 1), "feasible_pct"] == 100 and math.isnan(curves.loc[("c", 1), "gap_median"])
    assert curves.loc[("d", 1), "gap_median"] == 0.0  # optimum = naive: the scale is one cost unit
    assert convergence([]).num_rows == 0 and convergence([{"model": "x", "check_costs": "[]"}]).num_rows == 0


def test_curves_from_records():
    records = [hand_record("r1", checks=[(1, infeasible()), (2, feasible(150)), (3, feasible(120))]),
               hand_record("r2", checks=[(1, feasible(200))]), hand_record("r3")]
    rows = [index_row(r, f"rollouts/2026-11-25/{r['episode_id']}.json") for r in records]
    assert convergence(rows).column("gap_median").to_pylist() == pytest.approx(
        [(200 - 100) / 400, ((150 - 100) / 400 + 0.25) / 2, ((120 - 100) / 400 + 0.25) / 2])


def test_browse_curves_follow_the_filters(tmp_path):
    with RolloutStore(tmp_path, writer_id="w1") as store:
        for i, model in enumerate(["anthropic:claude-sonnet-5-5", "openai:gpt-5.5", "anthropic:claude-sonnet-5-5"]):
            store.save(hand_record(f"c{i}", model=model, checks=[(1, feasible(200 + i))]))
    index = Archive.from_settings(tmp_path)
    everything = index.convergence(Filters())
    assert set(everything.column("model").to_pylist()) == {"anthropic:claude-sonnet-5-5", "openai:gpt-5.5"}
    chosen = Filters.parse(model="openai:gpt-5.5")
    only = index.convergence(chosen)
    assert only.column("model").to_pylist() == ["openai:gpt-5.5"]
    assert only.column("gap_median")[0].as_py() == pytest.approx(101 / 400)
    assert index.convergence(chosen) is only  # remembered until the rows change


def test_the_figure_draws_a_band_a_median_and_a_feasible_share_per_model():
    rows = [*ROWS, {"model": "b <x>", "check_costs": "[250,180]", "optimal_cost": 100, "naive_cost": 300}]
    fig = convergence_figure(rows)
    assert len(fig.data) == 8  # per model: upper and lower band edges, the median, the feasible share
    medians = [t for t in fig.data if t.showlegend is not False]
    assert [t.name for t in medians] == ["a", "b &lt;x&gt;"]  # names escaped for the page
    assert list(medians[0].y) == pytest.approx([0.5, 0.375, 0.3])
    band = fig.data[1]
    assert band.fill == "tonexty" and list(band.y) == pytest.approx(convergence(ROWS).column("gap_q1").to_pylist())
    shares = [t for t in fig.data if t.yaxis == "y2"]
    assert len(shares) == 2 and list(shares[0].y) == pytest.approx([100 / 3, 200 / 3, 200 / 3])
    assert fig.layout.yaxis2.range == (0, 100) and fig.layout.xaxis2.title.text == "check number"


def test_the_figure_says_when_there_is_nothing_to_draw():
    fig = convergence_figure([])
    assert not fig.data and "No checked plans" in fig.layout.annotations[0].text
    assert len(convergence_figure(curves=convergence(ROWS)).data) == 4


def test_quartiles_match_numpy_and_odd_cells_stay_in_their_row():
    rng = np.random.default_rng(7)
    values = rng.uniform(0, 2, (301, 9))
    values[rng.uniform(size=values.shape) < 0.4] = np.nan
    values[:, 4] = np.nan  # a check where no episode has a gap
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = np.nanpercentile(values, [25, 50, 75], axis=0)
    for mine, theirs in zip(column_quantiles(values, (0.25, 0.5, 0.75)), expected, strict=True):
        np.testing.assert_allclose(mine, theirs, equal_nan=True)
    cells = ["[null,150,120]", "[]", "[1],[2", "3]", None, "x", "[1.5e3, null]", "[true]", '{"a": 1}', "[ 5 ]"]
    assert check_cost_lists(cells) == [[None, 150, 120], [], None, None, None, None, [1500.0, None], [None], None,
                                       [5]]
