"""One door opens an episode by id (viewer.records.RecordCache.find): running here, else stored."""

from __future__ import annotations

import pytest

from live.runs import EpisodeRun
from rollouts import events as ev
from rollouts.archive import Archive, RolloutNotFound
from rollouts.store import RolloutStore
from testkit.records import make_record
from viewer.records import RecordCache


def started(run: EpisodeRun) -> None:
    run.publish(ev.episode_started(episode_id=run.episode_id, task_id=run.task_id, model=run.model, env_url=None,
                                   instructions="", situation="", tools=[], limits={"max_turns": 5}, task={}))
    run.publish(ev.turn_finished(1, "tool_use", {}, {"input_tokens": 10, "output_tokens": 4}))


def test_running_then_stored_then_nothing(tmp_path):
    store = RolloutStore(tmp_path / "rollouts")
    stored = make_record(seed=3)
    store.save(stored)
    run = EpisodeRun("feedc0ffee01", "baseline:greedy", stored["task_id"], owner="someone")
    started(run)
    held = {run.episode_id: run}
    door = RecordCache(Archive.of_folder(store.root), held.get)

    found = door.find(stored["episode_id"])
    assert found.run is None and not found.running
    assert found.record.episode_id == stored["episode_id"] and found.row["source"] == "local"
    assert found.record is door.find(stored["episode_id"]).record  # kept: one read per open record

    live = door.find(run.episode_id)
    assert live.running and live.row == {}
    assert (live.record.model, live.record.turns, live.record.usage["output_tokens"]) == ("baseline:greedy", 1, 4)
    with pytest.raises(RolloutNotFound):  # Browse shows stored rollouts only
        _ = door.find(run.episode_id, running=False).record

    # Finished a moment ago and not stored yet: its own record; once stored, the stored one.
    finished = make_record(seed=4, episode_id=run.episode_id, model="baseline:greedy")
    run.finish(finished)
    assert door.find(run.episode_id).record.data is finished
    store.save(finished)
    door.archive.refresh_local(force=True)
    found = door.find(run.episode_id)
    assert found.row["source"] == "local" and found.record.data == finished

    with pytest.raises(RolloutNotFound):
        _ = door.find("nosuchepisode").record
