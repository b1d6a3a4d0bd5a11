"""Browse's frame: sources merged with a `source` column, filters, sorting, paging, the board, records on demand."""

from __future__ import annotations

import json
import time

import numpy as np
import pyarrow as pa
import pytest

from rollouts.index import BrowseIndex, RolloutNotFound, frame_from_tables
from rollouts.layout import record_rel as record_path
from rollouts.leaderboard import leaderboard
from rollouts.query import Filters, filter_mask, options, page_of, sort_rows
from rollouts.schema import index_row
from rollouts.sources import INDEX_SCHEMA, Loaded
from rollouts.sources.local import LocalSource
from rollouts.store import RolloutStore
from testkit.records import make_record, make_records


def table_of(records: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([index_row(r, record_path(r)) for r in records], schema=INDEX_SCHEMA)


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return make_records(120, seed=21)


@pytest.fixture(scope="module")
def frame(records):
    return frame_from_tables({"local": table_of(records)})


def test_sources_merge_into_one_row_per_rollout(records):
    local, pushed_too, hub_only = records[:5], records[3:5], records[5:8]
    upstream = table_of(records[8:10]).to_pylist()
    for row in upstream:
        row.update(episode_id="up-" + row["episode_id"], source="upstream", started=None)
    frame = frame_from_tables({"local": table_of(local), "hub": table_of(pushed_too + hub_only),
                               "upstream": pa.Table.from_pylist(upstream, schema=INDEX_SCHEMA)})
    by_id = dict(zip(frame["episode_id"], frame["source"], strict=True))
    assert len(frame) == 10 and len(by_id) == 10
    assert [by_id[r["episode_id"]] for r in local] == ["local", "local", "local", "local+hub", "local+hub"]
    assert {by_id[r["episode_id"]] for r in hub_only} == {"hub"}
    assert list(frame["source"].iloc[-2:]) == ["upstream", "upstream"]  # no start time: listed last
    assert set(frame["played_in"].dropna()) <= {"space", "cli", "upstream"}
    assert frame["started"].iloc[:8].is_monotonic_decreasing


def test_an_empty_index_still_has_every_column():
    frame = frame_from_tables({})
    assert len(frame) == 0 and {"episode_id", "source", "reward", "date", "tokens"} <= set(frame.columns)
    assert Filters.parse(tiers="storm").tiers == ("storm",)
    assert filter_mask(frame, Filters.parse(models="x", date_from="2026-01-01")).shape == (0,)
    assert leaderboard(frame).empty


@pytest.mark.parametrize("filters, check", [
    (dict(models="baseline:greedy"), lambda r: r["model"] == "baseline:greedy"),
    (dict(tiers=["storm", "extreme"]), lambda r: r["task"]["difficulty"] in ("storm", "extreme")),
    (dict(quays="36A"), lambda r: r["task"]["quay"] == "36A"),
    (dict(reward_min=0.5, reward_max=0.99), lambda r: 0.5 <= r["reward"] <= 0.99),
    (dict(submitted="no"), lambda r: not r["final"]["submitted"]),
    (dict(feasible="yes"), lambda r: bool((r["final"].get("grade") or {}).get("feasible"))),
    (dict(date_from="2026-11-25", date_to="2026-11-26"), lambda r: "2026-11-25" <= r["started"][:10] <= "2026-11-26"),
    (dict(tasks="dock-24B-w06x1-standard-0,dock-36A-w17x1-standard-0"),
     lambda r: r["task_id"] in ("dock-24B-w06x1-standard-0", "dock-36A-w17x1-standard-0")),
])
def test_each_filter_keeps_exactly_the_matching_rollouts(frame, records, filters, check):
    kept = set(frame.loc[filter_mask(frame, Filters.parse(**filters)), "episode_id"])
    expected = {r["episode_id"] for r in records if check(r)}
    assert kept == expected and 0 < len(kept) < len(records)


def test_filters_combine_and_source_filter_matches_both_labels(records):
    frame = frame_from_tables({"local": table_of(records[:4]), "hub": table_of(records[2:6])})
    assert set(frame.loc[filter_mask(frame, Filters.parse(sources="hub")), "source"]) == {"hub", "local+hub"}
    assert set(frame.loc[filter_mask(frame, Filters.parse(sources=["local"])), "source"]) == {"local", "local+hub"}
    both = Filters.parse(sources="hub", submitted="yes")
    assert all(frame.loc[filter_mask(frame, both), "submitted"])


def test_bad_filter_values_are_named_and_left_out():
    filters = Filters.parse(reward_min="lots", date_from="29/11/2026", date_to="2026-02-30", tiers="storm,hurricane",
                            sources="ftp")
    assert filters.reward_min is None and filters.date_from is None and filters.date_to is None
    assert filters.tiers == ("storm",) and filters.sources == ()
    text = " | ".join(filters.problems)
    for word in ("'lots' is not a number", "'29/11/2026' is not a date", "'2026-02-30'", "hurricane", "ftp"):
        assert word in text
    backwards = Filters.parse(date_from="2026-11-30", date_to="2026-11-01")
    assert backwards.date_from is None and "after the to date" in backwards.problems[0]


def test_upstream_rows_without_a_date_drop_out_of_a_date_filter(records):
    upstream = table_of(records[:3]).to_pylist()
    for row in upstream:
        row.update(episode_id="up-" + row["episode_id"], started=None)
    frame = frame_from_tables({"upstream": pa.Table.from_pylist(upstream, schema=INDEX_SCHEMA)})
    assert filter_mask(frame, Filters()).sum() == 3
    assert filter_mask(frame, Filters.parse(date_from="2000-01-01")).sum() == 0


def test_sorting_and_paging(frame):
    by_reward = sort_rows(frame, "reward", descending=True)
    assert by_reward["reward"].is_monotonic_decreasing
    cheap = sort_rows(frame, "cost", descending=False)
    costs = cheap["cost"].to_numpy()
    known = costs[~np.isnan(costs)]
    assert (np.diff(known) >= 0).all() and np.isnan(costs[len(known):]).all()  # missing costs last
    by_model = sort_rows(frame, "model", descending=False)["model"].astype(str).tolist()
    assert by_model == sorted(by_model)
    with pytest.raises(ValueError, match="cannot sort by"):
        sort_rows(frame, "path")
    rows, page, pages = page_of(frame, 3, 50)
    assert (page, pages, len(rows)) == (3, 3, 20)
    assert page_of(frame, 99, 50)[1] == 3 and page_of(frame, -1, 50)[1] == 1
    assert list(page_of(frame, 2, 50)[0]["episode_id"]) == list(frame["episode_id"].iloc[50:100])


def test_options_list_what_the_rows_hold(frame, records):
    chosen = options(frame)
    assert chosen["models"] == sorted({r["model"] for r in records})
    assert chosen["quays"] == ["24B", "36A"]


# -- the index with its sources --------------------------------------------------------------------------------


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


def test_index_picks_up_a_new_local_rollout_cheaply(tmp_path):
    store = RolloutStore(tmp_path, writer_id="w1")
    for record in make_records(4, seed=3):
        store.save(record)
    index = BrowseIndex(LocalSource(tmp_path), local_every_s=0.0)
    assert len(index.frame) == 4
    version = index.version
    assert len(index.frame) == 4 and index.version == version  # nothing changed: nothing rebuilt
    store.save(make_record(seed=8, episode_id="just_played", started="2026-11-30T08:00:00Z"))
    assert index.frame["episode_id"].iloc[0] == "just_played" and index.version == version + 1


def test_record_finds_a_local_file_before_its_row_is_read(tmp_path):
    store = RolloutStore(tmp_path, writer_id="w1")
    index = BrowseIndex(LocalSource(tmp_path), local_every_s=3600)
    assert len(index.frame) == 0
    saved = make_record(seed=9, episode_id="brand_new", started="2026-11-30T08:00:00Z")
    store.save(saved)
    record, row = index.record("brand_new")
    assert record == saved and row["source"] == "local"


def test_unknown_and_malformed_ids_get_a_clear_message(tmp_path):
    index = BrowseIndex(LocalSource(tmp_path), [FakeRemote(None, error="cannot reach the Hub (ConnectError)")])
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
    index = BrowseIndex(LocalSource(tmp_path), [remote])
    start = time.monotonic()
    index.refresh(wait=0)
    assert len(index.frame) == 1 and index.loading and time.monotonic() - start < 0.9  # the Hub takes 1 s
    assert [s.loading for s in index.statuses()] == [False, True]
    # A deep link to a Hub rollout waits for the load in progress.
    record, row = index.record(records[2]["episode_id"], wait=5)
    assert record["from"] == "remote" and row["source"] == "hub"
    assert len(index.frame) == 4 and not index.loading and remote.loads == 1


def test_a_failing_remote_leaves_the_others_and_says_why(tmp_path, records):
    store = RolloutStore(tmp_path, writer_id="w1")
    store.save(records[0])
    index = BrowseIndex(LocalSource(tmp_path), [FakeRemote(None, error="no such dataset")])
    index.refresh(wait=5)
    status = {s.name: s for s in index.statuses()}
    assert status["local"].rows == 1 and status["hub"].error == "no such dataset"
    assert len(index.frame) == 1


def test_board_follows_the_filters_and_is_remembered(tmp_path, records):
    rows = [json.dumps(index_row(r, record_path(r))) for r in records]
    (tmp_path / "index" / "2026-11-29").mkdir(parents=True)
    (tmp_path / "index" / "2026-11-29" / "w1.jsonl").write_text("\n".join(rows) + "\n")
    index = BrowseIndex(LocalSource(tmp_path))
    storm = Filters.parse(tiers="storm")
    board = index.board(storm)
    expected = leaderboard([index_row(r, record_path(r)) for r in records if r["task"]["difficulty"] == "storm"])
    assert list(board["model"]) == list(expected["model"])
    assert np.allclose(board["mean_reward"], expected["mean_reward"])
    assert board["mean_standard"].isna().all() and board["mean_storm"].notna().all()
    assert index.board(storm) is board  # remembered until the rows change
    same = index.board(Filters(), same_tasks=True)
    assert same["n"].sum() <= len(records)


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
    frame = frame_from_tables({"local": table})
    filters = Filters.parse(models=["provider:model-3", "provider:model-7"], tiers="storm", reward_min=0.2,
                            feasible="yes", date_from="2026-11-05")
    kept = frame[filter_mask(frame, filters)]
    rows, page, _ = page_of(sort_rows(kept, "reward"), 2)
    assert page == 2 and len(rows) == 50 and rows["reward"].is_monotonic_decreasing
    assert set(rows["model"]) <= {"provider:model-3", "provider:model-7"} and (rows["reward"] >= 0.2).all()
    assert set(rows["difficulty"]) == {"storm"} and rows["feasible"].all()
    # Speed is measured by bench/browse_bench.py; what keeps it fast is columns, not Python objects per row.
    assert frame.memory_usage(deep=True).sum() < 60e6


def test_search_matches_id_prefixes_models_tasks_runs_and_every_word(frame, records):
    record = records[7]
    by_id = frame[filter_mask(frame, Filters.parse(search=record["episode_id"][:6]))]
    assert record["episode_id"] in set(by_id["episode_id"])
    assert all(e.startswith(record["episode_id"][:6]) for e in by_id["episode_id"])
    model_part = record["model"].split(":")[1][:8].upper()  # case does not matter
    hits = frame[filter_mask(frame, Filters.parse(search=model_part))]
    assert len(hits) and all(model_part.lower() in m.lower() or model_part.lower() in t.lower()
                             for m, t in zip(hits["model"], hits["task_id"], strict=True))
    both = frame[filter_mask(frame, Filters.parse(search=f"{record['task_id']} {model_part}"))]
    assert record["episode_id"] in set(both["episode_id"])
    assert set(both["task_id"]) == {record["task_id"]}  # every word must match
    assert not filter_mask(frame, Filters.parse(search="no-such-thing-anywhere")).any()


def test_search_finds_words_the_model_wrote_once_the_records_are_read(tmp_path):
    store = RolloutStore(tmp_path, writer_id="w1")
    quiet, chatty = make_records(2, seed=77)
    chatty["messages"].append({"role": "assistant", "content": "The gantry outage forces ship 7 later.",
                               "reasoning": "", "stop": "end_turn", "tool_calls": []})
    for record in (quiet, chatty):
        store.save(record)
    index = BrowseIndex(LocalSource(tmp_path))
    index.refresh_local(force=True)
    deadline = time.monotonic() + 10
    while len(index.transcripts) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    rows, total, _, _ = index.query(Filters.parse(search="gantr"))  # a word's prefix is enough
    assert total == 1 and list(rows["episode_id"]) == [chatty["episode_id"]]
    rows, total, _, _ = index.query(Filters.parse(search="GANTRY outage"))
    assert total == 1
