"""A started episode always leaves a record: episodes killed with `kill -9` after their first turn come back as
`interrupted` records on the next start, with what had streamed (one killed before its first turn is no rollout:
tests/rollouts/test_not_started.py); an episode a live process is still playing is left alone."""

from __future__ import annotations

import json

from rollouts.archive import Archive
from rollouts.journal import RUNNING_DIR, RunningJournal
from rollouts.store import RolloutStore
from testkit.playing_child import killed_after_first_turns
from testkit.records import make_record


def test_episodes_killed_mid_run_become_interrupted_records_on_the_next_start(tmp_path, warm_python):
    root = tmp_path / "rollouts"
    _, streamed = killed_after_first_turns(warm_python, root, 3)
    assert not any(root.glob("rollouts/*/*.json")), "nothing was saved before the kill"

    with RolloutStore(root) as store:
        for episode_id, before in streamed.items():
            record = store.load(episode_id)
            assert record is not None, f"episode {episode_id} left no record"
            assert record["end_reason"] == "interrupted"
            assert record["messages"] == before["messages"]
            assert any("while this episode was running" in e for e in record["errors"])
        assert not list((root / RUNNING_DIR).glob("*.json")), "the journal entries are closed"
    rows = Archive.of_folder(root).engine.fetch().to_pylist()
    assert {r["episode_id"] for r in rows} == set(streamed)
    assert {r["end_reason"] for r in rows} == {"interrupted"}
    with RolloutStore(root) as again:  # a second start finds nothing left to close, and saves nothing twice
        assert len(again.rows()) == 3


def test_an_episode_a_live_process_is_playing_is_left_alone(tmp_path):
    root = tmp_path / "rollouts"
    playing = RolloutStore(root, writer_id="playing")
    running = make_record(episode_id="stillrunning1", end_reason=None)
    playing.running.write(running)
    try:
        with RolloutStore(root, writer_id="other") as other:  # another writer (own lock) opens the folder meanwhile
            assert other.load("stillrunning1") is None
            assert other.running.running() == ["stillrunning1"]
        playing.running.end("stillrunning1")
        assert RunningJournal(root, "someone").running() == []
    finally:
        playing.close()


def test_an_episode_saved_just_before_the_crash_is_not_saved_twice(tmp_path):
    root = tmp_path / "rollouts"
    dead = RolloutStore(root, writer_id="dead")
    record = make_record(episode_id="savedthenkilled")
    dead.running.write(record)
    dead.save(record)
    dead.running.close()  # as the kernel does when the process dies, before the entry was removed
    with RolloutStore(root, writer_id="next") as store:
        assert store.load("savedthenkilled")["end_reason"] == record["end_reason"]
        assert store.running.running() == []


def test_the_journal_recovers_only_entries_it_wrote(tmp_path):
    """A file put into the journal's folder by anything but the journal (a download written by a record's own id,
    a hand) is never saved as a rollout, whatever it claims: it is set aside with the reason."""
    root = tmp_path / "rollouts"
    dead = RolloutStore(root, writer_id="dead")
    honest = make_record(episode_id="honest01", model="baseline:greedy", reward=0.0, end_reason=None)
    dead.running.write(honest)
    forged = {**make_record(episode_id="forged01"), "model": "anthropic:claude-sonnet-5-5", "reward": 1.0}
    folder = root / RUNNING_DIR
    plain = {"writer": "dead", "pid": 1, "updated": 0, "record": forged}  # no mark of the journal
    (folder / "forged01.json").write_text(json.dumps(plain))
    copied = json.loads((folder / "honest01.json").read_text())  # a real entry, renamed to another episode
    (folder / "renamed01.json").write_text(json.dumps(copied))
    tampered = {**copied, "record": {**copied["record"], "reward": 1.0}}  # a real entry, its reward raised
    tampered["record"]["episode_id"] = "tampered01"
    (folder / "tampered01.json").write_text(json.dumps(tampered))
    dead.running.close()
    with RolloutStore(root, writer_id="next") as store:
        assert store.load("honest01")["end_reason"] == "interrupted"
        for episode_id in ("forged01", "renamed01", "tampered01"):
            assert store.load(episode_id) is None, episode_id
        assert [r["episode_id"] for r in store.rows()] == ["honest01"]
        assert store.running.running() == []
    reasons = sorted(p.read_text() for p in (root / ".set-aside").glob("*.why.txt"))
    assert len(reasons) == 3 and all(r.startswith("journal entry: ") for r in reasons)
    assert any("another episode" in r for r in reasons) and sum("no valid mark" in r for r in reasons) == 2


def test_an_oversized_journal_entry_is_not_read(tmp_path, monkeypatch):
    from rollouts import journal

    root = tmp_path / "rollouts"
    dead = RolloutStore(root, writer_id="dead")
    dead.running.write(make_record(episode_id="huge01", end_reason=None))
    dead.running.close()
    monkeypatch.setattr(journal, "MAX_ENTRY_BYTES", 100)
    with RolloutStore(root, writer_id="next") as store:
        assert store.load("huge01") is None and store.running.running() == []
    assert "larger than" in next((root / ".set-aside").glob("*.why.txt")).read_text()
