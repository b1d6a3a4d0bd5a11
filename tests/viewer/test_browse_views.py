"""Browse's pure parts: the state that round-trips through the URL, the heatmap, the per-ship diff, exports."""

from __future__ import annotations

import csv
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from berth_env import load_pack
from rollouts import schema
from rollouts.archive import Archive
from rollouts.board import board, heatmap
from rollouts.filters import Filters
from rollouts.index.engine import IndexEngine
from rollouts.index.format import INDEX_SCHEMA
from rollouts.layout import record_rel
from rollouts.ratings import cells_sql, ratings
from rollouts.schema import index_row
from rollouts.sources.local import LocalSource
from rollouts.store import RolloutStore
from testkit.records import make_record, make_records
from viewer.browse.api import browse_rollouts
from viewer.browse.state import BrowseState, state_from_query
from viewer.browse.views import (
    CELLS,
    arena_note,
    board_table,
    heatmap_table,
    list_table,
    more_columns,
    plan_diff,
)

TASK = "dock-24B-w06x1-busy-0"


def engine_of(records: list[dict]) -> IndexEngine:
    engine = IndexEngine()
    engine.set_table("local", pa.Table.from_pylist([index_row(r, record_rel(r)) for r in records], schema=INDEX_SCHEMA))
    return engine


def test_a_state_round_trips_through_its_url():
    filters = Filters.parse(q="gantry late", model=("openai:gpt-5.5", "anthropic:claude-x@high"), tier=("storm",),
                            quay=("24B",), source=("hub",), submitted="yes", reward_min=0.25, date_from="2026-11-01")
    state = BrowseState(filters=filters, sort="reward", descending=False, page=3, rollout="ab12", compare="cd34",
                        view="compare")
    query = state.to_query()
    assert query.startswith("tab=browse&q=gantry+late&model=openai")
    assert state_from_query(query) == state
    assert state_from_query("?" + query) == state
    assert BrowseState().to_query() == "tab=browse"  # the defaults stay out of the URL
    assert state_from_query("tab=browse&view=board").view == "board"


def test_odd_url_values_are_dropped_and_named():
    state = state_from_query("tier=storm&tier=hurricane&sort=path&page=-4&rollout=../etc&source=ftp&rmin=high"
                             "&submitted=maybe&view=nowhere")
    filters = state.filters
    assert filters["tier"] == ("storm",) and filters["source"] == () and state.sort == "started" and state.page == 1
    assert filters["submitted"] is None and filters["reward_min"] is None and state.view == "list"
    assert "unknown sort 'path'" in state.problems and "malformed rollout id" in state.problems
    assert any("hurricane" in p for p in filters.problems) and any("'high'" in p for p in filters.problems)
    assert len(state_from_query("q=" + "x" * 5000).filters.search) == 200


def test_the_list_shows_compact_columns_and_more_on_demand():
    rows = engine_of(make_records(5, seed=4)).fetch()
    compact = list_table(rows)
    assert list(compact.columns) == ["model", "task", "tier", "reward", "ended", "when"]
    assert all(len(v) == 16 for v in compact["when"])  # "2026-11-29 10:15"
    wide = list_table(rows, ("episode_id", "cost", "nonsense"))
    assert list(wide.columns)[-2:] == ["id", "cost"]


def test_every_column_browse_shows_is_a_column_of_its_rows():
    rows, *_ = engine_of(make_records(3, seed=4)).page(Filters())  # a page: its rows with the counts joined to them
    assert set(schema.BROWSE_COLUMNS) <= set(rows.column_names)
    assert set(CELLS) >= {c.cell for c in schema.BROWSE_COLUMNS.values()}


def test_a_column_added_in_the_data_layer_alone_reaches_the_list_its_menu_and_the_api(tmp_path, monkeypatch):
    """ARCHITECTURE.md's recipe for a Browse column: a row of rollouts.schema.BROWSE_COLUMNS (the index column
    itself is COLUMNS'), and no viewer edit, offers it in the list's "More columns" menu, shows it in the list
    under its header and its cell format, and gives it in /browse_rollouts under its API name."""
    records = make_records(6, seed=7)
    with RolloutStore(tmp_path, writer_id="w1") as store:
        for record in records:
            store.save(record)
    served = {r["episode_id"]: r["env_url"] for r in records}
    monkeypatch.setitem(schema.BROWSE_COLUMNS, "env_url", schema.BrowseColumn("server", "more", "text",
                                                                              api="server"))
    monkeypatch.setitem(schema.BROWSE_COLUMNS, "checks_to_feasible", schema.BrowseColumn("to feasible", "list",
                                                                                         "count", "80px"))
    assert more_columns()["env_url"] == "server"
    archive = Archive.of_folder(tmp_path)
    rows = archive.matching(Filters())
    table = list_table(rows, ("env_url",))
    assert list(table.columns) == ["model", "task", "tier", "reward", "ended", "when", "to feasible", "server"]
    assert list(table["server"]) == [served[i] for i in rows.column("episode_id").to_pylist()]
    api = browse_rollouts(SimpleNamespace(archive=archive), page_size=500)["rows"]
    assert {row["episode_id"]: row["server"] for row in api} == served
    assert all("env_url" not in row and "checks_to_feasible" in row for row in api)
    assert all("tokens" not in row for row in api)  # a column the table keeps out of the API stays out


def test_the_heatmap_groups_tasks_by_tier_and_points_each_cell_at_its_best_rollout():
    records = [make_record(seed=i, task_id=t, model=m, episode_id=f"e{i}", started=f"2026-11-2{i % 9}T10:00:00Z")
               for i, (t, m) in enumerate([(TASK, "a:x"), (TASK, "a:x"), (TASK, "b:y"),
                                           ("dock-24B-w06x1-standard-0", "a:x")])]
    records[0]["reward"], records[1]["reward"], records[2]["reward"] = 0.2, 0.9, 0.5
    heat = heatmap(engine_of(records))
    assert heat.tasks == [("standard", "dock-24B-w06x1-standard-0"), ("busy", TASK)]
    assert heat.models == ["a:x", "b:y"]
    busy = heat.tasks.index(("busy", TASK))
    assert heat.mean[busy] == [pytest.approx(0.55), pytest.approx(0.5)]
    assert heat.best[busy] == ["e1", "e2"] and heat.count[busy] == [2, 1]
    assert heat.best[0][1] is None and heat.mean[0][1] is None  # b:y never played the standard task
    styled = heatmap_table(heat)
    html = styled.to_html()
    assert "background-color" in html and list(styled.data.columns) == ["tier", "task", "a:x", "b:y"]


def test_the_plan_diff_lists_exactly_the_ships_that_differ_with_what_each_breaks():
    task = load_pack().get(TASK)
    optimal = [dict(e) for e in task["reference"]["optimal_plan"]]
    moved = [dict(e) for e in optimal]
    moved[12].update(berth_hour=0, section=4)  # too early, and onto ship 0
    diff = plan_diff(task, moved, optimal)
    assert list(diff["ship"]) == ["0 PERSEUS", "12 " + task["ships"][12]["name"]]  # 0 breaks a rule only in A
    row = diff.iloc[1]
    assert (row["section A"], row["berth hour A"]) == ("4", "0")
    assert "cannot arrive" in row["broken in A"] and row["broken in B"] == "–"
    assert plan_diff(task, optimal, optimal).empty
    unread = plan_diff(task, "not a plan", optimal)
    assert len(unread) == len(task["ships"]) and set(unread["section A"]) == {"not planned"}


def test_exports_hold_exactly_the_filtered_rows_and_a_formula_stays_text(tmp_path):
    store = RolloutStore(tmp_path / "store", writer_id="w1")
    records = make_records(40, seed=9)
    storm = sorted(r["episode_id"] for r in records if r["task"]["difficulty"] == "storm")
    hostile = next(r for r in records if r["task"]["difficulty"] == "storm")
    hostile.update(model="=HYPERLINK(\"http://evil\",\"x\")", run="@SUM(1+1)*cmd|' /C calc'!A0")
    for record in records:
        store.save(record)
    index = Archive(LocalSource(tmp_path / "store"))
    filters = Filters.parse(tier="storm")
    path = index.export(filters, tmp_path / "out", fmt="csv")
    with open(path, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert sorted(row["episode_id"] for row in rows) == storm
    cells = [cell for row in rows for cell in row.values()]
    assert "'=HYPERLINK(\"http://evil\",\"x\")" in cells and "'@SUM(1+1)*cmd|' /C calc'!A0" in cells
    assert not any(cell.startswith(("=", "+", "@")) for cell in cells)
    table = pq.read_table(index.export(filters, tmp_path / "out", fmt="parquet", sort="reward"))
    assert sorted(table.column("episode_id").to_pylist()) == storm
    assert table.column("reward").to_pylist() == sorted(table.column("reward").to_pylist(), reverse=True)
    assert hostile["model"] in table.column("model").to_pylist()  # Parquet keeps values as they are
    with pytest.raises(ValueError, match="csv or parquet"):
        index.export(filters, tmp_path, fmt="xlsx")


def test_the_board_says_n_too_small_and_unrated_and_its_note_names_the_real_scale():
    tasks = [t["task_id"] for t in load_pack().split("eval")[:6]]
    records = [make_record(seed=k, task_id=tasks[k // 2 % 6], model=("baseline:greedy", "openai:gpt-x")[k % 2],
                           end_reason="submitted") for k in range(24)]
    records.append(make_record(seed=99, task_id=tasks[0], model="human", end_reason="submitted"))
    engine = engine_of(records)
    with engine.lock:
        rated = ratings(engine.sql(cells_sql(), []).fetchnumpy())
    table = board_table(board(engine, rated=rated))
    human = table[table["model"] == "human"].iloc[0]
    assert table["model"].iloc[-1] == "human"  # one episode: after the ranked models, whatever its mean
    assert (human["95% CI"], human["arena 95% CI"]) == ("n too small", "unrated") and human.isna()["arena"]
    assert all(table[table["model"] != "human"]["arena 95% CI"] != "unrated")
    note = arena_note(rated, {})
    # No baseline:naive here: the scale is the mean of the rated, and the note says so rather than naming naive.
    assert "centred on the mean, 1000 = the mean of the 2 rated models" in note and "1000 = baseline:naive" not in note
    assert "human: no rating: battles on 1 task; a rating needs at least 5 tasks shared with another model" in note


def test_a_step_and_a_compare_have_their_own_addresses():
    """Issue 30.1/30.3: `rollout=<id>&step=<k>`; a compare is `compare=<a>,<b>&step=<k>` (the older form reads
    the same); a step without a rollout or out of bounds is dropped."""
    opened = BrowseState(rollout="ab12", step=2)
    assert opened.to_query() == "tab=browse&rollout=ab12&step=2" and state_from_query(opened.to_query()) == opened
    pair = BrowseState(rollout="ab12", compare="cd34", view="compare", step=3)
    assert pair.to_query() == "tab=browse&compare=ab12%2Ccd34&step=3"
    assert state_from_query(pair.to_query()) == pair == state_from_query("rollout=ab12&compare=cd34&step=3")
    assert state_from_query("step=2").step == 0
    odd = state_from_query("rollout=ab12&step=-3")
    assert odd.step == 0 and any("step" in p for p in odd.problems)
