"""The Hub side of the store, against testkit/fakehub.py over a real socket with the real huggingface_hub client:
batching, 500s, 429 + Retry-After, a Hub that goes down and comes back, restarts with unpushed files, a commit
whose answer is lost, two pushers on one folder, a wrong token. Nothing may be lost or pushed twice."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from huggingface_hub import HfApi, hf_hub_download

from rollouts import hub_push, traces
from rollouts.store import RolloutStore
from testkit.fakehub import git_oid
from testkit.records import make_records
from tests.rollouts.conftest import REPO, TOKEN


def save_all(store: RolloutStore, records: list[dict]) -> None:
    for record in records:
        store.save(record)


def local_files(root: Path) -> dict[str, bytes]:
    paths = [root / "README.md", *root.glob("rollouts/*/*.json"), *root.glob("traces/*/*.jsonl"),
             *root.glob("index/*/*.jsonl")]
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in paths}


def times_committed(hub) -> Counter:
    """How many commits carried each path (a record pushed twice would count 2)."""
    return Counter(path for commit in hub.commits(REPO) for path in commit.paths)


def wait_for(condition, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def journal(root: Path) -> list[dict]:
    return [json.loads(line) for line in (root / ".push" / "pushed.jsonl").read_text().splitlines()]


def test_the_first_push_carries_the_card_records_and_index(tmp_path, hub, open_store):
    store = open_store(tmp_path)
    assert store.status()["waiting"] == 0
    save_all(store, make_records(5, seed=1))
    assert store.status()["waiting"] == 5 and store.status()["last_push"] is None
    assert hub.hits("commit") == []  # nothing pushed before a trigger

    assert store.flush(timeout=30) is True
    [commit] = hub.commits(REPO)
    assert "README.md" in commit.paths and len(commit.paths) == len(local_files(tmp_path))
    assert hub.files(REPO) == local_files(tmp_path)  # byte for byte
    status = store.status()
    assert status["waiting"] == 0 and status["last_push"] and status["last_error"] is None
    assert status["dataset"] == REPO
    # The journal names every pushed file with the git oid the Hub reports for it.
    remote = {f.path: f.blob_id for f in HfApi(endpoint=hub.url, token=TOKEN).list_repo_tree(
        REPO, repo_type="dataset", recursive=True) if hasattr(f, "blob_id")}
    assert {e["path"]: e["sha1"] for e in journal(tmp_path)} == remote
    assert all(e["sha1"] == git_oid((tmp_path / e["path"]).read_bytes()) for e in journal(tmp_path))
    # A reader downloads one rollout by its index path.
    row = store.rows()[2]
    got = hf_hub_download(REPO, row["path"], repo_type="dataset", endpoint=hub.url, token=TOKEN,
                          cache_dir=tmp_path / ".hf-cache")
    assert json.loads(Path(got).read_bytes()) == store.load(row["episode_id"])


def trace_record(trace: str) -> str:
    """`traces/<day>/<id>.jsonl` -> `rollouts/<day>/<id>.json`."""
    return trace.replace("traces/", "rollouts/", 1).removesuffix("l")


def test_traces_written_by_the_backfill_go_up_at_the_next_start_without_a_flush(tmp_path, hub, open_store):
    store = open_store(tmp_path)
    records = make_records(3, seed=31)
    save_all(store, records)
    for trace in tmp_path.glob("traces/*/*.jsonl"):
        trace.unlink()  # rollouts saved before traces existed
    assert store.flush(timeout=30)
    store.close()
    assert not [p for p in hub.files(REPO) if p.startswith("traces/")]

    assert traces.backfill(tmp_path).new == 3
    again = open_store(tmp_path, writer_id="w2")
    assert wait_for(lambda: len(hub.commits(REPO)) == 2)
    latest = hub.commits(REPO)[-1]
    assert sorted(latest.paths) == sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("traces/*/*"))
    assert latest.message == "Add 3 agent traces"
    assert hub.files(REPO) == local_files(tmp_path) and again.status()["waiting"] == 0


def test_every_n_rollouts_triggers_a_push_without_flush(tmp_path, hub, open_store):
    store = open_store(tmp_path, push_every_n=3)
    records = make_records(5, seed=2)
    save_all(store, records[:3])
    assert wait_for(lambda: len(hub.commits(REPO)) == 1)
    save_all(store, records[3:])
    time.sleep(0.5)
    assert len(hub.commits(REPO)) == 1 and store.status()["waiting"] == 2  # 2 < n and the timer is an hour away
    assert store.flush(timeout=30)
    assert len(hub.commits(REPO)) == 2


def test_the_timer_pushes_a_lone_rollout(tmp_path, hub, open_store):
    store = open_store(tmp_path, push_every_s=0.5)
    save_all(store, make_records(1, seed=3))
    assert wait_for(lambda: store.status()["waiting"] == 0 and len(hub.commits(REPO)) == 1, timeout=10)


def test_a_big_backlog_goes_in_commits_under_100_files_with_the_index_last(tmp_path, hub, open_store):
    store = open_store(tmp_path)
    records = make_records(230, seed=4)
    save_all(store, records)
    assert store.flush(timeout=120)
    commits = hub.commits(REPO)
    files = len(local_files(tmp_path))  # the card, 230 records, their 230 traces, the index files
    assert len(commits) == -(-files // hub_push.MAX_FILES_PER_COMMIT) and all(len(c.paths) < 100 for c in commits)
    assert not any(p.startswith("index/") for c in commits[:-1] for p in c.paths)
    assert set(times_committed(hub).values()) == {1}
    assert hub.files(REPO) == local_files(tmp_path)
    # A trace never lands before its record: it names the record it came from.
    landed = {path: n for n, commit in enumerate(commits) for path in commit.paths}
    traces = [path for path in landed if path.startswith("traces/")]
    assert len(traces) == 230 and any(landed[path] > 0 for path in traces)
    assert all(landed[path] >= landed[trace_record(path)] for path in traces)


def test_server_errors_are_retried_and_nothing_is_lost_or_doubled(tmp_path, hub, open_store):
    store = open_store(tmp_path, retry_base_s=0.2)
    hub.fail("commit", status=500, times=3)
    save_all(store, make_records(4, seed=5))
    store.flush(timeout=0.01)  # starts a push without waiting for it
    assert wait_for(lambda: "HTTP 500" in (store.status()["last_error"] or ""))
    assert store.status()["waiting"] == 4
    assert store.flush(timeout=30)
    assert [status for *_, status in hub.hits("commit")] == [500, 500, 500, 200]
    assert store.status()["last_error"] is None and store.status()["waiting"] == 0
    assert set(times_committed(hub).values()) == {1} and hub.files(REPO) == local_files(tmp_path)


def test_a_429_waits_for_retry_after(tmp_path, hub, open_store):
    store = open_store(tmp_path)
    hub.fail("commit", status=429, retry_after=1)
    save_all(store, make_records(2, seed=6))
    assert store.flush(timeout=30)
    (t429, *_, s429), (t_ok, *_, s_ok) = hub.hits("commit")
    assert (s429, s_ok) == (429, 200)
    assert t_ok - t429 >= 1.0  # the backoff alone would have retried after 0.05 s
    assert len(hub.commits(REPO)) == 1


def test_a_failing_preupload_is_retried(tmp_path, hub, open_store):
    store = open_store(tmp_path)
    hub.fail("preupload", status=503, times=2)
    save_all(store, make_records(2, seed=7))
    assert store.flush(timeout=60)
    assert [status for *_, status in hub.hits("preupload")][:2] == [503, 503]
    assert len(hub.commits(REPO)) == 1 and hub.files(REPO) == local_files(tmp_path)


def test_a_commit_that_landed_but_whose_answer_was_lost_is_not_pushed_again(tmp_path, hub, open_store):
    store = open_store(tmp_path)
    hub.fail("commit", status=500, after_apply=True)
    save_all(store, make_records(3, seed=8))
    assert store.flush(timeout=30)
    # The retry sent the same bytes; preupload reported them as already there, so no second commit was made.
    assert len(hub.commits(REPO)) == 1 and [s for *_, s in hub.hits("commit")] == [500]
    assert hub.files(REPO) == local_files(tmp_path)
    assert {e["path"] for e in journal(tmp_path)} == set(local_files(tmp_path))


@pytest.mark.parametrize("mode", ["refuse", "close"])
def test_the_hub_down_never_slows_save_and_everything_goes_up_when_it_is_back(tmp_path, hub, open_store, mode):
    store = open_store(tmp_path)
    save_all(store, make_records(2, seed=9))
    assert store.flush(timeout=30)
    hub.down(mode)
    records = make_records(3, seed=10)
    slowest = 0.0
    for record in records:
        start = time.perf_counter()
        store.save(record)
        slowest = max(slowest, time.perf_counter() - start)
    assert slowest < 0.5
    assert store.flush(timeout=1.0) is False
    status = store.status()
    assert status["waiting"] == 3 and status["saved"] == 5 and status["last_error"]
    assert all(store.load(r["episode_id"]) == r for r in records)

    hub.up()
    assert store.flush(timeout=30)
    assert store.status()["waiting"] == 0 and store.status()["last_error"] is None
    assert hub.files(REPO) == local_files(tmp_path)
    assert all(n == 1 for path, n in times_committed(hub).items() if not path.startswith("index/"))


def test_starting_while_the_hub_is_down_is_instant(tmp_path, hub, open_store):
    hub.down()
    start = time.perf_counter()
    store = open_store(tmp_path)
    store.save(make_records(1, seed=11)[0])
    assert time.perf_counter() - start < 1.0
    assert store.status()["waiting"] == 1
    hub.up()
    assert store.flush(timeout=30)
    assert hub.files(REPO) == local_files(tmp_path)


def test_a_restart_carries_on_with_unpushed_files_and_pushes_nothing_twice(tmp_path, hub, open_store):
    hub.down()
    first = open_store(tmp_path, writer_id="before")
    old = make_records(4, seed=12)
    save_all(first, old)
    assert first.flush(timeout=0.5) is False
    first.close()  # the process ends with 4 rollouts unpushed
    hub.up()

    second = open_store(tmp_path, writer_id="after")  # the backlog goes out without a flush
    assert wait_for(lambda: second.status()["waiting"] == 0 and len(hub.commits(REPO)) == 1)
    assert hub.files(REPO) == local_files(tmp_path)
    new = make_records(1, seed=13)[0]
    second.save(new)
    assert second.flush(timeout=30)
    latest = hub.commits(REPO)[-1]
    assert [p for p in latest.paths if p.startswith("rollouts/")] == [second.rows()[-1]["path"]]
    assert not any(p.startswith("index/") and "before" in p for p in latest.paths)
    second.close()

    commits_before = len(hub.commits(REPO))
    (tmp_path / second.rows()[0]["path"]).touch()  # a new mtime, the same bytes
    third = open_store(tmp_path, writer_id="again")
    assert third.flush(timeout=30)
    assert len(hub.commits(REPO)) == commits_before  # nothing changed, nothing pushed
    assert set(times_committed(hub).values()) <= {1, 2}  # only index files were pushed twice (they grew)
    assert all(n == 1 for path, n in times_committed(hub).items() if not path.startswith("index/"))


def test_a_torn_journal_line_costs_no_duplicate(tmp_path, hub, open_store):
    store = open_store(tmp_path)
    save_all(store, make_records(3, seed=14))
    assert store.flush(timeout=30)
    store.close()
    with open(tmp_path / ".push" / "pushed.jsonl", "ab") as f:
        f.write(b'{"path": "rollouts/2026-11-2')  # a pusher killed mid-append
    again = open_store(tmp_path, writer_id="w2")
    assert again.flush(timeout=30)
    assert len(hub.commits(REPO)) == 1  # the entries before the torn line still count
    again.save(make_records(1, seed=30)[0])
    assert again.flush(timeout=30)
    assert len(hub.commits(REPO)) == 2 and set(times_committed(hub).values()) == {1}
    lines = (tmp_path / ".push" / "pushed.jsonl").read_bytes().splitlines()
    assert all(json.loads(line) for line in lines)  # the torn tail was cut before the next append


def test_two_stores_on_one_folder_push_each_record_once(tmp_path, hub, open_store):
    left = open_store(tmp_path, writer_id="left")
    right = open_store(tmp_path, writer_id="right")
    save_all(left, make_records(5, seed=15))
    save_all(right, make_records(5, seed=16))
    assert left.flush(timeout=30) and right.flush(timeout=30)
    assert wait_for(lambda: hub.files(REPO) == local_files(tmp_path))
    counts = times_committed(hub)
    assert all(n == 1 for path, n in counts.items() if not path.startswith("index/"))
    assert sum(path.startswith("rollouts/") for path in hub.files(REPO)) == 10


def test_the_commit_budget_holds_commits_back(tmp_path, hub, open_store, monkeypatch):
    monkeypatch.setattr(hub_push, "MAX_COMMITS_PER_HOUR", 2)
    store = open_store(tmp_path)
    for record in make_records(3, seed=17):
        store.save(record)
        store.flush(timeout=2)
    assert len(hub.commits(REPO)) == 2
    status = store.status()
    assert status["waiting"] == 1 and "commit budget" in status["last_error"]


def test_a_wrong_token_keeps_everything_local_and_never_shows_the_token(tmp_path, hub, open_store, caplog):
    wrong = "hf_wrong_token_abcdefghijklmnop"
    caplog.set_level(logging.DEBUG)
    store = open_store(tmp_path, token=wrong)
    records = make_records(2, seed=18)
    save_all(store, records)
    assert store.flush(timeout=1.0) is False
    status = store.status()
    assert "401" in status["last_error"] and status["waiting"] == 2
    assert wrong not in status["last_error"] and wrong not in caplog.text
    assert not any(wrong.encode() in p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert all(store.load(r["episode_id"]) == r for r in records)


def test_load_dataset_reads_both_configs_from_the_hub(tmp_path, hub, open_store):
    store = open_store(tmp_path)
    records = make_records(6, seed=19)
    records[0]["judge"] = {"score": 2}  # an extra record field: the card grows, the Hub copy still loads
    save_all(store, records)
    assert store.flush(timeout=30)
    assert sum(p.startswith("traces/") for p in hub.files(REPO)) == len(records)  # the configs load beside them
    script = (
        "import json, sys, datasets\n"
        "out = {}\n"
        "for config in ('index', 'rollouts'):\n"
        "    ds = datasets.load_dataset(sys.argv[1], config, split='train')\n"
        "    out[config] = {'n': len(ds), 'ids': sorted(ds['episode_id']), 'columns': list(ds.features)}\n"
        "print(json.dumps(out))\n"
    )
    # datasets and huggingface_hub read HF_ENDPOINT when imported, hence a fresh interpreter.
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_TOKEN": TOKEN, "HF_HOME": str(tmp_path / "hf-home"),
           "HF_HUB_DISABLE_TELEMETRY": "1"}
    done = subprocess.run([sys.executable, "-c", script, REPO], env=env, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    ids = sorted(r["episode_id"] for r in records)
    assert out["index"]["ids"] == ids and out["rollouts"]["ids"] == ids
    assert "judge" in out["rollouts"]["columns"] and "model_name" in out["index"]["columns"]
