"""The index engine (rollouts.index.engine, rollouts.board) against the pandas engine it replaced (tests/oracle) on the
same generated rows, with the rows held, read in place and copied: the same pages, counts, search hits, leaderboard
numbers and heatmap; a folder mixing JSONL and Parquet index files with a row in both; only a page read whole."""

from __future__ import annotations

import gc
import json
import math
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rollouts import board as board_module
from rollouts.archive import Archive
from rollouts.filters import Filters
from rollouts.index.engine import IndexEngine
from rollouts.index.format import INDEX_SCHEMA
from rollouts.sources.local import LocalSource
from testkit.index_rows import index_table
from tests.oracle import numpy_board
from tests.oracle.numpy_board import leaderboard
from tests.oracle.pandas_index import frame_from_tables, heatmap_of
from tests.oracle.pandas_query import filter_mask, options, page_of, sort_rows

ROWS = 3_000
LARGE = 200  # the bootstrap's limit here: a model has about 330 rows (SQL aggregates), a tier filter leaves fewer


@pytest.fixture(autouse=True)
def small_bootstrap_limit(monkeypatch):
    for module in (numpy_board, board_module):
        monkeypatch.setattr(module, "BOOTSTRAP_MAX_EPISODES", LARGE)


def unique_starts(table: pa.Table, seed: int) -> pa.Table:
    """Distinct start times, so "newest first" is one order whatever breaks ties."""
    seconds = np.random.default_rng(seed).choice(60 * 86400, table.num_rows, replace=False)
    moments = np.datetime64("2026-10-01T00:00:00") + seconds.astype("timedelta64[s]")
    started = pa.array(np.datetime_as_string(moments, unit="s").astype(object) + "Z", pa.string())
    return table.set_column(INDEX_SCHEMA.get_field_index("started"), "started", started)


@pytest.fixture(scope="module")
def rows() -> pa.Table:
    table = unique_starts(index_table(ROWS, seed=3, templates=200), seed=3)
    return table.set_column(0, "run", pa.array([["run-a", None, "sweep-b"][i % 3] for i in range(ROWS)]))


MODES = {"rows held": {}, "files read in place": {"hold_rows": 0, "copy_rows": 10**9},
         "Parquet rows copied": {"hold_rows": 0, "copy_rows": 0}}


@pytest.fixture(scope="module", params=list(MODES))
def both(rows, tmp_path_factory, request):
    """(the pandas frame, an Archive over a folder of the same rows: Parquet files, and JSONL for the last days),
    its rows held in one table, its Parquet files read in place, or read from the engine's copy of them."""
    root = tmp_path_factory.mktemp("sql-parity")
    chunk = ROWS // 8
    for k in range(8):  # six compacted files, and two days of JSONL not compacted yet
        part = rows.slice(k * chunk, chunk if k < 7 else ROWS - 7 * chunk)
        day = root / "index" / f"2026-11-0{k + 1}"
        day.mkdir(parents=True)
        if k < 6:
            pq.write_table(part, day / "w1.parquet")
        else:
            (day / "w1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part.to_pylist()))
    index = Archive(LocalSource(root), **MODES[request.param])
    index.refresh_local(force=True)
    index.engine.wait_copied()
    assert index.engine.copied("local") == (request.param == "Parquet rows copied")
    assert index.engine.held("local") == (request.param == "rows held")
    return frame_from_tables({"local": rows}), index


FILTERS = [
    {},
    {"tier": "storm"},
    {"model": "anthropic:claude-sonnet-5-5@high,openai:gpt-5.5@medium", "feasible": "yes"},
    {"reward_min": 0.5, "submitted": "yes"},
    {"reward_max": 0.2, "date_from": "2026-10-20", "date_to": "2026-11-02"},
    {"quay": "24B", "source": "local"},
    {"q": "sonnet"},
    {"q": "0300000000 "},                   # an id prefix
    {"q": "storm SWEEP"},                   # every word must match: a task part and a run, any case
    {"source": "hub"},                      # nothing
]


SORTS = [("started", True), ("reward", True), ("cost", False), ("model", True), ("tokens", False),
         ("turns", True), ("started", False), ("seconds", True), ("task_id", False), ("checks", True)]


@pytest.mark.parametrize("values,sort,descending", [(f, *s) for f, s in zip(FILTERS, SORTS, strict=True)])
def test_pages_and_counts_match_pandas(both, values, sort, descending):
    frame, index = both
    filters = Filters.parse(**values)
    matched = sort_rows(frame[filter_mask(frame, filters)], sort, descending)
    for page in (1, 3):
        expected, page_used, pages = page_of(matched, page, 50)
        got, total, got_page, got_pages = index.query(filters, sort=sort, descending=descending, page=page)
        assert (total, got_page, got_pages) == (len(matched), page_used, pages)
        assert got.column("episode_id").to_pylist() == list(expected["episode_id"])
    if total:
        assert set(got.column_names) >= {"episode_id", "source", "played_in", "tokens", "date", "reward"}
        assert got.column("reward").to_pylist() == pytest.approx(list(expected["reward"]))


def assert_boards_equal(got: list[dict], expected) -> None:
    assert [line["model"] for line in got] == list(expected["model"])
    for column in expected.columns:
        if column == "model":
            continue
        a, b = np.array([line[column] for line in got], dtype=float), expected[column].to_numpy(dtype=float)
        assert np.allclose(a, b, rtol=1e-9, atol=1e-9, equal_nan=True), (column, a, b)


@pytest.mark.parametrize("values,same_tasks", [({}, False), ({}, True), ({"tier": "storm"}, False),
                                                ({"reward_min": 0.3, "quay": "24B,36A"}, True),
                                                ({"q": "gpt"}, False)])
def test_the_leaderboard_has_the_same_numbers(both, values, same_tasks):
    frame, index = both
    filters = Filters.parse(**values)
    kept = frame[filter_mask(frame, filters)]
    expected = leaderboard(kept.assign(model=kept["model"].astype(str), task_id=kept["task_id"].astype(str),
                                       difficulty=kept["difficulty"].astype(str)), same_tasks=same_tasks)
    got = index.board(filters, same_tasks=same_tasks)
    assert len(got) and len(got) == len(expected)
    assert_boards_equal(got, expected)


def test_both_board_paths_are_exercised(both):
    _, index = both
    assert all(line["n"] > LARGE for line in index.board(Filters()))
    assert all(line["n"] <= LARGE for line in index.board(Filters.parse(tier="storm")))


@pytest.mark.parametrize("values", [{}, {"model": "baseline:greedy,vllm:llama-4-scout", "reward_min": 0.1}])
def test_the_heatmap_has_the_same_cells(both, values):
    frame, index = both
    filters = Filters.parse(**values)
    expected = heatmap_of(frame[filter_mask(frame, filters)])
    got = index.heatmap(filters)
    assert got.tasks == expected.tasks and sorted(got.models) == sorted(expected.models)
    column = {m: j for j, m in enumerate(expected.models)}
    for i in range(len(got.tasks)):
        for j, model in enumerate(got.models):
            k = column[model]
            assert got.count[i][j] == expected.count[i][k]
            assert got.best[i][j] == expected.best[i][k]
            a, b = got.mean[i][j], expected.mean[i][k]
            assert (a is None and b is None) or math.isclose(a, b, rel_tol=1e-9)


def test_options_row_and_same_task_match(both):
    frame, index = both
    assert index.options() == options(frame)
    assert index.total() == len(frame)
    some = frame.iloc[123]
    row = index.row(some["episode_id"])
    assert row["task_id"] == some["task_id"] and row["source"] == "local" and row["tokens"] == some["tokens"]
    others = index.same_task(some["task_id"], exclude=some["episode_id"], limit=20)
    rest = frame[(frame["task_id"] == some["task_id"]) & (frame["episode_id"] != some["episode_id"])]
    assert [r["episode_id"] for r in others] == list(rest.sort_values("reward", ascending=False,
                                                                       kind="stable")["episode_id"].head(20))


@pytest.mark.parametrize("mode", list(MODES))
def test_a_row_in_both_a_jsonl_and_a_parquet_file_counts_once_and_the_jsonl_copy_wins(rows, tmp_path, mode):
    part = rows.slice(0, 40)
    day = tmp_path / "index" / "2026-11-30"
    day.mkdir(parents=True)
    pq.write_table(part.slice(0, 30), day / "w1.parquet")  # compaction wrote rows 0-29 ...
    jsonl = part.slice(20, 20).to_pylist()  # ... and the JSONL still holds 20-39, one edited since (annotated)
    jsonl[0] = {**jsonl[0], "regrade_reward": 0.125}
    edited = jsonl[0]["episode_id"]
    planted = {**part.slice(0, 1).to_pylist()[0], "episode_id": "planted", "path": "../../etc/passwd"}
    (day / "w1.jsonl").write_text("\n".join([*map(json.dumps, jsonl), "not json", json.dumps(planted)]) + "\n")
    index = Archive(LocalSource(tmp_path), **MODES[mode])
    index.refresh_local(force=True)
    index.engine.wait_checked()
    index.engine.wait_copied()
    frame = index.engine.fetch().to_pandas()
    assert len(frame) == 40 and frame["episode_id"].is_unique
    assert set(frame["episode_id"]) == set(part.column("episode_id").to_pylist())
    assert index.row(edited)["regrade_reward"] == 0.125  # the JSONL copy, not the compacted one
    status = {s.name: s for s in index.statuses()}["local"]
    assert status.rows == 40 and status.skipped == 2
    # A row planted in a Parquet file is left out (at once when held, once the file is checked otherwise).
    pq.write_table(pa.Table.from_pylist([{**planted, "episode_id": "planted2"}], schema=INDEX_SCHEMA),
                   day / "w2.parquet")
    index.refresh_local(force=True)
    index.engine.wait_checked()
    index.engine.wait_copied()
    assert index.engine.copied("local") == (mode == "Parquet rows copied")
    assert index.engine.fetch().num_rows == 40 and index.engine.skipped["local"] == 3
    assert index.query(Filters())[1] == 40 and sum(line["n"] for line in index.board(Filters())) == 40
    # An episode in two Parquet files: the first file's row counts.
    pq.write_table(part.slice(5, 1).set_column(INDEX_SCHEMA.get_field_index("reward"), "reward",
                                               pa.array([0.5])), day / "w3.parquet")
    index.refresh_local(force=True)
    index.engine.wait_checked()
    first = part.column("episode_id")[5].as_py()
    assert index.total() == 40 and index.row(first)["reward"] == part.column("reward")[5].as_py()
    # A local row also on the Hub is one row, labelled as both.
    index.engine.set_table("hub", part.slice(35, 10))
    assert index.engine.count() == 40
    labels = index.engine.fetch("episode_id = ?", [part.column("episode_id")[36].as_py()]).column("source")
    assert labels.to_pylist() == ["local+hub"]


def test_a_page_reads_only_its_rows(both, monkeypatch):
    _, index = both
    fetched = []
    real = IndexEngine.fetch

    def spy(self, *args, **kwargs):
        rows = real(self, *args, **kwargs)
        fetched.append(rows.num_rows)
        return rows

    monkeypatch.setattr(IndexEngine, "fetch", spy)
    rows, total, page, _ = index.query(Filters.parse(tier="busy"), sort="reward", page=4, size=25)
    assert rows.num_rows == 25 and total > 100 and page == 4
    assert fetched == [25]


def test_two_file_sources_overlap_once(rows, tmp_path):
    """Index files of two sources (the local folder, and the same layout downloaded from the Hub): shared rows count
    once, the local copy labelled as both."""
    local, hub = tmp_path / "local", tmp_path / "hub"
    for folder, part in ((local, rows.slice(0, 30)), (hub, rows.slice(20, 30))):
        (folder / "index" / "2026-11-30").mkdir(parents=True)
        pq.write_table(part, folder / "index" / "2026-11-30" / "w1.parquet")
    engine = IndexEngine()
    engine.set_files("local", sorted(local.glob("index/*/*.parquet")))
    engine.set_files("hub", sorted(hub.glob("index/*/*.parquet")))
    frame = engine.fetch().to_pandas()
    assert len(frame) == 50 and frame["episode_id"].is_unique
    assert frame["source"].value_counts().to_dict() == {"local": 20, "local+hub": 10, "hub": 20}
    assert engine.counts == {"local": 30, "hub": 30}


def test_a_copy_follows_the_files_and_a_page_never_waits_for_it(rows, tmp_path):
    """Compaction adds a file: its rows show at once (read in place), then from a new copy; a file gone is gone."""
    def write(k: int) -> Path:
        day = tmp_path / "index" / f"2026-11-0{k + 1}"
        day.mkdir(parents=True, exist_ok=True)
        pq.write_table(rows.slice(k * 500, 500), day / "w1.parquet")
        return day / "w1.parquet"

    first = [write(0), write(1)]
    index = Archive(LocalSource(tmp_path), copy_rows=0, hold_rows=0)
    index.refresh_local(force=True)
    index.engine.wait_copied()
    assert index.engine.copied("local") and index.total() == 1000
    write(2)
    index.refresh_local(force=True)
    assert index.total() == 1500  # before the new copy is made: the files are read in place
    index.engine.wait_copied()
    assert index.engine.copied("local")
    page, total, _, _ = index.query(Filters.parse(tier="storm"), sort="reward", page=2)
    expected = sort_rows(frame_from_tables({"local": rows.slice(0, 1500)}).pipe(
        lambda f: f[filter_mask(f, Filters.parse(tier="storm"))]), "reward", True)
    assert total == len(expected)
    assert page.column("episode_id").to_pylist() == list(expected["episode_id"].iloc[50:100])
    first[0].unlink()
    index.refresh_local(force=True)
    assert index.total() == 1000 and not index.engine.copied("local")
    index.engine.wait_copied()
    assert index.engine.copied("local") and index.total() == 1000


def test_a_copy_of_files_that_changed_meanwhile_is_dropped(rows, tmp_path):
    day = tmp_path / "index" / "2026-11-01"
    day.mkdir(parents=True)
    pq.write_table(rows.slice(0, 100), day / "w1.parquet")
    index = Archive(LocalSource(tmp_path), copy_rows=0, hold_rows=0)
    index.refresh_local(force=True)
    engine = index.engine
    engine.wait_copied()
    copies = engine._copies
    name, held = copies._ready["local"]
    stale = frozenset({(day / "gone.parquet", 1, 1)})
    engine.sql(f"CREATE TABLE {name}_stale AS SELECT * FROM {name}")
    copies._swap_in("local", stale, f"{name}_stale")  # made from files that are no longer the source's
    assert copies._ready["local"] == (name, held) and engine.copied("local")
    tables = {r[0] for r in engine.sql("SELECT table_name FROM duckdb_tables() WHERE database_name = 'copies'").fetchall()}
    assert tables == {name.split(".")[1]}


def test_the_copies_go_with_the_engine(rows, tmp_path):
    day = tmp_path / "index" / "2026-11-01"
    day.mkdir(parents=True)
    pq.write_table(rows.slice(0, 100), day / "w1.parquet")
    engine = IndexEngine(copy_rows=0, hold_rows=0)
    engine.set_files("local", [day / "w1.parquet"])
    engine.wait_copied()
    folder = engine._copies._folder
    assert engine.copied("local") and (folder / "copies.duckdb").exists()
    del engine
    gc.collect()
    assert not folder.exists()


def test_a_copy_the_view_cannot_use_is_given_up_not_made_again_and_again(rows, tmp_path):
    day = tmp_path / "index" / "2026-11-01"
    day.mkdir(parents=True)
    pq.write_table(rows.slice(0, 100), day / "w1.parquet")
    engine = IndexEngine(copy_rows=0, hold_rows=0)
    copies = engine._copies
    build = copies._on_ready

    def view_fails_over_the_copy() -> None:
        if "local" in copies._ready:
            raise duckdb.CatalogException("no view over the copy")
        build()

    copies._on_ready = view_fails_over_the_copy
    engine.set_files("local", [day / "w1.parquet"])
    engine.wait_copied(timeout=20)
    assert not copies._thread.is_alive() and copies._made == 1  # one try, not a loop of them
    assert not engine.copied("local") and engine.count() == 100  # the files are read in place, as before
    engine.set_files("local", [day / "w1.parquet"])  # a rebuild over the same files does not try again
    engine.wait_copied(timeout=20)
    assert copies._made == 1
