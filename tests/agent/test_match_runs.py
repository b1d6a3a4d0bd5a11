"""Arena matches while they run (live/match_runs.py), against the real run registry, store, match book and
embedded berth server: the row written from both saved records, votes (once per visitor, blind in random mode,
within the hourly cap), a match counted as two runs, Stop ending both, and a match that saved nothing."""

from __future__ import annotations

import threading
import time

import pytest

from agent.request import EpisodeRequest
from live.match_runs import BALLOT_S, SKIP, MatchRegistry, VoteRefused, draw_pair, match_stop_token
from live.quota import SaveQuota
from live.runs import CapacityError, RunRegistry
from rollouts.arena import verdict
from rollouts.matches import MatchBook
from rollouts.store import RolloutStore
from testkit.servers import free_port
from testkit.tasks import TASK_ID

WAIT_S = 60.0


@pytest.fixture
def arena(tmp_path, env_url):
    """(matches, store, env_url): a MatchRegistry over a fresh folder; 2 episodes per visitor, 3 rollouts an hour,
    1 vote an hour."""
    with RolloutStore(tmp_path / "rollouts", writer_id="w1") as store:
        quota = SaveQuota(3)
        runs = RunRegistry(store.save, max_per_visitor=2, quota=quota)
        book = MatchBook(store.root, store.writer_id, on_write=store.notify)
        yield MatchRegistry(runs, book, votes_per_hour=1), store, env_url


def played(matches, a, b, env_url, *, mode="named", visitor="ip:203.0.113.5", pace=0.0):
    sides = [EpisodeRequest.of(model, TASK_ID, env_url=env_url, baseline_pace_s=pace) for model in (a, b)]
    return matches.start(*sides, mode=mode, owner="page-1", visitor=visitor)


def took_a_turn(*runs, timeout: float = WAIT_S) -> bool:
    """Wait until each run's player has taken its first turn (stopped before it, a run is no rollout)."""
    end = time.monotonic() + timeout
    while not all(any(e["type"] == "turn_finished" for e in list(run.events)) for run in runs):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def test_a_named_match_ends_in_a_saved_row_judged_from_its_two_records(arena):
    matches, store, env_url = arena
    match = played(matches, "baseline:greedy", "baseline:hasty", env_url, pace=0.1)
    assert match.ballot("ip:198.51.100.7") == "wait"
    with pytest.raises(VoteRefused, match="still being played"):  # never before both ended
        matches.vote(match.match_id, "a", visitor="ip:198.51.100.7")
    assert match.concluded.wait(WAIT_S)
    a, b = store.load(match.a.episode_id), store.load(match.b.episode_id)
    assert a["model"] == "baseline:greedy" and b["model"] == "baseline:hasty" and a["task_id"] == b["task_id"]
    row = match.row
    assert row == matches.book.get(match.match_id)  # written to the folder, as it stands in memory
    assert (row["episode_a"], row["episode_b"], row["mode"]) == (a["episode_id"], b["episode_id"], "named")
    assert (row["reward_a"], row["reward_b"]) == (a["reward"], b["reward"])
    assert row["winner"] == verdict(a, b).winner == "a" and a["reward"] > b["reward"]
    assert [p.relative_to(store.root).as_posix() for p in store.root.glob("matches/*/*.jsonl")] == \
        [f"matches/{row['started'][:10]}/w1.jsonl"]


def test_two_equal_players_tie(arena):
    matches, _, env_url = arena
    match = played(matches, "baseline:greedy", "baseline:greedy", env_url)
    assert match.concluded.wait(WAIT_S)
    assert match.row["winner"] == "tie" and match.row["reward_a"] == match.row["reward_b"]
    assert verdict(match.a.record, match.b.record).sentence() == \
        "A tie: equal rewards, costs, checks and output tokens."


def test_votes_are_counted_once_per_visitor_blind_in_random_mode_and_within_the_hourly_cap(arena):
    matches, store, env_url = arena
    match = played(matches, "baseline:naive", "baseline:greedy", env_url, mode="random")
    assert match.concluded.wait(WAIT_S)
    first, second, third = "ip:203.0.113.5", "ip:198.51.100.7", "account:someone"
    assert not match.names_shown_to(first) and match.ballot(first) == "open"
    assert matches.vote(match.match_id, "b", visitor=first).row["votes"]["b"] == 1
    assert match.names_shown_to(first) and not match.names_shown_to(second)
    with pytest.raises(VoteRefused, match="already voted"):
        matches.vote(match.match_id, "a", visitor=first)
    matches.vote(match.match_id, SKIP, visitor=second)  # the names without a vote...
    assert match.names_shown_to(second) and match.ballot(second) == "skipped"
    with pytest.raises(VoteRefused, match="blind"):  # ...so no vote from them
        matches.vote(match.match_id, "a", visitor=second)
    with pytest.raises(VoteRefused, match="one of"):
        matches.vote(match.match_id, "meh", visitor=third)
    matches.vote(match.match_id, "both_bad", visitor=third)
    votes = {"a": 0, "b": 1, "tie": 0, "both_bad": 1}
    assert match.row["votes"] == votes
    assert MatchBook(store.root, "w2").get(match.match_id)["votes"] == votes  # on disk, for any reader
    # One vote an hour per visitor: the first visitor's next match takes none from them.
    again = played(matches, "baseline:naive", "baseline:greedy", env_url, mode="named", visitor="ip:192.0.2.1")
    assert again.concluded.wait(WAIT_S)
    with pytest.raises(VoteRefused, match="voted 1 times in the last hour"):
        matches.vote(again.match_id, "a", visitor=first)
    assert again.row["votes"] == {"a": 0, "b": 0, "tie": 0, "both_bad": 0}
    with pytest.raises(VoteRefused, match="closed"):
        matches.vote("0123456789ab", "a", visitor=first)


def test_a_match_counts_as_two_runs_and_a_refusal_starts_neither(arena):
    matches, _, env_url = arena
    me = "ip:203.0.113.5"
    alone = matches.runs.start(EpisodeRequest.of("baseline:greedy", TASK_ID, env_url=env_url, baseline_pace_s=2.0),
                               owner="page-1", visitor=me)
    with pytest.raises(CapacityError, match="starts 2 episodes at once, and you already have 1 episode running"):
        played(matches, "baseline:naive", "baseline:hasty", env_url, visitor=me)
    assert matches.runs._quota.used(me) == 1  # the refused pair took no slot
    assert took_a_turn(alone)
    assert matches.runs.stop(alone.episode_id, owner="page-1") and alone.wait_finished(WAIT_S)
    match = played(matches, "baseline:naive", "baseline:hasty", env_url, visitor=me)  # rollouts 2 and 3 of 3
    assert match.concluded.wait(WAIT_S) and match.row is not None
    with pytest.raises(CapacityError, match="saved 3 rollouts in the last hour"):
        played(matches, "baseline:naive", "baseline:hasty", env_url, visitor=me)
    assert matches.runs._quota.used(me) == 3


def test_stop_ends_both_for_its_starter_only_and_both_rollouts_are_kept(arena):
    matches, store, env_url = arena
    match = played(matches, "baseline:greedy", "baseline:hasty", env_url, pace=2.0)
    assert not matches.stop(match.match_id, owner="another-page")
    assert not matches.stop(match.match_id, token=match_stop_token("0123456789ab"))
    assert took_a_turn(*match.runs)
    assert matches.stop(match.match_id, token=match_stop_token(match.match_id))
    assert match.concluded.wait(WAIT_S)
    assert [store.load(run.episode_id)["end_reason"] for run in match.runs] == ["stopped", "stopped"]
    assert match.row is not None and not matches.stop(match.match_id, owner="page-1")  # over already


def test_a_match_whose_episodes_never_reached_a_server_has_no_row_and_takes_no_vote(arena):
    matches, _, _ = arena
    match = played(matches, "baseline:greedy", "baseline:hasty", f"http://127.0.0.1:{free_port()}")
    assert match.concluded.wait(WAIT_S)
    assert match.row is None and "side A's rollout was not kept" in match.problem
    assert list(matches.book.rows()) == []
    with pytest.raises(VoteRefused, match="not saved"):
        matches.vote(match.match_id, "a", visitor="ip:203.0.113.5")


def test_a_random_pair_is_two_different_models():
    pool = ["baseline:greedy", "baseline:greedy", "baseline:naive"]
    assert {frozenset(draw_pair(pool)) for _ in range(20)} == {frozenset({"baseline:greedy", "baseline:naive"})}
    assert {draw_pair(pool)[0] for _ in range(60)} == {"baseline:greedy", "baseline:naive"}  # either side
    with pytest.raises(ValueError, match="at least two"):
        draw_pair(["baseline:greedy", "baseline:greedy"])


def test_every_match_of_the_last_day_takes_votes_not_only_the_newest(tmp_path, env_url, monkeypatch):
    """Before, only the newest 256 matches took votes: 20 addresses starting 15 matches each closed a victim's
    ballot. Now a match past the newest `keep` keeps its ballot (its episodes' streams go) for a day."""
    with RolloutStore(tmp_path / "rollouts", writer_id="w1") as store:
        runs = RunRegistry(store.save, max_per_visitor=2)
        matches = MatchRegistry(runs, MatchBook(store.root, "w1"), keep=1)
        victims = played(matches, "baseline:greedy", "baseline:hasty", env_url, mode="random")
        assert victims.concluded.wait(WAIT_S)
        assert {r.episode_id for r in victims.runs} <= matches.withheld_episodes()
        for n in range(3):  # others' matches push it out of the newest
            other = played(matches, "baseline:naive", "baseline:hasty", env_url, visitor=f"ip:198.51.100.{n}")
            assert other.concluded.wait(WAIT_S)
        assert matches.get(victims.match_id) is None  # no longer held whole...
        assert {r.episode_id for r in victims.runs} <= matches.withheld_episodes()  # ...still blind
        counted = matches.vote(victims.match_id, "a", visitor="ip:203.0.113.9")  # ...and still taking votes
        assert counted.row["votes"]["a"] == 1 and matches.book.get(victims.match_id)["votes"]["a"] == 1
        with pytest.raises(VoteRefused, match="already voted"):
            matches.vote(victims.match_id, "b", visitor="ip:203.0.113.9")
        assert not {r.episode_id for r in victims.runs} & matches.withheld_episodes()  # decided: public
        later = time.time() + BALLOT_S + 1
        monkeypatch.setattr("live.match_runs.time.time", lambda: later)
        with pytest.raises(VoteRefused, match="Voting on this match is closed"):  # a day on, the ballot closes
            matches.vote(victims.match_id, "b", visitor="ip:203.0.113.10")


def test_a_random_sides_record_is_withheld_from_the_moment_it_is_saved(tmp_path, env_url, monkeypatch):
    """Before, the match was registered after both episodes had started: a side that ended in that moment was
    saved (and could be pushed or shown) while `withheld_episodes` did not name it yet."""
    with RolloutStore(tmp_path / "rollouts", writer_id="w1") as store:
        saving = threading.Event()
        withheld_at_save: dict[str, bool] = {}

        def save(record):  # what the pusher and every door would have been told as the record landed
            saving.set()
            withheld_at_save[record["episode_id"]] = record["episode_id"] in matches.withheld_episodes()
            return store.save(record)

        runs = RunRegistry(save, max_per_visitor=2)
        start_group = runs.start_group

        def slow_start_group(*args, **kwargs):  # a side ends before the start returns
            started = start_group(*args, **kwargs)
            assert saving.wait(WAIT_S)
            return started

        monkeypatch.setattr(runs, "start_group", slow_start_group)
        matches = MatchRegistry(runs, MatchBook(store.root, "w1"))
        match = played(matches, "baseline:naive", "baseline:hasty", env_url, mode="random")
        assert match.concluded.wait(WAIT_S) and match.row is not None
        assert withheld_at_save == {run.episode_id: True for run in match.runs}
