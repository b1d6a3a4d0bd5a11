"""The store's ledger of its index files (rollouts.index.ledger): which episodes a folder holds and where, with the
Parquet files' ids kept as sorted bytes rather than a row per episode."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from rollouts.index.format import INDEX_SCHEMA
from rollouts.index.ledger import Ledger
from testkit.index_rows import index_table


def write_rows(path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows, schema=INDEX_SCHEMA), path)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def with_id(row: dict, episode_id: str, day: str = "2026-11-01", **cells) -> dict:
    return {**row, "episode_id": episode_id, "path": f"rollouts/{day}/{episode_id}.json", **cells}


def test_ids_of_every_length_are_found_in_the_file_whose_row_counts(tmp_path):
    base = index_table(1, seed=1).to_pylist()[0]
    ids = ["a", "abc", "B-9_x", "x" * 64, "000000000001", "00000000000"]  # a prefix of another id, too
    write_rows(tmp_path / "index/2026-11-01/w1.parquet", [with_id(base, i, run="first") for i in ids[:4]])
    write_rows(tmp_path / "index/2026-11-02/w1.parquet",
               [with_id(base, i, run="second") for i in ids[3:]] + [with_id(base, "abc", run="second")])
    write_rows(tmp_path / "index/2026-11-02/w1.jsonl", [with_id(base, "B-9_x", day="2026-11-02", run="jsonl"),
                                                        with_id(base, "fresh", run="jsonl")])
    index = Ledger(tmp_path)
    index.refresh()
    assert len(index) == 7
    assert set(ids) | {"fresh"} == {r["episode_id"] for r in index.rows()}
    assert index.row("abc")["run"] == "first"          # the first Parquet file wins over a later one
    assert index.row("x" * 64)["run"] == "first"
    assert index.row("B-9_x")["run"] == "jsonl"        # a JSONL row wins over Parquet
    assert index.path_of("B-9_x") == "rollouts/2026-11-02/B-9_x.json"
    assert index.file_of("00000000000") == tmp_path / "index/2026-11-02/w1.parquet"
    assert index.path_of("000000000001") == "rollouts/2026-11-01/000000000001.json"
    for missing in ("ab", "abcd", "x" * 65, "0000000000", "A", "a "):
        assert missing not in index and index.path_of(missing) is None and index.row(missing) is None
    index.add(with_id(base, "late"), tmp_path / "index/2026-11-02/w1.jsonl")
    # A JSONL row of an episode held in Parquet wins (the precedence rule), still one episode.
    index.add(with_id(base, "abc", run="again"), tmp_path / "index/2026-11-02/w1.jsonl")
    index.add(with_id(base, "late", run="twice"), tmp_path / "index/2026-11-02/w1.jsonl")  # already in JSONL
    assert len(index) == 8 and index.row("late")["run"] != "twice" and index.row("abc")["run"] == "again"


def test_a_planted_parquet_row_is_skipped_and_counted(tmp_path):
    base = index_table(1, seed=1).to_pylist()[0]
    planted = {**with_id(base, "planted"), "path": "../../etc/passwd"}
    write_rows(tmp_path / "index/2026-11-01/w1.parquet", [with_id(base, "good"), planted])
    index = Ledger(tmp_path)
    index.refresh()
    assert "good" in index and "planted" not in index and index.skipped == 1
    assert [r["episode_id"] for r in index.rows()] == ["good"]


def test_stale_rows_are_the_rows_of_files_that_lack_a_column(tmp_path):
    base = index_table(1, seed=1).to_pylist()[0]
    old = {k: v for k, v in with_id(base, "old").items() if k != "usd"}
    pq.write_table(pa.Table.from_pylist([old]), (tmp_path / "index/2026-11-01").mkdir(parents=True) or
                   tmp_path / "index/2026-11-01/w1.parquet")
    write_rows(tmp_path / "index/2026-11-02/w2.parquet", [with_id(base, "new")])
    write_rows(tmp_path / "index/2026-11-02/w2.jsonl", [old | {"episode_id": "old2", "path": "rollouts/2026-11-01/old2.json"}])
    index = Ledger(tmp_path)
    index.refresh()
    stale = index.stale_rows()
    assert {f.name: [r["episode_id"] for r in rows] for f, rows in stale.items()} == {
        "w1.parquet": ["old"], "w2.jsonl": ["old2"]}
