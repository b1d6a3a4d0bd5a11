"""The archive (rollouts.archive) and its engine: sources merged with a `source` column, each filter, sorting,
paging, search, the board, records on demand, a slow or failing Hub."""

from __future__ import annotations

import json
import time

import numpy as np
import pyarrow as pa
import pytest

from rollouts.archive import Archive, RolloutNotFound
from rollouts.board import sort_board
from rollouts.filters import Filters
from rollouts.index.engine import IndexEngine
from rollouts.index.format import INDEX_SCHEMA
from rollouts.layout import record_rel as record_path
from rollouts.schema import index_row
from rollouts.sources import Loaded
from rollouts.sources.local import LocalSource
from rollouts.store import RolloutStore
from testkit.boards import board_of
from testkit.records import make_record, make_records


def table_of(records: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([index_row(r, record_path(r)) for r in records], schema=INDEX_SCHEMA)


def engine_of(**tables: pa.Table) -> IndexEngine:
    engine = IndexEngine()
    for source, table in tables.items():
        engine.set_table(source, table)
    return engine


def matching(engine: IndexEngine, filters: Filters, column: str = "episode_id") -> list:
    return engine.fetch(*engine.where(filters)).column(column).to_pylist()


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return make_records(120, seed=21)


@pytest.fixture(scope="module")
def engine(records):
    return engine_of(local=table_of(records))


def test_sources_merge_into_one_row_per_rollout(records):
    local, pushed_too, hub_only = records[:5], records[3:5], records[5:8]
    upstream = table_of(records[8:10]).to_pylist()
    for row in upstream:
        row.update(episode_id="up-" + row["episode_id"], source="upstream", started=None)
    frame = engine_of(local=table_of(local), hub=table_of(pushed_too + hub_only),
                      upstream=pa.Table.from_pylist(upstream, schema=INDEX_SCHEMA)).fetch().to_pandas()
    by_id = dict(zip(frame["episode_id"], frame["source"], strict=True))
    assert len(frame) == 10 and len(by_id) == 10
    assert [by_id[r["episode_id"]] for r in local] == ["local", "local", "local", "local+hub", "local+hub"]
    assert {by_id[r["episode_id"]] for r in hub_only} == {"hub"}
    assert list(frame["source"].iloc[-2:]) == ["upstream", "upstream"]  # no start time: listed last
    assert set(frame["played_in"].dropna()) <= {"space", "cli", "upstream"}
    assert frame["started"].iloc[:8].is_monotonic_decreasing


def test_an_empty_index_still_has_every_column():
    engine = IndexEngine()
    assert engine.count() == 0 and {"episode_id", "source", "reward", "date", "tokens"} <= set(
        engine.empty().column_names)
    assert Filters.parse(tier="storm")["tier"] == ("storm",)
    assert matching(engine, Filters.parse(model="x", date_from="2026-01-01")) == []
    assert board_of([]) == []


@pytest.mark.parametrize("filters, check", [
    (dict(model="baseline:greedy"), lambda r: r["model"] == "baseline:greedy"),
    (dict(tier=["storm", "extreme"]), lambda r: r["task"]["difficulty"] in ("storm", "extreme")),
    (dict(quay="36A"), lambda r: r["task"]["quay"] == "36A"),
    (dict(reward_min=0.5, reward_max=0.99), lambda r: 0.5 <= r["reward"] <= 0.99),
    (dict(submitted="no"), lambda r: not r["final"]["submitted"]),
    (dict(feasible="yes"), lambda r: bool((r["final"].get("grade") or {}).get("feasible"))),
    (dict(date_from="2026-11-25", date_to="2026-11-26"), lambda r: "2026-11-25" <= r["started"][:10] <= "2026-11-26"),
    (dict(task="dock-24B-w06x1-standard-0,dock-36A-w17x1-standard-0"),
     lambda r: r["task_id"] in ("dock-24B-w06x1-standard-0", "dock-36A-w17x1-standard-0")),
])
def test_each_filter_keeps_exactly_the_matching_rollouts(engine, records, filters, check):
    kept = set(matching(engine, Filters.parse(**filters)))
    expected = {r["episode_id"] for r in records if check(r)}
    assert kept == expected and 0 < len(kept) < len(records)


def test_filters_combine_and_source_filter_matches_both_labels(records):
    engine = engine_of(local=table_of(records[:4]), hub=table_of(records[2:6]))
    assert set(matching(engine, Filters.parse(source="hub"), "source")) == {"hub", "local+hub"}
    assert set(matching(engine, Filters.parse(source=["local"]), "source")) == {"local", "local+hub"}
    assert all(matching(engine, Filters.parse(source="hub", submitted="yes"), "submitted"))


def test_bad_filter_values_are_named_and_left_out():
    filters = Filters.parse(reward_min="lots", date_from="29/11/2026", date_to="2026-02-30", tier="storm,hurricane",
                            source="ftp")
    assert filters["reward_min"] is None and filters["date_from"] is None and filters["date_to"] is None
    assert filters["tier"] == ("storm",) and filters["source"] == ()
    text = " | ".join(filters.problems)
    for word in ("'lots' is not a number", "'29/11/2026' is not a date", "'2026-02-30'", "hurricane", "ftp"):
        assert word in text
    backwards = Filters.parse(date_from="2026-11-30", date_to="2026-11-01")
    assert backwards["date_from"] is None and "after the to date" in backwards.problems[0]
    with pytest.raises(TypeError, match="unknown filter"):
        Filters.parse(path="../x")


def test_a_search_repeating_a_word_is_one_word_and_a_long_one_is_cut():
    repeated = Filters.parse(q=" ".join(["storm"] * 50 + ["STORM"]))
    assert repeated.search == "storm" and not repeated.problems
    many = Filters.parse(q=" ".join(f"word{i}" for i in range(30)))
    assert len(many.search.split()) == 8 and "first 8 different words" in many.problems[0]


def test_upstream_rows_without_a_date_drop_out_of_a_date_filter(records):
    upstream = table_of(records[:3]).to_pylist()
    for row in upstream:
        row.update(episode_id="up-" + row["episode_id"], started=None)
    engine = engine_of(upstream=pa.Table.from_pylist(upstream, schema=INDEX_SCHEMA))
    assert len(matching(engine, Filters())) == 3
    assert matching(engine, Filters.parse(date_from="2000-01-01")) == []


def test_sorting_and_paging(engine):
    def page(sort="started", descending=True, number=1):
        return engine.page(Filters(), sort=sort, descending=descending, page=number)

    assert page("reward")[0].to_pandas()["reward"].is_monotonic_decreasing
    costs = page("cost", False)[0].to_pandas()["cost"].to_numpy(dtype=float)
    known = costs[~np.isnan(costs)]
    assert (np.diff(known) >= 0).all() and np.isnan(costs[len(known):]).all()  # missing costs last
    models = page("model", False)[0].column("model").to_pylist()
    assert models == sorted(models)
    with pytest.raises(ValueError, match="cannot sort by"):
        page("path")
    rows, total, number, pages = page(number=3)
    assert (number, pages, rows.num_rows, total) == (3, 3, 20, 120)
    assert page(number=99)[2] == 3 and page(number=-1)[2] == 1
    newest = engine.fetch().column("episode_id").to_pylist()
    assert page(number=2)[0].column("episode_id").to_pylist() == newest[50:100]


def test_options_list_what_the_rows_hold(engine, records):
    chosen = engine.options()
    assert chosen["model"] == sorted({r["model"] for r in records})
    assert chosen["quay"] == ["24B", "36A"]


# -- the archive with its sources --------------------------------------------------------------------------------


class FakeRemote:
    """A remote source that answers after `delay` seconds (or fails), to test waiting and errors."""

    name = "hub"
    label = "Hub dataset test/slow"

    def __init__(self, table: pa.Table | None, delay: float = 0.0, error: str | None = None):
        self.table, self.delay, self.error, self.loads = table, delay, error, 0

    def load(self) -> Loaded:
        self.loads += 1
        time.sleep(self.delay)
        return Loaded(self.name, self.label, table=self.table, error=self.error)

    def record(self, row: dict) -> dict:
        return {"episode_id": row["episode_id"], "from": "remote"}


class Damaged(FakeRemote):
    """A Hub whose record of an episode names another one (a path, even)."""

    def record(self, row: dict) -> dict:
        return {"episode_id": "../../.push/running/forged", "from": "remote"}


def test_index_picks_up_a_new_local_rollout_cheaply(tmp_path):
    store = RolloutStore(tmp_path, writer_id="w1")
    for record in make_records(4, seed=3):
        store.save(record)
    index = Archive(LocalSource(tmp_path), local_every_s=0.0)
    assert index.total() == 4
    version = index.version
    assert index.total() == 4 and index.version == version  # nothing changed: nothing rebuilt
    store.save(make_record(seed=8, episode_id="just_played", started="2026-11-30T08:00:00Z"))
    assert index.matching(Filters()).column("episode_id")[0].as_py() == "just_played"
    assert index.version == version + 1


def test_record_finds_a_local_file_before_its_row_is_read(tmp_path):
    store = RolloutStore(tmp_path, writer_id="w1")
    index = Archive(LocalSource(tmp_path), local_every_s=3600)
    assert index.total() == 0
    saved = make_record(seed=9, episode_id="brand_new", started="2026-11-30T08:00:00Z")
    store.save(saved)
    record, row = index.record("brand_new")
    assert record == saved and row["source"] == "local"


def test_unknown_and_malformed_ids_get_a_clear_message(tmp_path):
    index = Archive(LocalSource(tmp_path), [FakeRemote(None, error="cannot reach the Hub (ConnectError)")])
    index.refresh(wait=5)
    with pytest.raises(RolloutNotFound, match="malformed"):
        index.record("../../etc/passwd")
    with pytest.raises(RolloutNotFound, match=r"No rollout `abc123` in this Space's rollout folder, "
                                              r"Hub dataset test/slow \(unavailable: cannot reach the Hub"):
        index.record("abc123")


def test_a_slow_hub_never_holds_up_the_local_rows(tmp_path, records):
    store = RolloutStore(tmp_path, writer_id="w1")
    store.save(records[0])
    remote = FakeRemote(table_of(records[1:4]), delay=1.0)
    index = Archive(LocalSource(tmp_path), [remote])
    start = time.monotonic()
    index.refresh(wait=0)
    assert index.total() == 1 and index.loading and time.monotonic() - start < 0.9  # the Hub takes 1 s
    assert [s.loading for s in index.statuses()] == [False, True]
    # A deep link to a Hub rollout waits for the load in progress.
    record, row = index.record(records[2]["episode_id"], wait=5)
    assert record["from"] == "remote" and row["source"] == "hub"
    assert index.total() == 4 and not index.loading and remote.loads == 1


def test_a_failing_remote_leaves_the_others_and_says_why(tmp_path, records):
    store = RolloutStore(tmp_path, writer_id="w1")
    store.save(records[0])
    index = Archive(LocalSource(tmp_path), [FakeRemote(None, error="no such dataset")])
    index.refresh(wait=5)
    status = {s.name: s for s in index.statuses()}
    assert status["local"].rows == 1 and status["hub"].error == "no such dataset"
    assert index.total() == 1


def test_a_record_naming_another_episode_than_its_row_is_damaged(tmp_path, records):
    index = Archive(LocalSource(tmp_path), [Damaged(table_of(records[:2]))])
    index.refresh(wait=5)
    with pytest.raises(Exception, match="damaged: it names another episode"):
        index.record(records[0]["episode_id"])


def test_board_follows_the_filters_and_is_remembered(tmp_path, records):
    rows = [json.dumps(index_row(r, record_path(r))) for r in records]
    (tmp_path / "index" / "2026-11-29").mkdir(parents=True)
    (tmp_path / "index" / "2026-11-29" / "w1.jsonl").write_text("\n".join(rows) + "\n")
    index = Archive(LocalSource(tmp_path))
    storm = Filters.parse(tier="storm")
    board = index.board(storm)
    expected = board_of([index_row(r, record_path(r)) for r in records if r["task"]["difficulty"] == "storm"])
    assert sorted(line["model"] for line in board) == sorted(line["model"] for line in expected)
    assert sorted(line["mean_reward"] for line in board) == pytest.approx(sorted(line["mean_reward"]
                                                                                for line in expected))
    assert all(np.isnan(line["mean_standard"]) and not np.isnan(line["mean_storm"]) for line in board)
    assert index.board(storm) is board  # remembered until the rows change
    same = index.board(Filters(), same_tasks=True)
    assert sum(line["n"] for line in same) <= len(records)
    assert [line["model"] for line in sort_board(same, "model")] == sorted((line["model"] for line in same),
                                                                           reverse=True)


def test_a_large_index_filters_sorts_and_pages_in_columns():
    rng = np.random.default_rng(0)
    n = 100_000
    models = np.array([f"provider:model-{i}" for i in range(12)])
    tasks = np.array([f"dock-24B-w{i:02d}x1-standard-0" for i in range(50)])
    table = pa.table({
        **{name: pa.nulls(n, INDEX_SCHEMA.field(name).type) for name in INDEX_SCHEMA.names},
        "episode_id": pa.array([f"{i:012x}" for i in range(n)]),
        "model": pa.array(models[rng.integers(0, 12, n)]), "task_id": pa.array(tasks[rng.integers(0, 50, n)]),
        "difficulty": pa.array(np.array(["standard", "busy", "storm", "extreme"])[rng.integers(0, 4, n)]),
        "reward": pa.array(rng.random(n)), "submitted": pa.array(rng.random(n) < 0.8),
        "feasible": pa.array(rng.random(n) < 0.6), "input_tokens": pa.array(rng.integers(0, 10**5, n)),
        "started": pa.array([f"2026-11-{1 + i % 28:02d}T10:00:00Z" for i in range(n)]),
    }, schema=INDEX_SCHEMA)
    engine = engine_of(local=table)
    filters = Filters.parse(model=["provider:model-3", "provider:model-7"], tier="storm", reward_min=0.2,
                            feasible="yes", date_from="2026-11-05")
    page, total, number, _ = engine.page(filters, sort="reward", page=2)
    rows = page.to_pandas()
    assert number == 2 and len(rows) == 50 and rows["reward"].is_monotonic_decreasing and total > 100
    assert set(rows["model"]) <= {"provider:model-3", "provider:model-7"} and (rows["reward"] >= 0.2).all()
    assert set(rows["difficulty"]) == {"storm"} and rows["feasible"].all()


def test_search_matches_id_prefixes_models_tasks_runs_and_every_word(engine, records):
    record = records[7]
    by_id = matching(engine, Filters.parse(q=record["episode_id"][:6]))
    assert record["episode_id"] in by_id and all(e.startswith(record["episode_id"][:6]) for e in by_id)
    model_part = record["model"].split(":")[1][:8].upper()  # case does not matter
    hits = engine.fetch(*engine.where(Filters.parse(q=model_part))).to_pandas()
    assert len(hits) and all(model_part.lower() in m.lower() or model_part.lower() in t.lower()
                             for m, t in zip(hits["model"], hits["task_id"], strict=True))
    both = engine.fetch(*engine.where(Filters.parse(q=f"{record['task_id']} {model_part}"))).to_pandas()
    assert record["episode_id"] in set(both["episode_id"])
    assert set(both["task_id"]) == {record["task_id"]}  # every word must match
    assert matching(engine, Filters.parse(q="no-such-thing-anywhere")) == []


def test_search_finds_words_the_model_wrote_once_the_records_are_read(tmp_path):
    store = RolloutStore(tmp_path, writer_id="w1")
    quiet, chatty = make_records(2, seed=77)
    chatty["messages"].append({"role": "assistant", "content": "The gantry outage forces ship 7 later.",
                               "reasoning": "", "stop": "end_turn", "tool_calls": []})
    for record in (quiet, chatty):
        store.save(record)
    index = Archive(LocalSource(tmp_path))
    index.refresh_local(force=True)
    deadline = time.monotonic() + 10
    while len(index.transcripts) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    rows, total, _, _ = index.query(Filters.parse(q="gantr"))  # a word's prefix is enough
    assert total == 1 and rows.column("episode_id").to_pylist() == [chatty["episode_id"]]
    rows, total, _, _ = index.query(Filters.parse(q="GANTRY outage"))
    assert total == 1
