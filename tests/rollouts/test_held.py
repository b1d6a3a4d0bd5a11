"""Held rows (rollouts.index.held) read in small batches and followed as files grow, are cut, are replaced and go: after
every change the table holds exactly the rows the plain reader (rollouts.index.format.read_index_files) finds."""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rollouts.index import held as held_module
from rollouts.index.format import read_index_files
from rollouts.index.held import HeldRows
from testkit.index_rows import index_table


@pytest.fixture(autouse=True)
def small_batches(monkeypatch):
    monkeypatch.setattr(held_module, "BATCH_BYTES", 4_000)  # a few rows per batch: many batches per read
    monkeypatch.setattr(held_module, "INSERT_ROWS", 25)


def lines(rows: list[dict]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def assert_same(held: HeldRows, files: list[Path]) -> None:
    expected, skipped = read_index_files(files)
    got = held.con.sql(f"SELECT * EXCLUDE (grp, form, filename, line) FROM {held.name}").to_arrow_table()
    key = [("episode_id", "ascending")]
    assert held.rows == expected.num_rows == got.num_rows
    assert got.sort_by(key).to_pylist() == expected.sort_by(key).select(got.column_names).to_pylist()
    assert held.skipped == skipped


def test_held_rows_follow_their_files_through_every_change(tmp_path):
    rows = index_table(300, seed=5).to_pylist()
    day = tmp_path / "index" / "2026-11-30"
    day.mkdir(parents=True)
    a, b, c = day / "a.jsonl", day / "b.jsonl", day / "c.parquet"
    a.write_text(lines(rows[:60]) + "not json\n")
    b.write_text(lines(rows[50:120]))  # ten episodes in a too: a's rows count
    pq.write_table(pa.Table.from_pylist(rows[100:150], schema=index_table(1).schema), c)
    held = HeldRows(duckdb.connect(), "held_local", 0)
    files = [a, b, c]

    assert held.update(files)
    assert_same(held, files)
    assert not held.update(files)  # nothing changed: nothing read

    with a.open("a") as out:  # a few new episodes: inserted as they are
        out.write(lines(rows[150:160]))
    assert held.update(files)
    assert_same(held, files)

    with a.open("a") as out:  # a row of an episode held from b, which a goes before: a's row counts now
        out.write(lines([{**rows[70], "reward": 0.25}]))
    assert held.update(files)
    assert_same(held, files)

    with b.open("a") as out:  # more new rows than are inserted as they are, one an episode held already
        out.write(lines([*rows[160:200], {**rows[0], "reward": 0.0}]))
    assert held.update(files)
    assert_same(held, files)

    before = held.rows
    with b.open("a") as out:  # a line with no end yet is not read until it ends
        out.write(json.dumps(rows[200])[:40])
    assert not held.update(files) and held.rows == before
    with b.open("a") as out:
        out.write(json.dumps(rows[200])[40:] + "\n")
    assert held.update(files) and held.rows == before + 1
    assert_same(held, files)

    a.write_text(lines(rows[200:230]))  # cut and written again: its old rows go
    os.utime(a, ns=(1, 1))
    assert held.update(files)
    assert_same(held, files)

    files = [b, c]  # a is gone
    assert held.update(files)
    assert_same(held, files)

    held.drop()
    assert held.update(files)
    assert_same(held, files)
