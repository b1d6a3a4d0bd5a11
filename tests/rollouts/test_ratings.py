"""Arena ratings (rollouts.ratings): strengths recovered from synthetic battles, ties, models that cannot be
rated, the upper-bound rank, the SQL that makes the cells, and the time over a million index rows."""

from __future__ import annotations

import math
import time

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from rollouts.filters import Filters
from rollouts.index.engine import IndexEngine
from rollouts.ratings import (
    ANCHOR,
    ELO_PER_NAT,
    cells_sql,
    fetch_cells,
    ratings,
    ratings_json,
    ratings_markdown,
    ratings_notes,
    upper_bound_ranks,
)
from rollouts.sample_size import MIN_RANKED
from testkit.index_rows import index_table

MODELS = [ANCHOR, *(f"model-{k:02d}" for k in range(11))]
# Elo ratings relative to the anchor; every gap at least 60 points, so the order is not a coin toss.
TRUE = np.array([1000, 1300, 1120, 880, 1480, 1060, 760, 1240, 940, 1180, 1360, 1600], dtype=float)


def synthetic_cells(true: np.ndarray, tasks: int, seed: int, models: list[str] = MODELS) -> pa.Table:
    """One mean reward per task and model whose battles follow Bradley–Terry with these ratings exactly: a
    strength plus Gumbel noise, so the difference of two models' noises is logistic and P(i beats j) is
    1 / (1 + 10^((Rj - Ri) / 400)); squashed into (0, 1) like a reward, which keeps every comparison."""
    rng = np.random.default_rng(seed)
    utility = (true - true[0]) / ELO_PER_NAT + rng.gumbel(size=(tasks, len(models)))
    reward = 1.0 / (1.0 + np.exp(-utility / 4.0))
    return pa.table({"task_id": np.repeat([f"dock-{t:04d}" for t in range(tasks)], len(models)),
                     "model": np.tile(models, tasks), "mean_reward": reward.ravel()})


def cells(*rows: tuple[str, str, float]) -> dict[str, list]:
    return {"task_id": [r[0] for r in rows], "model": [r[1] for r in rows], "mean_reward": [r[2] for r in rows]}


def by_model(lines) -> dict:
    return {line.model: line for line in lines}


def test_known_strengths_are_recovered_in_order_with_every_true_rating_inside_its_interval():
    lines = ratings(synthetic_cells(TRUE, tasks=600, seed=11))
    assert [line.model for line in lines] == [MODELS[k] for k in np.argsort(-TRUE)]
    for line in lines:
        true = TRUE[MODELS.index(line.model)]
        assert line.ci_low <= true <= line.ci_high, (line.model, true, line)
        assert line.ci_high - line.ci_low < 80  # 600 tasks pin a rating to a few tens of points
        assert line.battles == 600 * 11 and line.wins + line.losses == line.battles and line.ties == 0
    anchor = by_model(lines)[ANCHOR]
    assert anchor.rating == anchor.ci_low == anchor.ci_high == 1000.0  # intervals are relative to the anchor
    # The best model's interval lies wholly above everyone else's, so it ranks first alone.
    assert lines[0].rank == 1 and all(line.rank > 1 for line in lines[1:])


def test_the_same_cells_in_any_order_give_the_same_ratings_and_another_seed_other_intervals():
    table = synthetic_cells(TRUE[:5], tasks=80, seed=3, models=MODELS[:5])
    shuffled = table.take(np.random.default_rng(0).permutation(table.num_rows))
    assert ratings(shuffled) == ratings(table)
    other = by_model(ratings(table, seed=1))
    for line in ratings(table):
        assert other[line.model].rating == pytest.approx(line.rating)
    assert any(other[line.model].ci_low != line.ci_low for line in ratings(table) if line.model != ANCHOR)


def test_a_tie_counts_half_a_win_to_each_side():
    # b wins 10 tasks and ties 10 against the anchor: 15 wins in 20, odds 3, so 400 · log10(3) = 190.8 above.
    rows = [(f"t{k}", ANCHOR, 0.5) for k in range(20)]
    rows += [(f"t{k}", "b", 0.9 if k < 10 else 0.5) for k in range(20)]
    lines = by_model(ratings(cells(*rows)))
    b = lines["b"]
    assert b.rating - 1000 == pytest.approx(400 * math.log10(3), abs=0.5)
    assert (b.battles, b.wins, b.losses, b.ties) == (20, 10, 0, 10)
    assert (lines[ANCHOR].wins, lines[ANCHOR].losses, lines[ANCHOR].ties) == (0, 10, 10)


def test_equal_means_are_ties_even_when_they_differ_in_the_last_bits():
    rows = [(f"t{k}", ANCHOR, (0.1 + 0.2) if k % 2 else 0.3) for k in range(6)]
    rows += [(f"t{k}", "b", 0.3 if k % 2 else (0.1 + 0.2)) for k in range(6)]
    lines = by_model(ratings(cells(*rows)))
    assert lines["b"].ties == 6 and lines["b"].rating == pytest.approx(1000.0, abs=1e-6)


def test_a_model_without_a_shared_task_has_no_rating_and_says_so():
    rows = [("t1", ANCHOR, 0.2), ("t1", "b", 0.8), ("t2", ANCHOR, 0.4), ("t2", "b", 0.3),
            ("t9", "alone", 1.0),
            # d and e only ever met each other: a group of their own, not on the anchor's scale
            ("x1", "d", 0.3), ("x1", "e", 0.4), ("x2", "d", 0.6), ("x2", "e", 0.4)]
    lines = ratings(cells(*rows), min_tasks=1)  # the fit's own rules, below the project's minimum of tasks
    assert [line.model for line in lines] == ["b", ANCHOR, "alone", "d", "e"]  # rated first, then by name
    table = by_model(lines)
    alone = table["alone"]
    assert alone.rating is alone.ci_low is alone.rank is None and alone.battles == 0
    assert alone.note == "no rating: it shares no task with another model"
    assert table["d"].rating is None and "baseline:naive" in table["d"].note and table["d"].battles == 2
    assert table["b"].note is None and table["b"].rating == pytest.approx(1000.0, abs=1)  # one win, one loss
    lost_all = by_model(ratings(cells(("t1", ANCHOR, 0.9), ("t1", "b", 0.1)), min_tasks=1))["b"]
    assert lost_all.note.startswith("lost every battle") and lost_all.rating < 1000
    text = ratings_markdown(lines)
    assert "alone: no rating: it shares no task with another model (0 battles)" in text
    assert "| 1 | b | 1000 (" in text


def test_without_the_anchor_the_largest_group_is_rated_around_a_mean_of_1000():
    table = synthetic_cells(TRUE[:4], tasks=60, seed=5, models=["w", "x", "y", "z"])
    rows = table.to_pydict()
    rows["task_id"] += ["u1", "u1"]
    rows["model"] += ["p", "q"]
    rows["mean_reward"] += [0.1, 0.2]
    lines = by_model(ratings(rows, min_tasks=1))
    rated = [line.rating for line in lines.values() if line.rating is not None]
    assert len(rated) == 4 and sum(rated) / 4 == pytest.approx(1000.0)
    assert lines["p"].rating is None and "larger group" in lines["p"].note
    assert lines["x"].rating - lines["w"].rating == pytest.approx(300, abs=80)


def test_a_model_that_won_every_battle_gets_a_finite_rating_above_everyone():
    rows = [row for k in range(30) for row in ((f"t{k}", ANCHOR, 0.3 + 0.01 * (k % 3)), (f"t{k}", "b", 0.3),
                                               (f"t{k}", "champion", 0.99))]
    lines = ratings(cells(*rows))
    champion = lines[0]
    assert champion.model == "champion" and champion.wins == 60 and champion.losses == 0
    assert all(math.isfinite(v) for v in (champion.rating, champion.ci_low, champion.ci_high))
    assert champion.ci_low > max(line.ci_high for line in lines[1:]) and champion.rank == 1
    assert champion.rating < 1000 + 10 * ELO_PER_NAT  # bounded by the prior, not run off to infinity
    assert champion.note.startswith("won every battle") and lines[1].note is None


def test_a_model_below_the_minimum_of_tasks_gets_no_rating_no_rank_and_moves_no_one_else():
    table = synthetic_cells(TRUE[:3], tasks=40, seed=7, models=MODELS[:3])
    rows = table.to_pydict()
    # One hand-played episode that beat everyone on its task, and a model on one task fewer than the minimum.
    rows["task_id"] += ["dock-0000", *(f"dock-{t:04d}" for t in range(MIN_RANKED - 1))]
    rows["model"] += ["human", *["short"] * (MIN_RANKED - 1)]
    rows["mean_reward"] += [1.0, *[0.99] * (MIN_RANKED - 1)]
    lines = by_model(ratings(rows))
    for small, tasks in (("human", 1), ("short", MIN_RANKED - 1)):
        line = lines[small]
        # Each met the three rated models on each of its tasks, and each other once, on dock-0000.
        assert line.rating is line.ci_low is line.ci_high is line.rank is None and line.battles == 3 * tasks + 1
        assert line.note == (f"no rating: battles on {tasks} task{'s' * (tasks != 1)}; a rating needs at least "
                             f"{MIN_RANKED} tasks shared with another model")
    alone = by_model(ratings(table))
    assert all(lines[m].rating == alone[m].rating and lines[m].ci_low == alone[m].ci_low for m in MODELS[:3])
    # The anchor itself below the minimum: the scale is centred on the mean, and the note says so.
    few = pa.table({"task_id": [f"dock-{t:04d}" for t in range(2)], "model": [ANCHOR] * 2,
                    "mean_reward": [0.1, 0.2]})
    centred = ratings(pa.concat_tables([table.filter(pa.compute.not_equal(table["model"], ANCHOR)), few]))
    rated = [line.rating for line in centred if line.rating is not None]
    assert len(rated) == 2 and sum(rated) / 2 == pytest.approx(1000.0)
    notes = ratings_notes(centred)
    assert notes[0] == ("scale: centred on the mean, 1000 = the mean of the 2 rated models (baseline:naive, the "
                        "usual anchor, has no rating here)")
    assert ratings_notes(ratings(table))[0].startswith("scale: 1000 = baseline:naive, the anchor")
    assert not any("1000 = baseline:naive" in note for note in notes)
    assert f"{ANCHOR}: no rating: battles on 2 tasks" in "\n".join(notes)


def test_shared_ranks_are_explained_in_words():
    # a and b never differ; both beat the anchor often enough to sit wholly above it.
    rows = [row for k in range(12) for row in ((f"t{k}", ANCHOR, 0.1), (f"t{k}", "a", 0.5 + 0.3 * (k % 2)),
                                               (f"t{k}", "b", 0.8 - 0.3 * (k % 2)))]
    lines = ratings(cells(*rows))
    assert [line.rank for line in by_model(lines).values() if line.model in ("a", "b")] == [1, 1]
    text = "\n".join(ratings_notes(lines))
    assert ("a and b share rank 1: no rated model lies wholly above them, and their own intervals overlap, so the "
            "data cannot say which is ahead") in text
    assert by_model(lines)[ANCHOR].rank == 3 and "share rank 3" not in text  # a rank held alone needs no word
    assert ratings_markdown(lines).split("\n\n", 1)[1].splitlines() == ratings_notes(lines)


def test_the_rank_counts_only_intervals_wholly_above():
    low = np.array([1200, 1150, 1100, 900, np.nan])
    high = np.array([1300, 1250, 1160, 1000, np.nan])
    # The second overlaps the first: both could be best. The third is below the first only. The fourth is below
    # all three. A model without an interval counts for no one.
    assert upper_bound_ranks(low, high).tolist() == [1, 1, 2, 4, 1]


def test_ratings_json_has_the_cli_keys():
    lines = ratings(cells(("t1", ANCHOR, 0.2), ("t1", "b", 0.8), ("t2", ANCHOR, 0.5), ("t2", "b", 0.5),
                          ("t3", "c", 0.5)), min_tasks=1)
    items = ratings_json(lines)
    assert [item["model"] for item in items] == ["b", ANCHOR, "c"]
    assert set(items[0]) == {"model", "rating", "ci_low", "ci_high", "rank", "battles", "wins", "losses", "ties",
                             "note", "provisional"}
    # Resamples that drew the tie twice put b at 1000 too: its interval touches the anchor's, not wholly above.
    assert items[0]["ci_low"] == 1000.0 and items[0]["rank"] == 1
    assert items[1] == {"model": ANCHOR, "rating": 1000.0, "ci_low": 1000.0, "ci_high": 1000.0, "rank": 1,
                        "battles": 2, "wins": 0, "losses": 1, "ties": 1, "note": None, "provisional": True}
    assert items[0]["rating"] == round(items[0]["rating"], 1) and items[0]["rating"] > 1000
    assert items[2]["rating"] is None and items[2]["note"].startswith("no rating")
    assert ratings(cells()) == [] and ratings_json([]) == []


def index_view(con: duckdb.DuckDBPyConnection, rows: int, tasks: int, models: int) -> None:
    """A `rollouts` table shaped like the index view's columns the cells read."""
    con.execute(f"""CREATE TABLE rollouts AS SELECT 'dock-' || (i % {tasks}) AS task_id,
        CASE WHEN (i // {tasks}) % {models} = 0 THEN '{ANCHOR}' ELSE 'model-' || ((i // {tasks}) % {models}) END
        AS model, (hash(i) % 1000) / 1000.0 AS reward FROM range({rows}) t(i)""")


def test_the_cells_query_means_each_task_and_model_and_takes_a_filter():
    con = duckdb.connect()
    con.execute("CREATE TABLE rollouts (task_id VARCHAR, model VARCHAR, reward DOUBLE)")
    con.execute("""INSERT INTO rollouts VALUES ('t1', 'a', 0.2), ('t1', 'a', 0.6), ('t1', 'b', 0.5), ('t2', 'a', 1),
        ('t2', 'b', NULL), (NULL, 'a', 0.9), ('t3', NULL, 0.1)""")
    got = fetch_cells(con).sort_by([("task_id", "ascending"), ("model", "ascending")]).to_pylist()
    assert got == [{"task_id": "t1", "model": "a", "mean_reward": pytest.approx(0.4)},
                   {"task_id": "t1", "model": "b", "mean_reward": 0.5},
                   {"task_id": "t2", "model": "a", "mean_reward": 1.0}]
    only_a = fetch_cells(con, "model = ?", ["a"])
    assert sorted(only_a.column("task_id").to_pylist()) == ["t1", "t2"]
    assert "GROUP BY ALL" in cells_sql("true") and "FROM rollouts" in cells_sql("true")


def test_a_million_rows_rate_well_within_the_leaderboards_time():
    con = duckdb.connect(config={"threads": 2})
    index_view(con, 1_000_000, tasks=1100, models=12)
    fetch_cells(con)  # the first run pays for DuckDB's warm-up, as the app's first board does
    start = time.perf_counter()
    table = fetch_cells(con)
    sql_s = time.perf_counter() - start
    lines = ratings(table)
    total_s = time.perf_counter() - start
    assert table.num_rows == 1100 * 12 and len(lines) == 12 and all(line.rating is not None for line in lines)
    assert all(line.battles == 1100 * 11 for line in lines)
    # The target is 500 ms on a quiet machine (about 60 + 30 ms measured); the bound leaves room for 5 other
    # developers' tests on the same two cores while still catching a slip of an order of magnitude.
    assert total_s < 1.5, f"cells {sql_s * 1000:.0f} ms, total {total_s * 1000:.0f} ms"


def test_the_cells_query_runs_on_the_browse_index_view_with_its_filters():
    rows = index_table(300, seed=4)
    engine = IndexEngine(threads=1)
    engine.set_table("local", rows)
    where, params = engine.where(Filters.parse(model=("baseline:naive", "baseline:greedy")))
    with engine.lock:
        table = pa.table(engine.sql(cells_sql(where), params).fetchnumpy())
    expected = {}
    for row in rows.to_pylist():
        if row["model"] in ("baseline:naive", "baseline:greedy"):
            expected.setdefault((row["task_id"], row["model"]), []).append(row["reward"] or 0.0)
    got = {(c["task_id"], c["model"]): c["mean_reward"] for c in table.to_pylist()}
    assert got.keys() == expected.keys() and len(got) > 10
    assert all(got[key] == pytest.approx(sum(values) / len(values)) for key, values in expected.items())
    assert {line.model for line in ratings(table)} == {"baseline:naive", "baseline:greedy"}


def test_a_rating_of_fewer_than_fifty_battles_is_provisional_in_the_json_the_table_and_the_notes():
    lines = ratings(cells(("t1", ANCHOR, 0.2), ("t1", "b", 0.8), ("t2", ANCHOR, 0.5), ("t2", "b", 0.5)),
                    min_tasks=1)
    assert all(item["provisional"] for item in ratings_json(lines))
    table = ratings_markdown(lines)
    assert " provisional |" in table
    assert "provisional: fewer than 20 tasks played or fewer than 50 arena battles fought" in table
