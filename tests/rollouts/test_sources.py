"""The index's readers (rollouts.index.format), a folder's rows held by the engine and read incrementally
(rollouts.index.held), and Browse's sources: the local folder's records, our Hub dataset and upstream's Parquet on
testkit/fakehub.py."""

from __future__ import annotations

import json
import time

import pyarrow.parquet as pq
import pytest

from rollouts.index.engine import IndexEngine
from rollouts.index.format import INDEX_SCHEMA, index_files, read_jsonl
from rollouts.schema import COLUMNS
from rollouts.sources import SourceError
from rollouts.sources.hub import HubSource
from rollouts.sources.local import LocalSource
from rollouts.sources.upstream import UpstreamSource, parquet_files, record_from_row, upstream_episode_id
from rollouts.store import RolloutStore
from testkit.fakehub import running_fakehub
from testkit.published import (
    UPSTREAM_CARD,
    UPSTREAM_FILE,
    folder_files,
    parquet_bytes,
    publish,
    upstream_table,
)
from testkit.records import make_record, make_records

TOKEN = "hf_test_secret_token"


@pytest.fixture(scope="module")
def hub():
    with running_fakehub(token=TOKEN) as server:
        yield server


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "hf-cache"


def ids(loaded) -> list[str]:
    return loaded.table.column("episode_id").to_pylist()


class Folder:
    """A rollout folder's index rows as the engine holds them, looked at again on each `look()`."""

    def __init__(self, root):
        self.root, self.engine = root, IndexEngine()

    def look(self) -> bool:
        return self.engine.set_files("local", index_files(self.root))

    def ids(self) -> list[str]:
        return self.engine.fetch(order="episode_id").column("episode_id").to_pylist()


def parse_index_lines(data: bytes):
    return read_jsonl(data)[0]


# -- index lines -----------------------------------------------------------------------------------------------


def test_index_lines_keep_every_readable_row_of_a_damaged_file():
    good = [{"episode_id": f"ep{i}", "model": "m", "reward": 0.5, "path": f"rollouts/2026-11-29/ep{i}.json"}
            for i in range(3)]
    lines = [json.dumps(good[0]), "{not json", json.dumps({**good[1], "reward": "high"}),
             json.dumps({"episode_id": "../../etc/passwd"}), json.dumps(good[2]), '{"episode_id": "torn']
    table = parse_index_lines("\n".join(lines).encode())
    assert table.schema == INDEX_SCHEMA
    assert table.column("episode_id").to_pylist() == ["ep0", "ep1", "ep2"]
    assert table.column("reward").to_pylist() == [0.5, None, 0.5]  # a wrong type becomes null, not an error


def test_index_lines_fast_path_reads_columns_with_their_types():
    rows = [{**{k: None for k in COLUMNS}, "episode_id": "a1", "started": "2026-11-29T10:15:00Z", "reward": 1,
             "turns": 3, "submitted": True, "extra_column": [1, 2], "path": "rollouts/2026-11-29/a1.json"}]
    table = parse_index_lines(("\n".join(json.dumps(r) for r in rows) + "\n").encode())
    row = table.to_pylist()[0]
    assert row["started"] == "2026-11-29T10:15:00Z"  # a string, not a timestamp guessed by Arrow
    assert row["reward"] == 1.0 and row["turns"] == 3 and row["submitted"] is True
    assert "extra_column" not in table.column_names


# -- the local folder ------------------------------------------------------------------------------------------


def test_held_rows_read_only_what_changed(tmp_path, monkeypatch):
    store = RolloutStore(tmp_path, writer_id="w1")
    for record in make_records(5, seed=1):
        store.save(record)
    folder = Folder(tmp_path)
    assert folder.look() and len(folder.ids()) == 5
    assert not folder.look()  # nothing read, nothing rebuilt

    from rollouts.index import held
    remakes = []
    real = held.HeldRows._remake
    monkeypatch.setattr(held.HeldRows, "_remake", lambda self: (remakes.append(1), real(self)))
    store.save(make_record(seed=99, episode_id="fresh_one", started="2026-11-29T12:00:00Z"))
    assert folder.look() and len(folder.ids()) == 6 and "fresh_one" in folder.ids()
    assert remakes == []  # a new line of a new episode goes in as it is, the rest untouched


def test_held_rows_wait_for_a_line_still_being_written(tmp_path):
    index = tmp_path / "index" / "2026-11-29"
    index.mkdir(parents=True)
    row = {"episode_id": "half", "model": "m", "path": "rollouts/2026-11-29/half.json"}
    line = json.dumps(row).encode()
    (index / "w9.jsonl").write_bytes(line[:20])
    folder = Folder(tmp_path)
    folder.look()
    assert folder.ids() == []
    with open(index / "w9.jsonl", "ab") as f:
        f.write(line[20:] + b"\n")
    assert folder.look() and folder.ids() == ["half"]


def test_held_rows_reread_a_replaced_file_and_forget_a_removed_one(tmp_path):
    index = tmp_path / "index" / "2026-11-29"
    index.mkdir(parents=True)
    file = index / "w1.jsonl"
    file.write_text(row_line("a") + row_line("b"))
    folder = Folder(tmp_path)
    folder.look()
    assert folder.ids() == ["a", "b"]
    replacement = index / "tmp.jsonl.new"
    replacement.write_text(row_line("c"))
    replacement.replace(file)  # a new inode, shorter: read again from the start
    folder.look()
    assert folder.ids() == ["c"]
    file.unlink()
    folder.look()
    assert folder.ids() == []


def row_line(episode_id: str, path: str | None = None) -> str:
    return json.dumps({"episode_id": episode_id, "path": f"rollouts/2026-11-29/{episode_id}.json" if path is None else path}) + "\n"


@pytest.mark.parametrize("path", ["../outside/secret.json", "/etc/passwd", "rollouts/2026-11-29/other.json",
                                  "rollouts/2026-11-29/../../x.json", "rollouts/latest/planted.json", ""])
def test_an_index_row_that_points_outside_the_layout_is_skipped_and_counted(tmp_path, path):
    (tmp_path / "secret.json").write_text('{"secret": true}')
    index = tmp_path / "store" / "index" / "2026-11-29"
    index.mkdir(parents=True)
    (index / "w1.jsonl").write_text(row_line("good") + row_line("planted", path) + "{torn\n")
    folder = Folder(tmp_path / "store")
    folder.look()
    assert folder.ids() == ["good"] and folder.engine.skipped["local"] == 2
    with pytest.raises(SourceError, match="missing"):
        LocalSource(tmp_path / "store").record({"episode_id": "planted", "path": path})


def test_a_missing_folder_is_empty_not_an_error(tmp_path):
    folder = Folder(tmp_path / "never-created")
    folder.look()
    assert folder.ids() == [] and LocalSource(tmp_path / "never-created").locate("abc") is None


def test_local_record_never_leaves_the_rollouts_folder(tmp_path):
    store = RolloutStore(tmp_path / "store", writer_id="w1")
    record = make_record(seed=5, episode_id="safe_one", started="2026-11-29T10:00:00Z")
    store.save(record)
    (tmp_path / "secret.json").write_text('{"secret": true}')
    source = LocalSource(tmp_path / "store")
    # A forged path in an index row is ignored: the file is found by its id under rollouts/ only.
    assert source.record({"episode_id": "safe_one", "path": "../secret.json"}) == record
    with pytest.raises(SourceError, match="malformed"):
        source.record({"episode_id": "../secret", "path": "../secret.json"})
    with pytest.raises(SourceError, match="missing"):
        source.record({"episode_id": "secret", "path": "../secret.json"})


# -- the Hub dataset -------------------------------------------------------------------------------------------


def test_hub_source_lists_downloads_and_then_only_what_changed(hub, tmp_path, cache):
    store = RolloutStore(tmp_path / "a", writer_id="w1")
    for record in make_records(6, seed=2):
        store.save(record)
    publish(hub.url, "team/rollouts-a", folder_files(tmp_path / "a"), token=TOKEN)
    source = HubSource("team/rollouts-a", endpoint=hub.url, cache_dir=cache)
    loaded = source.load()
    assert loaded.error is None and loaded.rows == 6
    assert set(ids(loaded)) == {r["episode_id"] for r in store.rows()}

    before = len(hub.requests)
    same = source.load()
    assert not same.changed and same.rows == 6
    assert [r[2] for r in hub.requests[before:]] == ["info"]  # one probe, no listing, no download

    other = RolloutStore(tmp_path / "a", writer_id="w2")  # a second writer: one new index file
    other.save(make_record(seed=50, episode_id="second_writer", started="2026-11-29T09:00:00Z"))
    publish(hub.url, "team/rollouts-a", folder_files(tmp_path / "a"), token=TOKEN)
    before = len(hub.requests)
    grown = source.load()
    assert grown.changed and grown.rows == 7
    downloads = {r[1] for r in hub.requests[before:] if r[2] == "resolve"}
    assert downloads == {"HEAD", "GET"}
    assert sum(r[2] == "resolve" and r[1] == "GET" for r in hub.requests[before:]) == 1  # only the new file

    row = next(r for r in grown.table.to_pylist() if r["episode_id"] == "second_writer")
    assert source.record(row)["episode_id"] == "second_writer"


def test_hub_source_record_path_cannot_be_forged(hub, tmp_path, cache):
    store = RolloutStore(tmp_path / "b", writer_id="w1")
    record = make_record(seed=7, episode_id="real_one", started="2026-11-28T08:00:00Z")
    store.save(record)
    publish(hub.url, "team/rollouts-b", folder_files(tmp_path / "b"), token=TOKEN)
    source = HubSource("team/rollouts-b", endpoint=hub.url, cache_dir=cache)
    source.load()
    # The forged path is replaced by the one the id and start date name.
    assert source.record({"episode_id": "real_one", "path": "README.md",
                          "started": "2026-11-28T08:00:00Z"}) == record
    with pytest.raises(SourceError, match="does not say where"):
        source.record({"episode_id": "real_one", "path": "../../x"})
    with pytest.raises(SourceError, match="file not found"):
        source.record({"episode_id": "nobody", "started": "2026-11-28T00:00:00Z"})


def test_hub_down_is_a_quick_clear_message_and_keeps_the_last_rows(tmp_path, cache):
    with running_fakehub(token=TOKEN) as own:
        store = RolloutStore(tmp_path / "c", writer_id="w1")
        for record in make_records(3, seed=4):
            store.save(record)
        publish(own.url, "team/rollouts-c", folder_files(tmp_path / "c"), token=TOKEN)
        source = HubSource("team/rollouts-c", endpoint=own.url, cache_dir=cache)
        assert source.load().rows == 3
        never = HubSource("team/rollouts-c", endpoint=own.url, cache_dir=cache)
        own.down()
        start = time.monotonic()
        kept, fresh = source.load(), never.load()
        assert time.monotonic() - start < 5  # no retry loop
        assert "cannot reach the Hub" in kept.error and kept.rows == 3 and "last successful" in kept.note
        assert "cannot reach the Hub" in fresh.error and fresh.table is None
        own.up()
        assert never.load().rows == 3


def test_hub_errors_name_the_cause_not_the_token(hub, cache):
    missing = HubSource("team/does-not-exist", endpoint=hub.url, token=TOKEN, cache_dir=cache).load()
    assert "no such dataset" in missing.error and TOKEN not in missing.error
    hub.fail("info", status=500)
    broken = HubSource("team/whatever", endpoint=hub.url, token=TOKEN, cache_dir=cache).load()
    assert "HTTP 500" in broken.error and TOKEN not in broken.error


def test_offline_mode_reads_nothing_from_the_hub(hub, monkeypatch, cache):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    before = len(hub.requests)
    loaded = HubSource("team/rollouts-a", endpoint=hub.url, cache_dir=cache).load()
    assert "offline" in loaded.error and loaded.table is None
    assert len(hub.requests) == before


# -- upstream's Parquet ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def upstream_records():
    return make_records(10, seed=11)


@pytest.fixture(scope="module")
def published_upstream(hub, upstream_records):
    files = {"README.md": UPSTREAM_CARD.encode(), UPSTREAM_FILE: parquet_bytes(upstream_table(upstream_records)),
             "tasks/tasks.parquet": b"not read"}
    publish(hub.url, "FineEnvs/PortSimEnv", files, token=TOKEN)
    return "FineEnvs/PortSimEnv"


def test_upstream_rows_become_index_rows_with_stable_ids(hub, published_upstream, upstream_records, cache):
    source = UpstreamSource(published_upstream, endpoint=hub.url, cache_dir=cache)
    loaded = source.load()
    assert loaded.error is None and loaded.rows == 10 and loaded.table.schema == INDEX_SCHEMA
    rows = loaded.table.to_pylist()
    assert [r["model"] for r in rows] == [r["model"] for r in upstream_records]
    assert [r["reward"] for r in rows] == [r["reward"] for r in upstream_records]
    assert all(r["episode_id"].startswith("up-") and r["source"] == "upstream" for r in rows)
    assert len({r["episode_id"] for r in rows}) == 10
    again = UpstreamSource(published_upstream, endpoint=hub.url, cache_dir=cache).load()
    assert ids(again) == ids(loaded)  # the same ids on every load


def test_an_upstream_row_opens_as_our_record(hub, published_upstream, upstream_records, cache):
    source = UpstreamSource(published_upstream, endpoint=hub.url, cache_dir=cache)
    rows = source.load().table.to_pylist()
    for number in (0, 5, 9):  # in different row groups of the file
        record = source.record(rows[number])
        original = upstream_records[number]
        assert record["episode_id"] == rows[number]["episode_id"]
        assert record["messages"] == original["messages"] and record["steps"] == original["steps"]
        assert record["final"]["grade"] == original["final"]["grade"]
        assert record["final"]["plan"] == original["final"]["plan"]
        assert record["task"]["difficulty"] == original["task"]["difficulty"]
        assert record["usage"] == original["usage"] and record["source"] == "upstream"


def test_upstream_offline_uses_the_cached_copy(hub, published_upstream, monkeypatch, cache):
    UpstreamSource(published_upstream, endpoint=hub.url, cache_dir=cache).load()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    before = len(hub.requests)
    loaded = UpstreamSource(published_upstream, endpoint=hub.url, cache_dir=cache).load()
    assert loaded.rows == 10 and "cached copy" in loaded.note
    assert len(hub.requests) == before
    empty = UpstreamSource(published_upstream, endpoint=hub.url, cache_dir=cache.parent / "empty-cache").load()
    assert "offline" in empty.error and "no cached copy" in empty.error


def test_upstream_without_the_config_says_so(hub, cache):
    publish(hub.url, "someone/other", {"README.md": b"# no configs\n", "data/x.parquet": b"x"}, token=TOKEN)
    loaded = UpstreamSource("someone/other", endpoint=hub.url, cache_dir=cache).load()
    assert loaded.error == "no Parquet file for config `rollouts`"


def test_parquet_files_follow_the_card_or_the_folder_name():
    listed = ["README.md", "rollouts/a.parquet", "rollouts/b.parquet", "tasks/t.parquet", "x/rollouts.txt"]
    assert parquet_files(UPSTREAM_CARD, "rollouts", [*listed, UPSTREAM_FILE]) == [UPSTREAM_FILE]
    glob_card = "---\nconfigs:\n- config_name: rollouts\n  data_files: rollouts/*.parquet\n---\n"
    assert parquet_files(glob_card, "rollouts", listed) == ["rollouts/a.parquet", "rollouts/b.parquet"]
    assert parquet_files("", "rollouts", listed) == ["rollouts/a.parquet", "rollouts/b.parquet"]


def test_record_from_row_survives_bad_json_and_says_so(tmp_path, upstream_records):
    table = upstream_table(upstream_records[:1])
    row = table.to_pylist()[0] | {"messages": "[{broken", "steps": None}
    record = record_from_row(row, episode_id=upstream_episode_id("r", "m", "t"))
    assert record["messages"] == [] and record["steps"] == []
    assert any("messages" in e and "not valid JSON" in e for e in record["errors"])
    pq.write_table(table, tmp_path / "t.parquet")  # the helper's table is a valid Parquet file
    assert pq.read_table(tmp_path / "t.parquet").num_rows == 1


def test_upstream_ids_are_distinct_for_repeats():
    assert upstream_episode_id("r", "m", "t", 0) != upstream_episode_id("r", "m", "t", 1)
    assert upstream_episode_id("r", "m", "t") == upstream_episode_id("r", "m", "t")
