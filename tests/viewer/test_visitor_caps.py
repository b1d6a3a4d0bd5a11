"""A visitor's rollouts per hour (live/quota.py): one sliding window for model runs and hand-played episodes,
against the real registries, store and embedded server, and through the launched app's doors (`/run` and
`/play_start` from one address, a second address unaffected)."""

from __future__ import annotations

import time

import pytest
from gradio_client import Client

from agent.request import EpisodeRequest
from berth_env import load_pack
from live.hand_play import PlayError, PlayRegistry
from live.quota import QuotaExceeded, SaveQuota
from live.runs import CapacityError, RunRegistry
from rollouts.store import RolloutStore
from testkit.app import launched_app
from testkit.servers import free_port
from testkit.tasks import TASK_ID


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def wait_for(predicate, timeout: float = 60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_the_window_slides_and_says_when_the_next_may_start():
    clock = Clock()
    quota = SaveQuota(3, clock=clock)
    for minute in (0, 10, 20):
        clock.now = 1000.0 + 60 * minute
        quota.take("ip:203.0.113.5")
    with pytest.raises(QuotaExceeded, match=r"saved 3 rollouts in the last hour \(the limit is 3 per visitor.*"
                                            r"next one can start in 40 min"):
        quota.take("ip:203.0.113.5")
    quota.take("ip:198.51.100.7")  # another visitor has a budget of its own
    clock.now = 1000.0 + 3600 + 1  # the first one is an hour old
    quota.take("ip:203.0.113.5")
    with pytest.raises(QuotaExceeded):
        quota.take("ip:203.0.113.5")
    quota.give_back("ip:203.0.113.5")  # an episode that saved nothing
    quota.take("ip:203.0.113.5")
    with pytest.raises(QuotaExceeded):  # a match (two runs at once) needs two slots, or none is taken
        SaveQuota(1).take("v", count=2)
    assert SaveQuota(0).used("v") == 0 and SaveQuota(0).take("v", count=99) is None  # 0: no cap


def test_runs_and_hand_played_episodes_share_one_budget_and_only_saved_rollouts_count(tmp_path, env_url):
    """Before, nothing counted what a visitor added to the public dataset: one address saved 178 `human`
    rollouts in 22 s."""
    clock = Clock()
    quota = SaveQuota(3, clock=clock)
    with RolloutStore(tmp_path / "rollouts") as store:
        runs = RunRegistry(store.save, max_per_visitor=4, quota=quota)
        plays = PlayRegistry(store.save, env_url=env_url, quota=quota, max_per_visitor=4)
        try:
            me = "ip:203.0.113.5"
            looked = plays.start(TASK_ID, owner="page-1", visitor=me)
            plays.abandon("page-1")  # nothing played: nothing saved, the slot comes back
            assert store.load(looked.episode_id) is None and quota.used(me) == 0
            # A run whose server cannot be reached saves nothing either.
            lost = runs.start(EpisodeRequest.of("baseline:greedy", TASK_ID, env_url=f"http://127.0.0.1:{free_port()}"),
                              owner="page-1", visitor=me)
            wait_for(lambda: lost.finished)
            assert quota.used(me) == 0
            for n in range(2):
                run = runs.start(EpisodeRequest.of("baseline:greedy", TASK_ID, env_url=env_url), owner=f"page-{n}",
                                 visitor=me)
                wait_for(lambda run=run: run.finished)
                assert store.load(run.episode_id)["end_reason"] == "submitted"
            played = plays.start(TASK_ID, owner="page-3", visitor=me)
            plays.submit(played.episode_id, "page-3", load_pack().get(TASK_ID)["reference"]["optimal_plan"])
            assert len(store.rows()) == 3 and quota.used(me) == 3
            with pytest.raises(CapacityError, match="saved 3 rollouts in the last hour"):
                runs.start(EpisodeRequest.of("baseline:greedy", TASK_ID, env_url=env_url), owner="page-4", visitor=me)
            with pytest.raises(PlayError, match="saved 3 rollouts in the last hour"):
                plays.start(TASK_ID, owner="page-4", visitor=me)
            other = plays.start(TASK_ID, owner="page-5", visitor="account:ana")
            assert other.visitor == "account:ana"
            clock.now += 3601
            plays.start(TASK_ID, owner="page-4", visitor=me)  # an hour on, the visitor may play again
        finally:
            plays.close()


def test_the_apps_doors_enforce_the_hourly_cap_per_address(tmp_path):
    with launched_app(tmp_path, max_rollouts_per_hour=2) as app:
        me = Client(app.url, verbose=False, headers={"X-Forwarded-For": "203.0.113.30"})
        for _ in range(2):
            assert list(me.submit("baseline:greedy", TASK_ID, 12, 24000, "embedded", api_name="/run"))[-1][
                "end_reason"] == "submitted"
        again = Client(app.url, verbose=False, headers={"X-Forwarded-For": "203.0.113.30"})  # a fresh session
        with pytest.raises(Exception, match="saved 2 rollouts in the last hour"):
            again.predict("baseline:greedy", TASK_ID, 12, 24000, "embedded", api_name="/run")
        with pytest.raises(Exception, match="saved 2 rollouts in the last hour"):
            again.predict(TASK_ID, api_name="/play_start")
        assert len(app.ctx.store.rows()) == 2
        other = Client(app.url, verbose=False, headers={"X-Forwarded-For": "203.0.113.31"})
        assert other.predict(TASK_ID, api_name="/play_start")["checks_left"] == 10
