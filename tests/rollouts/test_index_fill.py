"""Index rows written before the convergence and price columns existed get them from their records, in place:
no row lost, none doubled, every value they had kept, and appends running meanwhile never lost."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from rollouts.archive import Archive
from rollouts.jsonio import append_line, json_line, rewrite_lines
from rollouts.schema import COLUMNS, index_row
from rollouts.sources.local import LocalSource
from rollouts.store import RolloutStore
from testkit.hand_records import NEW, age, feasible, hand_record, infeasible
from testkit.records import make_records

ROOT = Path(__file__).resolve().parents[2]
DAY = "2026-11-25"
# A rewrite swaps the file, so an append that waited for the lock finds a stale file and tries again: a rewriter
# that never pauses starves appends for tens of seconds. Rewrites are rare in the product; a short pause keeps
# them overlapping appends without starving them.
REWRITE_PAUSE_S = 0.002


def records() -> list[dict]:
    hand = [hand_record(f"hand-{i}", checks=[(1, infeasible()), (2, feasible(300 + i))], submit=(3, True, 280),
                        started=f"{DAY}T0{i}:00:00Z") for i in range(4)]
    made = make_records(6, seed=4, started=f"{DAY}T12:00:00Z")
    return hand + made


def test_older_rows_are_filled_in_from_their_records(tmp_path):
    saved = records()
    with RolloutStore(tmp_path, writer_id="w1") as store:
        for record in saved:
            store.save(record)
    by_id = {r["episode_id"]: r for r in saved}

    def mutate(row):  # a value the old row had and a column from some later version: both must survive
        return {**row, "reward": 0.123456, "future_column": "kept"} if row["episode_id"] == "hand-2" else row

    old_rows = age(tmp_path, mutate=mutate)
    file = tmp_path / "index" / DAY / "w1.jsonl"
    browse = Archive(LocalSource(tmp_path))  # Browse, reading the folder before and after the fill
    browse.refresh_local(force=True)
    assert browse.engine.fetch().column("checks_to_feasible").null_count == len(saved)
    with RolloutStore(tmp_path, writer_id="w2") as store:
        assert all(not set(NEW) & set(row) for row in store.rows())
        assert store.fill_index() == len(saved)
        rows = store.rows()
        assert store.fill_index() == 0  # nothing left to fill
    lines = [json.loads(line) for line in file.read_bytes().splitlines()]
    assert [r["episode_id"] for r in lines] == [r["episode_id"] for r in old_rows]  # same rows, same order
    assert len(rows) == len(saved) == len({r["episode_id"] for r in rows})
    for row, old in zip(lines, old_rows, strict=True):
        fresh = index_row(by_id[row["episode_id"]], row["path"])
        assert {k: row[k] for k in NEW} == {k: fresh[k] for k in NEW}
        assert {k: row[k] for k in old} == old  # nothing the row had was changed
        assert list(row)[: len(COLUMNS)] == list(COLUMNS)
    hand2 = next(r for r in lines if r["episode_id"] == "hand-2")
    assert hand2["reward"] == 0.123456 and hand2["future_column"] == "kept" and hand2["checks_to_feasible"] == 2
    # Browse's reader sees the filled-in values, once each.
    assert browse.refresh_local(force=True)
    table = browse.engine.fetch()
    assert table.num_rows == len(saved)
    assert table.column("checks_to_feasible").null_count < table.num_rows
    assert dict(zip(table.column("episode_id").to_pylist(), table.column("best_check_cost").to_pylist(),
                    strict=True))["hand-3"] == 303


def test_a_row_whose_record_is_missing_stays_as_it_was(tmp_path):
    saved = records()[:4]
    with RolloutStore(tmp_path, writer_id="w1") as store:
        for record in saved:
            store.save(record)
    age(tmp_path)
    (tmp_path / "rollouts" / DAY / "hand-1.json").unlink()
    with RolloutStore(tmp_path, writer_id="w2") as store:
        assert store.fill_index() == 3
        rows = {r["episode_id"]: r for r in store.rows()}
    assert "checks_to_feasible" not in rows["hand-1"] and rows["hand-0"]["checks_to_feasible"] == 2
    assert len(rows) == 4


def test_a_store_that_keeps_appending_sees_the_swapped_file(tmp_path):
    saved = records()
    writer = RolloutStore(tmp_path, writer_id="w1")
    for record in saved[:5]:
        writer.save(record)
    age(tmp_path)
    assert "usd" not in writer.rows()[0]
    with RolloutStore(tmp_path, writer_id="w2") as other:
        assert other.fill_index() == 5
    for record in saved[5:]:
        writer.save(record)  # appends to the file the other store swapped
    rows = writer.rows()
    assert [r["episode_id"] for r in rows] == [r["episode_id"] for r in saved]
    assert all(set(NEW) <= set(row) for row in rows)
    lines = (tmp_path / "index" / DAY / "w1.jsonl").read_bytes().splitlines()
    assert len(lines) == len(saved)
    writer.close()


def test_rewrites_never_lose_lines_appended_meanwhile(tmp_path):
    file = tmp_path / "index" / DAY / "w1.jsonl"
    for i in range(50):
        append_line(file, json_line({"episode_id": f"old{i}", "n": 0}))
    done = threading.Event()

    def append() -> None:
        for i in range(100):
            append_line(file, json_line({"episode_id": f"new{i}", "n": 0}))
        done.set()

    thread = threading.Thread(target=append)
    thread.start()
    rewrites = 0
    while not done.is_set() or rewrites < 10:
        rewrites += bool(rewrite_lines(file, lambda row: {**row, "n": row["n"] + 1}))
        time.sleep(REWRITE_PAUSE_S)
    thread.join()
    ids = [json.loads(line)["episode_id"] for line in file.read_bytes().splitlines()]
    assert sorted(ids) == sorted([f"old{i}" for i in range(50)] + [f"new{i}" for i in range(100)])
    assert rewrites >= 10


def test_rewrites_in_one_process_never_lose_saves_of_another(tmp_path):
    """A writer process saves rollouts into its index file while this one keeps rewriting that file."""
    with RolloutStore(tmp_path, writer_id="w1") as store:
        store.save(records()[0])
    file = tmp_path / "index" / DAY / "w1.jsonl"
    child = subprocess.Popen([sys.executable, "-c", f"""
import sys; sys.path[:0] = [{str(ROOT)!r}]
from rollouts.store import RolloutStore
from testkit.records import make_records
with RolloutStore({str(tmp_path)!r}, writer_id="w1") as store:
    for record in make_records(40, seed=9, started="{DAY}T13:00:00Z"):
        store.save(record)
"""], stderr=subprocess.PIPE, text=True)
    rewrites = 0
    while child.poll() is None:
        rewrites += bool(rewrite_lines(file, lambda row: {**row, "touched": row.get("touched", 0) + 1}))
        time.sleep(REWRITE_PAUSE_S)
    assert child.returncode == 0, child.stderr.read()
    lines = [json.loads(line) for line in file.read_bytes().splitlines()]
    assert len(lines) == 41 == len({row["episode_id"] for row in lines})
    assert rewrites > 0
