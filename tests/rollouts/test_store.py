"""The local rollout store: layout, atomic writes under SIGKILL, concurrent writers, repairs, datasets round trip."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import datasets
import pytest

from rollouts import store as store_module
from rollouts.jsonio import atomic_write
from rollouts.schema import COLUMNS, RecordError
from rollouts.store import RolloutStore, default_writer_id
from testkit.records import make_record, make_records

ROOT = Path(__file__).resolve().parents[2]
TESTS = Path(__file__).resolve().parents[1]


def index_lines(root: Path) -> list[bytes]:
    return [line for f in sorted(root.glob("index/*/*.jsonl")) for line in f.read_bytes().splitlines(keepends=True)]


def same(a, b) -> bool:
    """Equal, floats to 1e-12: datasets decodes `json` features with pandas' ujson, which can be 1 ulp off."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b and type(a) is type(b)


def run_child(code: str, **kwargs) -> subprocess.Popen:
    prelude = f"import sys; sys.path[:0] = [{str(ROOT)!r}, {str(TESTS)!r}]\n"
    return subprocess.Popen([sys.executable, "-c", prelude + code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kwargs)


def test_save_writes_the_record_whole_then_its_row(tmp_path):
    store = RolloutStore(tmp_path, writer_id="w1")
    record = make_record(seed=1, started="2026-11-29T10:15:00Z", episode_id="ep_one")
    saved = store.save(record)

    assert saved.episode_id == "ep_one"
    assert saved.path == tmp_path / "rollouts" / "2026-11-29" / "ep_one.json"
    text = saved.path.read_text(encoding="utf-8")
    assert json.loads(text) == record
    assert text.count("\n") == 0  # one line: what datasets' Json features need (see rollouts.card)
    assert "Los barcos de más" in text or "\\u" not in text  # non-ASCII kept as is

    [line] = (tmp_path / "index" / "2026-11-29" / "w1.jsonl").read_bytes().splitlines()
    row = json.loads(line)
    assert list(row) == list(COLUMNS)
    assert row["episode_id"] == "ep_one" and row["path"] == "rollouts/2026-11-29/ep_one.json"
    assert row["reward"] == record["reward"] and row["model"] == record["model"]
    assert row["checks"] == sum(step["tool"] == "check_plan" for step in record["steps"])
    assert (tmp_path / "README.md").is_file()


def test_the_date_folder_is_the_utc_date_of_started(tmp_path):
    store = RolloutStore(tmp_path)
    saved = store.save(make_record(seed=2, episode_id="late", started="2026-11-29T23:30:00-02:00"))
    assert saved.path.parent.name == "2026-11-30"
    assert store.rows()[0]["path"] == "rollouts/2026-11-30/late.json"


@pytest.mark.parametrize("bad", ["../escape", "a/b", "", "x" * 65, "dot.dot", None, 42, "ep id", "ep\n", "ep\x00"])
def test_an_episode_id_that_could_name_a_path_is_refused(tmp_path, bad):
    store = RolloutStore(tmp_path)
    record = make_record(seed=3)
    record["episode_id"] = bad
    with pytest.raises(ValueError, match="episode_id"):
        store.save(record)
    assert not list(tmp_path.glob("rollouts/**/*.json")) and not index_lines(tmp_path)
    assert store.load(bad) is None and not store.has(bad)
    [kept] = set_aside(tmp_path)  # refused, but not lost
    assert "episode_id" in kept.with_name(kept.name.replace(".json", ".why.txt")).read_text()


def set_aside(root) -> list:
    return sorted((root / ".set-aside").glob("*.json"))


def test_bad_records_get_clear_errors_naming_the_field_and_are_set_aside(tmp_path):
    store = RolloutStore(tmp_path)
    undated = make_record(seed=4)
    del undated["started"]
    with pytest.raises(RecordError, match=r"^rollout not saved: started: Field required"):
        store.save(undated)
    with pytest.raises(RecordError, match=r"started: .*ISO 8601"):
        store.save(make_record(seed=4, started="yesterday"))
    with pytest.raises(RecordError, match=r"usage.input_tokens: Input should be a valid integer"):
        store.save(make_record(seed=4, usage={"input_tokens": {1, 2}, "output_tokens": 0}))
    with pytest.raises(RecordError, match=r"final.submitted"):
        store.save(make_record(seed=4, final={"submitted": "yes", "plan": None, "grade": None}))
    with pytest.raises(RecordError, match=r"JSON object, not list"):
        store.save(["not", "a", "record"])
    assert not list(tmp_path.glob("rollouts/*/*")) and not index_lines(tmp_path)
    kept = set_aside(tmp_path)
    assert len(kept) == 5
    reasons = sorted(p.with_name(p.name.replace(".json", ".why.txt")).read_text() for p in kept)
    assert any("final.submitted" in r for r in reasons) and any("started" in r for r in reasons)


def test_a_damaged_record_file_gets_a_clear_error_and_stays_as_it_is(tmp_path):
    store = RolloutStore(tmp_path)
    saved = store.save(make_record(seed=9, episode_id="torn"))
    data = saved.path.read_bytes()
    saved.path.write_bytes(data[: len(data) // 2])
    with pytest.raises(RecordError, match="record of torn cannot be read"):
        store.load("torn")
    assert saved.path.read_bytes() == data[: len(data) // 2]
    saved.path.write_text(json.dumps({**json.loads(data), "turns": "three"}))
    with pytest.raises(RecordError, match="breaks the schema: turns"):
        store.load("torn")


def test_non_finite_numbers_become_null_instead_of_losing_the_rollout(tmp_path):
    store = RolloutStore(tmp_path)
    store.save(make_record(seed=5, episode_id="nan", seconds=float("nan"), reward=float("inf")))
    loaded = store.load("nan")
    assert loaded["seconds"] is None and loaded["reward"] is None
    assert store.rows()[0]["seconds"] is None


def test_saving_again_is_a_no_op_and_a_different_record_under_the_same_id_is_refused(tmp_path):
    store = RolloutStore(tmp_path)
    record = make_record(seed=6, episode_id="twice")
    first = store.save(record)
    assert store.save(json.loads(json.dumps(record))) == first
    with pytest.raises(ValueError, match="already saved"):
        store.save({**record, "reward": 0.5})
    with pytest.raises(ValueError, match="already saved"):
        store.save({**record, "started": "2026-01-01T00:00:00Z"})  # another date folder, same id
    assert len(store.rows()) == 1 and len(index_lines(tmp_path)) == 1
    assert store.load("twice") == record


def test_saving_a_record_whose_row_was_lost_adds_the_row(tmp_path):
    store = RolloutStore(tmp_path)
    record = make_record(seed=21, episode_id="rowless", started="2026-11-29T05:00:00Z")
    data = json.dumps(record, ensure_ascii=False).encode()
    atomic_write(tmp_path / "rollouts" / "2026-11-29" / "rowless.json", data)
    assert store.rows() == [] and store.has("rowless")  # on disk, not indexed
    store.save(record)
    assert [r["episode_id"] for r in store.rows()] == ["rowless"] and len(index_lines(tmp_path)) == 1


@pytest.mark.parametrize("bad", ["../w", "w/1", "", "w\n"])
def test_a_writer_id_that_could_name_a_path_is_refused(tmp_path, bad):
    with pytest.raises(ValueError, match="writer_id"):
        RolloutStore(tmp_path, writer_id=bad)


def test_load_has_find_and_status_offline(tmp_path):
    store = RolloutStore(tmp_path)
    records = make_records(12, seed=7)
    for record in records:
        store.save(record)
    assert store.load(records[5]["episode_id"]) == records[5]
    assert store.has(records[0]["episode_id"]) and not store.has("absent") and store.load("absent") is None
    run_a = [r for r in records if r["run"] == "run-a"]
    assert {r["episode_id"] for r in store.find(run="run-a")} == {r["episode_id"] for r in run_a}
    interactive = store.find(run=None)
    assert interactive and all(r["run"] is None for r in interactive)
    one = records[3]
    assert [r["episode_id"] for r in store.find(run=one["run"], model=one["model"], task_id=one["task_id"])] == \
        [one["episode_id"]]
    with pytest.raises(ValueError, match="unknown index column"):
        store.find(colour="red")
    assert store.status() == {"saved": 12, "waiting": 0, "last_push": None, "last_error": None, "dataset": None}
    assert store.flush(timeout=1) is True
    store.close()


def test_a_dataset_without_a_token_stays_local_and_says_so(tmp_path, monkeypatch):
    from huggingface_hub import constants

    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    store = RolloutStore(tmp_path / "rollouts", dataset="someone/rollouts")
    store.save(make_record(seed=8))
    status = store.status()
    assert status["dataset"] is None and status["waiting"] == 0 and status["saved"] == 1
    assert "no Hugging Face token" in status["last_error"]
    assert store.flush(timeout=1) is True
    assert (tmp_path / "rollouts" / "README.md").is_file()
    assert not (tmp_path / "rollouts" / ".push" / "pushed.jsonl").exists()


def test_each_writer_has_its_own_index_file_and_every_store_reads_them_all(tmp_path):
    first = RolloutStore(tmp_path, writer_id="alpha")
    second = RolloutStore(tmp_path, writer_id="beta")
    a = make_record(seed=9, started="2026-11-29T01:00:00Z")
    b = make_record(seed=10, started="2026-11-29T02:00:00Z")
    first.save(a)
    second.save(b)
    assert sorted(p.name for p in tmp_path.glob("index/2026-11-29/*")) == ["alpha.jsonl", "beta.jsonl"]
    assert {r["episode_id"] for r in first.rows()} == {a["episode_id"], b["episode_id"]}
    assert first.load(b["episode_id"]) == b  # found although another writer indexed it after `first` opened


def test_default_writer_id_is_stable_per_process_and_differs_in_a_child(tmp_path):
    assert default_writer_id() == default_writer_id()
    child = run_child("from rollouts.store import default_writer_id; print(default_writer_id())")
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert out.strip() != default_writer_id() and len(out.strip()) == 8


def test_a_kill_during_a_big_write_leaves_no_partial_record(tmp_path):
    """The natural race: SIGKILL while a ~60 MB record is being written. Whatever moment the kill hits, every
    record file on disk is complete and earlier records are intact."""
    root = tmp_path / "store"
    child = run_child(f"""
from testkit.records import make_record, make_records
from rollouts.store import RolloutStore
store = RolloutStore({str(root)!r}, writer_id="victim")
for record in make_records(3, seed=11):
    store.save(record)
big = make_record(seed=12, episode_id="big", started="2026-11-25T00:00:00Z")
big["messages"].append({{"role": "user", "content": "ä" * 30_000_000}})
print("saving", flush=True)
store.save(big)
print("saved", flush=True)
""")
    assert child.stdout.readline().strip() == "saving"
    folder = root / "rollouts" / "2026-11-25"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (folder.is_dir() and any(folder.iterdir())):
        time.sleep(0.0005)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)

    for path in root.glob("rollouts/*/*.json"):
        json.loads(path.read_bytes())  # complete, or it would not parse
    big = folder / "big.json"
    assert not big.exists() or json.loads(big.read_bytes())["episode_id"] == "big"
    reopened = RolloutStore(root)
    assert {r["episode_id"] for r in make_records(3, seed=11)} <= {r["episode_id"] for r in reopened.rows()}
    for record in make_records(3, seed=11):
        assert reopened.load(record["episode_id"]) == record


def test_a_kill_between_write_and_rename_leaves_only_a_temp_file_that_is_cleaned_up(tmp_path, monkeypatch):
    """Deterministic: the child stops inside the record's fsync (data written, not yet renamed) and is killed."""
    root = tmp_path / "store"
    child = run_child(f"""
import os, stat, time
from testkit.records import make_record, make_records
from rollouts import jsonio as store_module
from rollouts.store import RolloutStore
store = RolloutStore({str(root)!r}, writer_id="victim")
for record in make_records(2, seed=13):
    store.save(record)
real_fsync = os.fsync
def stalled_fsync(fd):
    if stat.S_ISREG(os.fstat(fd).st_mode):  # the record's temp file, not a folder
        print("in fsync", flush=True)
        time.sleep(60)
    real_fsync(fd)
store_module.os.fsync = stalled_fsync
store.save(make_record(seed=14, episode_id="doomed", started="2026-11-26T00:00:00Z"))
""")
    assert child.stdout.readline().strip() == "in fsync"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)

    folder = root / "rollouts" / "2026-11-26"
    assert not (folder / "doomed.json").exists()
    leftovers = [p for p in folder.iterdir() if p.name.endswith(".tmp")]
    assert len(leftovers) == 1 and leftovers[0].name.startswith(".doomed.json.")
    assert all(not p.name.startswith(".") for p in root.glob("rollouts/*/*.json"))

    monkeypatch.setattr(store_module, "RECOVER_GRACE_S", 0.0)
    reopened = RolloutStore(root)
    assert not any(folder.iterdir())  # the dead writer's temp file is gone
    assert len(reopened.rows()) == 2 and not reopened.has("doomed")
    # The same episode can be saved again afterwards.
    reopened.save(make_record(seed=14, episode_id="doomed", started="2026-11-26T00:00:00Z"))
    assert reopened.has("doomed")


def test_a_torn_index_line_is_skipped_then_cut_and_its_row_rebuilt(tmp_path, monkeypatch):
    store = RolloutStore(tmp_path, writer_id="crashed")
    records = make_records(3, seed=15, started="2026-11-29T08:00:00Z")
    for record in records:
        store.save(record)
    # Simulate a writer killed mid-append: the record is on disk, its row only half written.
    lost = make_record(seed=16, episode_id="half_indexed", started="2026-11-29T09:00:00Z")
    atomic_write(tmp_path / "rollouts" / "2026-11-29" / "half_indexed.json",
                              json.dumps(lost, ensure_ascii=False).encode())
    index = tmp_path / "index" / "2026-11-29" / "crashed.jsonl"
    with open(index, "ab") as f:
        f.write(b'{"run": null, "model": "openai:gpt-5.5", "episode_id": "half_ind')

    fresh = RolloutStore(tmp_path, writer_id="reader")  # young torn file: maybe still being written; not touched
    assert len(fresh.rows()) == 3
    assert index.read_bytes().endswith(b'"half_ind')
    assert fresh.load("half_indexed") == lost  # found by its file even without a row

    monkeypatch.setattr(store_module, "RECOVER_GRACE_S", 0.0)
    repaired = RolloutStore(tmp_path, writer_id="repairer")
    assert index.read_bytes().endswith(b"\n")
    assert all(json.loads(line) for line in index_lines(tmp_path))
    rows = {r["episode_id"]: r for r in repaired.rows()}
    assert set(rows) == {r["episode_id"] for r in records} | {"half_indexed"}
    assert rows["half_indexed"]["path"] == "rollouts/2026-11-29/half_indexed.json"
    index_ds = datasets.load_dataset(str(tmp_path), "index", split="train", cache_dir=str(tmp_path / ".cache"))
    assert sorted(index_ds["episode_id"]) == sorted(rows)


def test_threads_saving_at_once_never_interleave_rows(tmp_path):
    store = RolloutStore(tmp_path, writer_id="threads")
    records = make_records(96, seed=17, started="2026-11-29T12:00:00Z")
    errors: list[BaseException] = []

    def work(chunk):
        try:
            for record in chunk:
                store.save(record)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(records[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    lines = index_lines(tmp_path)
    assert len(lines) == 96 and all(line.endswith(b"\n") for line in lines)
    assert sorted(json.loads(line)["episode_id"] for line in lines) == sorted(r["episode_id"] for r in records)
    reopened = RolloutStore(tmp_path)
    for record in records[::7]:
        assert reopened.load(record["episode_id"]) == record


def test_two_processes_saving_at_once_stay_correct(tmp_path):
    root = tmp_path / "shared"
    RolloutStore(root)  # card written once, before the race
    children = [run_child(f"""
from testkit.records import make_records
from rollouts.store import RolloutStore
store = RolloutStore({str(root)!r}, writer_id="proc{n}")
for record in make_records(40, seed={100 + n}, started="2026-11-29T12:00:00Z"):
    store.save(record)
print(len(store.rows()))
""") for n in range(2)]
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        assert 40 <= int(out) <= 80  # its own rows, and whatever the other had written by then
    expected = {r["episode_id"] for n in range(2) for r in make_records(40, seed=100 + n)}
    lines = index_lines(root)
    assert len(lines) == 80
    assert {json.loads(line)["episode_id"] for line in lines} == expected
    reopened = RolloutStore(root)
    assert {r["episode_id"] for r in reopened.rows()} == expected
    assert all(reopened.load(eid) is not None for eid in expected)


def test_index_and_records_round_trip_through_load_dataset(tmp_path):
    store = RolloutStore(tmp_path, writer_id="ds")
    records = make_records(24, seed=18)
    records[0]["task"] = {}  # an unknown task and no grade: null ints in the index
    records[0]["final"] = {"submitted": False, "plan": None, "grade": None, "rubric": None}
    records[1]["judge"] = {"verdict": "fine", "scores": [1, 2.5]}  # a field the card does not list yet
    records[2]["messages"][1]["content"] = [{"type": "text", "text": "content as blocks"}]
    for record in records:
        store.save(record)
    cache = str(tmp_path / ".cache")

    index = datasets.load_dataset(str(tmp_path), "index", split="train", cache_dir=cache)
    assert list(index.features) == list(COLUMNS)
    by_id = {row["episode_id"]: row for row in index}
    assert len(by_id) == 24
    for row in store.rows():
        got = by_id[row["episode_id"]]
        for name, value in row.items():
            if name == "started":  # a timestamp column (see rollouts.card), exact to the second
                assert got[name] == datetime.fromisoformat(value)
            else:
                assert got[name] == value or (isinstance(value, float) and math.isclose(got[name], value)), name
    assert by_id[records[0]["episode_id"]]["optimal_cost"] is None

    full = datasets.load_dataset(str(tmp_path), "rollouts", split="train", cache_dir=cache)
    assert len(full) == 24
    originals = {r["episode_id"]: r for r in records}
    for item in full:
        original = originals[item["episode_id"]]
        for name in ("messages", "steps", "final", "task", "usage", "limits", "errors", "model", "turns"):
            assert same(item[name], original[name]), name
        assert item["started"] == datetime.fromisoformat(original["started"])
        assert same(item["judge"], original.get("judge"))
        assert item["provider_switches"] == original.get("provider_switches")
    assert "judge" in (tmp_path / "README.md").read_text()


def test_opening_rewrites_a_stale_card_but_keeps_its_extra_fields(tmp_path):
    store = RolloutStore(tmp_path)
    store.save(make_record(seed=19, judge={"ok": True}))
    readme = tmp_path / "README.md"
    readme.write_text(readme.read_text().replace("pretty_name:", "old_name:"))
    RolloutStore(tmp_path)
    text = readme.read_text()
    assert "pretty_name:" in text and "old_name" not in text and "judge" in text


def test_a_burst_of_saves_all_land_once(tmp_path):
    store = RolloutStore(tmp_path)
    records = make_records(50, seed=20)
    for record in records:
        store.save(record)
    assert all(store.load(r["episode_id"]) == r for r in records)
    rows = [line for path in (tmp_path / "index").rglob("*.jsonl") for line in path.read_text().splitlines()]
    assert len(rows) == 50
    assert os.path.getsize(tmp_path / "README.md") > 1000
