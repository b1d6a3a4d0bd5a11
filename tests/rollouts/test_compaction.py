"""Compaction of the index into Parquet (rollouts.index.compaction): every reader sees each rollout once, before, during and
after a compaction, even one killed midway; the store's rewrites reach compacted rows."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rollouts import cli
from rollouts.archive import Archive
from rollouts.index.compaction import compact
from rollouts.schema import COLUMNS
from rollouts.store import RolloutStore
from testkit.records import make_records

ROOT = Path(__file__).resolve().parents[2]
UNREADABLE = b'{"episode_id": "half a row\n'


def jsonl_lines(root: Path) -> list[bytes]:
    return [line for f in sorted(root.glob("index/*/*.jsonl")) for line in f.read_bytes().splitlines()]


def parquet_ids(root: Path) -> list[str]:
    return [eid for f in sorted(root.glob("index/*/*.parquet")) for eid in pq.read_table(f)["episode_id"].to_pylist()]


def fill(root: Path, n: int, seed: int, writer_id: str = "w1", **overrides) -> tuple[RolloutStore, list[dict]]:
    store = RolloutStore(root, writer_id=writer_id)
    records = make_records(n, seed=seed, **overrides)
    for record in records:
        store.save(record)
    return store, records


def browsed(archive: Archive) -> list[str]:
    """The episode ids Browse lists: one per rollout, whatever file holds it."""
    ids = archive.engine.fetch().column("episode_id").to_pylist()
    assert len(ids) == len(set(ids))
    return ids


def test_compaction_moves_rows_to_parquet_and_every_reader_keeps_seeing_each_once(tmp_path, capsys):
    store, records = fill(tmp_path, 12, seed=1)
    days = {f.parent.name for f in tmp_path.glob("index/*/w1.jsonl")}
    # A line nobody can read, and a row of an older version (no `usd` column) that fill_index has yet to fill.
    old = make_records(1, seed=9)[0]
    store.save(old)
    records.append(old)
    ids = {r["episode_id"] for r in records}
    old_file = next(tmp_path.glob(f"index/{old['started'][:10]}/w1.jsonl"))
    lines = old_file.read_bytes().splitlines()
    legacy = {k: v for k, v in json.loads(lines[-1]).items() if k != "usd"}
    old_file.write_bytes(b"".join(line + b"\n" for line in lines[:-1]) + UNREADABLE + json.dumps(legacy).encode()
                         + b"\n")
    source = Archive.of_folder(tmp_path)
    assert set(browsed(source)) == ids

    assert cli.main(["compact", "--dir", str(tmp_path)]) == 0
    assert "folded 12 index row(s)" in capsys.readouterr().out
    assert sorted(parquet_ids(tmp_path)) == sorted(ids - {old["episode_id"]})
    assert {f.parent.name for f in tmp_path.glob("index/*/w1.parquet")} == days
    # What could not be folded stays where it was: the unreadable line and the legacy row.
    assert jsonl_lines(tmp_path) == [UNREADABLE.strip(), json.dumps(legacy).encode()]
    assert set(pq.read_table(next(tmp_path.glob("index/*/*.parquet"))).column_names) == set(COLUMNS)

    for rows in (store.rows(), RolloutStore(tmp_path, writer_id="w2").rows()):
        assert sorted(r["episode_id"] for r in rows) == sorted(ids)
    assert source.refresh_local(force=True) and sorted(browsed(source)) == sorted(ids)
    assert sorted(browsed(Archive.of_folder(tmp_path))) == sorted(ids)

    # The legacy row is filled in from its record, in the JSONL; the next compaction folds it without a double.
    assert store.fill_index() == 1
    more = make_records(3, seed=2)
    for record in more:
        store.save(record)
    assert compact(tmp_path).rows == 4
    assert sorted(parquet_ids(tmp_path)) == sorted(ids | {r["episode_id"] for r in more})
    assert jsonl_lines(tmp_path) == [UNREADABLE.strip()]
    source.refresh_local(force=True)
    assert len(browsed(source)) == 16 and len(store.rows()) == 16


def test_rows_already_in_parquet_are_updated_there(tmp_path):
    store, records = fill(tmp_path, 4, seed=3)
    compact(tmp_path)
    target = records[0]["episode_id"]
    regrade = {"grader_version": "2", "reward": 0.25, "grade": {"feasible": True}, "checks": []}
    assert store.annotate("regrade", {target: regrade}) == 1
    row = next(r for f in tmp_path.glob("index/*/*.parquet") for r in pq.read_table(f).to_pylist()
               if r["episode_id"] == target)
    assert row["regrade_reward"] == 0.25 and row["regrade_feasible"] is True
    assert sorted(parquet_ids(tmp_path)) == sorted(r["episode_id"] for r in records)
    fresh = RolloutStore(tmp_path, writer_id="w9")
    assert fresh.find(regrade_reward=0.25)[0]["episode_id"] == target
    assert fresh.load(target)["regrade"] == regrade


@pytest.mark.parametrize("stage", [".parquet", ".jsonl"])
def test_a_compaction_killed_midway_loses_and_doubles_nothing(tmp_path, stage):
    """The child stops just before it replaces the Parquet file (stage .parquet) or, with the Parquet in place,
    just before it replaces the JSONL with its remainder (stage .jsonl), and is killed there."""
    _, records = fill(tmp_path, 6, seed=4, started="2026-11-29T08:00:00Z")  # one JSONL file
    ids = sorted(r["episode_id"] for r in records)
    jsonl = next(tmp_path.glob("index/*/w1.jsonl"))
    with open(jsonl, "ab") as f:
        f.write(UNREADABLE)  # so the JSONL is replaced by its remainder, not removed
    before = jsonl.read_bytes()
    child = subprocess.Popen([sys.executable, "-c", f"""
import sys, time
sys.path.insert(0, {str(ROOT)!r})
from rollouts.index import compaction as c
real = c.atomic_write
def stalling(path, data):
    if path.suffix == {stage!r}:
        print("stopped", flush=True)
        time.sleep(60)
    real(path, data)
c.atomic_write = stalling
c.compact({str(tmp_path)!r})
"""], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "stopped", child.stderr.read()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)

    assert jsonl.read_bytes() == before  # the JSONL is never touched before the Parquet is in place
    assert sorted(parquet_ids(tmp_path)) == (ids if stage == ".jsonl" else [])
    assert sorted(r["episode_id"] for r in RolloutStore(tmp_path, writer_id="w2").rows()) == ids
    assert sorted(browsed(Archive.of_folder(tmp_path))) == ids

    # The next compaction finishes the job: each row once, in Parquet; the unreadable line kept.
    assert compact(tmp_path).files == 1
    assert sorted(parquet_ids(tmp_path)) == ids
    assert jsonl_lines(tmp_path) == [UNREADABLE.strip()]


def test_the_hub_source_reads_parquet_and_jsonl_index_files_once_per_episode(tmp_path):
    """A Hub snapshot taken between a compaction's two steps: the rows sit in both files; each is read once."""
    from huggingface_hub import HfApi

    from rollouts.sources.hub import HubSource
    from testkit.fakehub import running_fakehub

    _, records = fill(tmp_path / "folder", 5, seed=6, started="2026-11-29T08:00:00Z")
    folder = tmp_path / "folder"
    jsonl = next(folder.glob("index/*/w1.jsonl"))
    both = jsonl.read_bytes()
    compact(folder)
    more = make_records(2, seed=7, started="2026-11-29T09:00:00Z")
    store = RolloutStore(folder, writer_id="w1")
    for record in more:
        store.save(record)
    jsonl.write_bytes(both + jsonl.read_bytes())  # the folded rows again, then the new ones
    with running_fakehub() as hub:
        api = HfApi(endpoint=hub.url, token="hf_x")
        api.create_repo("a/r", repo_type="dataset")
        api.upload_folder(folder_path=str(folder), repo_id="a/r", repo_type="dataset", allow_patterns=["index/**"])
        loaded = HubSource("a/r", endpoint=hub.url, cache_dir=tmp_path / "cache").load()
    assert loaded.error is None, loaded.error
    assert sorted(loaded.table["episode_id"].to_pylist()) == sorted(r["episode_id"] for r in records + more)


def test_rows_are_not_folded_into_a_parquet_file_of_an_older_version_until_it_is_filled(tmp_path):
    store, records = fill(tmp_path, 3, seed=8, started="2026-11-29T08:00:00Z")
    compact(tmp_path)
    target = next(tmp_path.glob("index/*/w1.parquet"))
    pq.write_table(pq.read_table(target).drop_columns(["usd"]), target)  # as a version before `usd` wrote it
    newer = make_records(1, seed=9, started="2026-11-29T09:00:00Z")[0]
    store.save(newer)
    assert compact(tmp_path).rows == 0 and len(jsonl_lines(tmp_path)) == 1
    assert "usd" not in pq.read_table(target).column_names  # the missing cells stay missing, not null
    assert RolloutStore(tmp_path, writer_id="w2").fill_index() == 3
    assert "usd" in pq.read_table(target).column_names
    assert compact(tmp_path).rows == 1
    assert sorted(parquet_ids(tmp_path)) == sorted(r["episode_id"] for r in [*records, newer])


def test_an_annotation_racing_a_compaction_still_reaches_the_moved_row(tmp_path, monkeypatch):
    """The compaction lands between the store's look-up of the row (in the JSONL) and its rewrite."""
    from rollouts import store as store_module

    store, records = fill(tmp_path, 3, seed=10, started="2026-11-29T08:00:00Z")
    real = store_module.rewrite_lines

    def compacted_first(path, change):
        compact(tmp_path)
        return real(path, change)

    monkeypatch.setattr(store_module, "rewrite_lines", compacted_first)
    target = records[1]["episode_id"]
    regrade = {"grader_version": "2", "reward": 0.75, "grade": {"feasible": False}, "checks": []}
    assert store.annotate("regrade", {target: regrade}) == 1
    assert not list(tmp_path.glob("index/*/*.jsonl"))
    row = next(r for r in pq.read_table(next(tmp_path.glob("index/*/*.parquet"))).to_pylist()
               if r["episode_id"] == target)
    assert row["regrade_reward"] == 0.75 and row["regrade_feasible"] is False


def test_compaction_refuses_an_index_folder_linked_out_of_the_store(tmp_path):
    store, _ = fill(tmp_path / "store", 3, seed=11, started="2026-11-29T08:00:00Z")
    store.close()
    outside = tmp_path / "elsewhere"
    day = tmp_path / "store" / "index" / "2026-11-29"
    day.rename(outside)
    day.symlink_to(outside, target_is_directory=True)
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    assert compact(tmp_path / "store").files == 0
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before  # nothing out there rewritten or added
