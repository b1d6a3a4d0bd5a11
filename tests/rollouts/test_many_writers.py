"""Many writers, one Hub dataset: four processes (four machines' rollout folders, testkit/rollout_writer.py) save
and push at once to the Hub-protocol peer, compacting their index into Parquet as they go; every rollout lands
once, none is doubled."""

from __future__ import annotations

import os
from itertools import pairwise
from pathlib import Path

from huggingface_hub import CommitOperationAdd, HfApi
from huggingface_hub.errors import HfHubHTTPError

from rollouts.sources.hub import HubSource
from testkit.fakehub import running_fakehub
from testkit.index_rows import hub_index_rows

REPO = "arena/rollouts"
TOKEN = "hf_test"
WRITERS = 4
PER_WRITER = 15

def test_a_stale_parent_commit_is_refused_with_412():
    with running_fakehub(token=TOKEN) as hub:
        api = HfApi(endpoint=hub.url, token=TOKEN)
        api.create_repo(REPO, repo_type="dataset")
        first = api.create_commit(REPO, [CommitOperationAdd("a.txt", b"a")], commit_message="a", repo_type="dataset")
        api.create_commit(REPO, [CommitOperationAdd("b.txt", b"b")], commit_message="b", repo_type="dataset",
                          parent_commit=first.oid)
        try:
            api.create_commit(REPO, [CommitOperationAdd("c.txt", b"c")], commit_message="c", repo_type="dataset",
                              parent_commit=first.oid)
        except HfHubHTTPError as exc:
            assert exc.response.status_code == 412
        else:
            raise AssertionError("a commit on a stale parent landed")
        assert sorted(hub.files(REPO)) == ["a.txt", "b.txt"]


def test_four_writers_push_to_one_dataset_and_every_rollout_lands_once(tmp_path, warm_python):
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_DISABLE_TELEMETRY": "1"}
    env.pop("HF_HUB_OFFLINE", None)
    with running_fakehub(token=TOKEN) as hub:
        hub.fail("commit", status=412, times=3)  # besides the conflicts the writers cause each other
        children = [warm_python.popen("testkit.rollout_writer", "--dir", str(tmp_path / f"machine{k}"),
                                      "--dataset", REPO, "--endpoint", hub.url, "--token", TOKEN,
                                      "--records", str(PER_WRITER), "--seed", str(100 + k), env=env)
                    for k in range(WRITERS)]
        for child in children:
            out, err = child.communicate(timeout=180)
            assert child.returncode == 0 and out.strip() == "flushed", err[-2000:]

        files = hub.files(REPO)
        records = [p for p in files if p.startswith("rollouts/")]
        assert len(records) == WRITERS * PER_WRITER
        raw = hub_index_rows(files, tmp_path)
        ids = [row["episode_id"] for row in raw]
        assert len(ids) == len(set(ids)) == WRITERS * PER_WRITER  # every row once, counting every file raw
        assert {f"rollouts/{row['started'][:10]}/{row['episode_id']}.json" for row in raw} == set(records)
        assert any(p.endswith(".parquet") for p in files)
        writers = {Path(p).stem for p in files if p.startswith("index/")}
        assert len(writers) == WRITERS  # each process wrote its own index files
        assert sum(1 for hit in hub.hits("commit") if hit[3] == 412) >= 3  # refused commits were tried again
        commits = hub.commits(REPO)
        # Whatever the timing, no commit ever dropped a record, and only JSONL index files were ever deleted.
        dropped = {p for before, after in pairwise(commits) for p in before.files if p not in after.files}
        assert all(p.startswith("index/") and p.endswith(".jsonl") for p in dropped)

        fresh = HubSource(REPO, endpoint=hub.url, token=TOKEN, cache_dir=tmp_path / "reader-cache").load()
        assert fresh.error is None, fresh.error
        assert sorted(fresh.table["episode_id"].to_pylist()) == sorted(ids)


def test_a_record_field_one_writer_declared_stays_in_the_card_when_another_pushes(tmp_path, monkeypatch):
    from rollouts import card as dataset_card
    from rollouts.store import RolloutStore
    from testkit.records import make_records

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    with running_fakehub(token=TOKEN) as hub:
        options = {"dataset": REPO, "token": TOKEN, "endpoint": hub.url, "retry_base_s": 0.05}
        first, plain = make_records(2, seed=30)
        with RolloutStore(tmp_path / "a", **options) as judged:
            judged.save({**first, "judge": {"score": 3}})
            assert judged.flush(timeout=30)
        assert "judge" in dataset_card.record_fields(hub.files(REPO)["README.md"].decode())
        with RolloutStore(tmp_path / "b", **options) as other:  # its own card has never heard of `judge`
            other.save(plain)
            assert other.flush(timeout=30)
        assert "judge" in dataset_card.record_fields(hub.files(REPO)["README.md"].decode())
        assert "judge" in dataset_card.record_fields((tmp_path / "b" / "README.md").read_text())
        assert len([p for p in hub.files(REPO) if p.startswith("rollouts/")]) == 2


def test_a_folded_jsonl_file_is_deleted_on_the_hub_once_even_when_the_answer_is_lost(tmp_path, monkeypatch):
    from rollouts.index.compaction import compact
    from rollouts.store import RolloutStore
    from testkit.records import make_records

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    with running_fakehub(token=TOKEN) as hub:
        store = RolloutStore(tmp_path / "a", writer_id="w1", dataset=REPO, token=TOKEN, endpoint=hub.url,
                             retry_base_s=0.05)
        with store:
            for record in make_records(3, seed=40, started="2026-11-29T10:00:00Z"):
                store.save(record)
            assert store.flush(timeout=30)
            assert "index/2026-11-29/w1.jsonl" in hub.files(REPO)
            assert compact(tmp_path / "a").rows == 3
            hub.fail("commit", status=500, after_apply=True)  # the deleting commit lands; its answer is lost
            assert store.flush(timeout=30)
        files = hub.files(REPO)
        assert "index/2026-11-29/w1.jsonl" not in files and "index/2026-11-29/w1.parquet" in files
        assert sorted(hub_index_rows(files, tmp_path), key=lambda r: r["episode_id"]) == sorted(
            store.rows(), key=lambda r: r["episode_id"])
        assert hub.hits("commit")[-1][3] == 500  # the retry found nothing left to commit, and sent nothing
