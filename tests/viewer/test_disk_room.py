"""A run the disk could not keep is refused before it starts (rollouts/journal.py's `check_room`, asked by
live/runs.py for every start): before, with the disk full every run played to its end and came back
`"saved": false`, lost."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from gradio_client import Client

from agent.request import EpisodeRequest
from live.runs import CapacityError, RunRegistry
from rollouts import journal
from rollouts.store import RolloutStore
from testkit.tasks import TASK_ID

ROOM_FOR_ONE = journal.EPISODE_ROOM + journal.DISK_MARGIN


def test_a_start_the_disk_cannot_hold_is_refused_saying_so_and_starts_nothing(tmp_path, env_url):
    with RolloutStore(tmp_path / "rollouts") as store:
        runs = RunRegistry(store.save, max_per_visitor=4, journal=store.running)
        greedy = EpisodeRequest.of("baseline:greedy", TASK_ID, env_url=env_url)
        free = [ROOM_FOR_ONE - 1]
        store.running.free_bytes = lambda: free[0]
        with pytest.raises(CapacityError, match=r"has \d+ MB free, too little to keep this run .*nothing was "
                                                r"started"):
            runs.start(greedy, owner="page-1", visitor="ip:203.0.113.5")
        free[0] = ROOM_FOR_ONE  # room for one episode, not for a match's two
        with pytest.raises(CapacityError, match="too little to keep these 2 runs"):
            runs.start_group([greedy] * 2, owner="page-1")
        assert not runs.running_for("page-1") and store.running.running() == [] and store.rows() == []
        run = runs.start(EpisodeRequest.of("baseline:greedy", TASK_ID, env_url=env_url, baseline_pace_s=1.0),
                         owner="page-1", visitor="ip:203.0.113.5")
        # While it runs it writes to the same disk: room for one more record is not room for the second episode.
        with pytest.raises(CapacityError, match="too little to keep this run"):
            runs.start(greedy, owner="page-2", visitor="ip:203.0.113.6")
        assert run.wait_finished(60) and store.load(run.episode_id)["end_reason"] == "submitted"


def test_the_apps_run_door_says_the_disk_is_full_before_the_run(arena):
    before, reading = len(arena.ctx.store.rows()), arena.ctx.store.running.free_bytes
    arena.ctx.store.running.free_bytes = lambda: 10 << 20
    try:
        client = Client(arena.url, verbose=False)
        with pytest.raises(Exception, match="10 MB free, too little to keep this run"):
            client.predict("baseline:greedy", TASK_ID, 12, 24000, "embedded", api_name="/run")
    finally:
        arena.ctx.store.running.free_bytes = reading
    assert len(arena.ctx.store.rows()) == before


def test_a_batch_run_on_a_full_disk_says_so_and_plays_nothing(tmp_path, monkeypatch, capsys):
    from batch import cli

    monkeypatch.setattr(journal.shutil, "disk_usage", lambda path: SimpleNamespace(free=5 << 20))
    out = tmp_path / "rollouts"
    code = cli.main(["run", "--model", "baseline:greedy", "--split", "eval", "--limit", "1", "--out", str(out)])
    assert code == 2 and "5 MB free, too little to keep" in capsys.readouterr().err
    assert not list(out.glob("rollouts/*/*.json"))
