"""Arena matches as data (rollouts.matches): the row's schema, its path, the MatchBook (append, votes counted under
the file's lock, reads), the card's `matches` config read by `datasets`, and the pusher taking match files up."""

from __future__ import annotations

import json
import threading

import datasets
import pytest

from rollouts.layout import match_rel
from rollouts.matches import (
    MatchBook,
    MatchError,
    match_problem,
    match_row,
    no_votes,
    validate_match,
    vote_tally,
)
from rollouts.store import RolloutStore
from testkit.fakehub import running_fakehub
from testkit.records import make_record

TASK = "dock-24B-w06x1-busy-0"


def pair(seed: int = 1, **overrides) -> tuple[dict, dict]:
    a = make_record(seed=seed, task_id=TASK, model="openai:gpt-5.5", end_reason="submitted",
                    started="2026-11-29T10:15:00Z", **overrides)
    b = make_record(seed=seed + 1, task_id=TASK, model="baseline:greedy", end_reason="submitted",
                    started="2026-11-29T10:15:02Z")
    return a, b


def a_match(match_id: str = "m0000000001", **changes) -> dict:
    a, b = pair()
    return {**match_row(a, b, mode="random", match_id=match_id), **changes}


def test_match_files_follow_the_index_layout():
    assert match_rel("2026-11-29", "w-1") == "matches/2026-11-29/w-1.jsonl"
    for day, writer in (("2026-11-29", "../x"), ("29-11-2026", "w"), ("2026-11-29", ""), ("2026-11-29/..", "w")):
        with pytest.raises(ValueError):
            match_rel(day, writer)


def test_a_match_row_from_two_records_carries_rewards_verdict_and_no_votes():
    a, b = pair()
    a.update(reward=0.9)
    b.update(reward=0.4)
    row = match_row(a, b, mode="named")
    assert list(row) == ["match_id", "started", "task_id", "mode", "model_a", "model_b", "episode_a", "episode_b",
                         "reward_a", "reward_b", "winner", "votes"]
    assert row["started"] == "2026-11-29T10:15:00Z" and row["task_id"] == TASK and row["mode"] == "named"
    assert (row["model_a"], row["episode_a"], row["reward_a"]) == ("openai:gpt-5.5", a["episode_id"], 0.9)
    assert row["winner"] == "a" and row["votes"] == {"a": 0, "b": 0, "tie": 0, "both_bad": 0}
    assert match_row(b, a, mode="random")["winner"] == "b"
    other = make_record(seed=9, task_id="dock-36A-w35x3-extreme-0")
    with pytest.raises(MatchError, match="one task"):
        match_row(a, other, mode="random")


@pytest.mark.parametrize(("change", "field"), [
    ({"match_id": "../etc"}, "match_id"),
    ({"episode_b": "x y"}, "episode_b"),
    ({"mode": "anonymous"}, "mode"),
    ({"winner": "both"}, "winner"),
    ({"votes": {"a": -1, "b": 0, "tie": 0, "both_bad": 0}}, "votes.a"),
    ({"votes": {"a": True, "b": 0, "tie": 0, "both_bad": 0}}, "votes.a"),
    ({"votes": {"a": 0, "b": 0, "tie": 0}}, "votes.both_bad"),
    ({"votes": {"a": 10**30, "b": 0, "tie": 0, "both_bad": 0}}, "votes.a"),  # more than any match's voters
    ({"votes": {"a": 0, "b": 0, "tie": 0, "both_bad": 0, "meh": 1}}, "votes.meh"),
    ({"reward_a": float("nan")}, "reward_a"),
    ({"reward_a": "0.9"}, "reward_a"),
    ({"started": "yesterday"}, "started"),
    ({"model_a": ""}, "model_a"),
    ({"judge": "x"}, "judge"),
])
def test_an_unsound_row_is_refused_naming_the_field(change, field):
    row = {**a_match(), **change}
    problem = match_problem(row)
    assert problem is not None and problem.startswith(field), problem
    with pytest.raises(MatchError):
        validate_match(row)


def test_the_same_episode_on_both_sides_is_refused_and_started_is_made_canonical():
    row = a_match()
    assert "same one" in match_problem({**row, "episode_b": row["episode_a"]})
    assert validate_match({**row, "started": "2026-11-29T11:15:00+01:00"})["started"] == "2026-11-29T10:15:00Z"
    assert match_problem({**row, "reward_a": None, "reward_b": 1}) is None


def test_the_book_appends_reads_and_counts_votes(tmp_path):
    written: list[str] = []
    book = MatchBook(tmp_path, "w1", on_write=written.append)
    row = book.add({**a_match(), "votes": {"both_bad": 2}})  # missing choices count 0
    assert row["votes"] == {"a": 0, "b": 0, "tie": 0, "both_bad": 2}
    second = book.add(a_match("m0000000002", started="2026-11-30T00:00:01Z"))
    assert written == ["matches/2026-11-29/w1.jsonl", "matches/2026-11-30/w1.jsonl"]
    assert json.loads((tmp_path / written[0]).read_text()) == row
    assert book.vote(row["match_id"], "a")["votes"] == {"a": 1, "b": 0, "tie": 0, "both_bad": 2}
    assert book.vote(row["match_id"], "tie")["votes"]["tie"] == 1
    assert written[-1] == "matches/2026-11-29/w1.jsonl"
    assert book.get(row["match_id"])["votes"] == {"a": 1, "b": 0, "tie": 1, "both_bad": 2}
    assert book.get(second["match_id"]) == second and book.get("nope") is None
    assert [r["match_id"] for r in book.rows()] == [row["match_id"], second["match_id"]]
    assert len((tmp_path / written[0]).read_text().splitlines()) == 1  # a vote rewrites the row, no new one
    with pytest.raises(ValueError, match="a vote is one of"):
        book.vote(row["match_id"], "c")
    with pytest.raises(KeyError):
        book.vote("m0000000099", "a")
    with pytest.raises(MatchError):
        book.add({**a_match(), "mode": "blind"})


def test_one_match_id_is_one_match_whatever_rows_are_added_after_it(tmp_path):
    book = MatchBook(tmp_path, "w1")
    row = book.add(a_match())
    with pytest.raises(MatchError, match="a match already in this folder"):
        book.add(a_match())  # the book writes no id twice
    day = row["started"][:10]
    forged = {**row, "model_a": "forged:model", "votes": {**row["votes"], "a": 999_999}}
    (tmp_path / match_rel(day, "zz")).write_text(json.dumps(forged) + "\n")  # another file, later in path order
    with (tmp_path / match_rel(day, "w1")).open("a") as own:  # the same id again in the book's own file
        own.write(json.dumps(forged) + "\n")
    (tmp_path / match_rel("2026-12-01", "aa")).parent.mkdir(parents=True)
    (tmp_path / match_rel("2026-12-01", "aa")).write_text(json.dumps(forged) + "\n")  # not its own day's folder
    for reader in (book, MatchBook(tmp_path, "w2")):  # this process, and a fresh one after a restart
        assert reader.rows() == [row] and reader.get(row["match_id"]) == row
        assert vote_tally(reader.rows())["openai:gpt-5.5"]["matches"] == 1  # counted once
    assert MatchBook(tmp_path, "w2").vote(row["match_id"], "b")["votes"]["b"] == 1
    assert book.get(row["match_id"])["model_a"] == "openai:gpt-5.5"


def test_votes_from_many_threads_and_another_writer_are_all_counted_and_no_appended_row_is_lost(tmp_path):
    mine, theirs = MatchBook(tmp_path, "w1"), MatchBook(tmp_path, "w2")
    target = mine.add(a_match("target00001"))["match_id"]
    choices = ["a", "b", "tie", "both_bad"] * 10

    def vote(book: MatchBook, picks: list[str]) -> None:
        for choice in picks:
            book.vote(target, choice)

    def append() -> None:
        for k in range(20):
            mine.add(a_match(f"more{k:07d}"))

    threads = [threading.Thread(target=vote, args=(book, choices)) for book in (mine, theirs, MatchBook(tmp_path, "w3"))]
    threads.append(threading.Thread(target=append))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert theirs.get(target)["votes"] == {"a": 30, "b": 30, "tie": 30, "both_bad": 30}
    assert len(mine.rows()) == 21 and not list(tmp_path.glob("matches/*/w2.jsonl"))  # voting writes no file


def test_unsound_and_torn_lines_are_left_out_when_reading(tmp_path):
    book = MatchBook(tmp_path, "w1")
    row = book.add(a_match())
    path = tmp_path / match_rel("2026-11-29", "w1")
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({**row, "match_id": "extra000001", "judge": 1}) + "\n")
        f.write(json.dumps({**row, "match_id": "torn0000001"})[:40])
    assert [r["match_id"] for r in book.rows()] == [row["match_id"]]
    assert book.vote(row["match_id"], "b")["votes"]["b"] == 1
    assert path.read_bytes().endswith(json.dumps({**row, "match_id": "torn0000001"})[:40].encode())  # kept as it was


def test_load_dataset_reads_the_matches_config_beside_the_others(tmp_path):
    store = RolloutStore(tmp_path, writer_id="w1")
    a, b = pair(seed=5)
    store.save(a)
    store.save(b)
    book = MatchBook(tmp_path, store.writer_id)
    row = book.add(match_row(a, b, mode="random"))
    book.vote(row["match_id"], "both_bad")
    cache = str(tmp_path / ".cache")
    matches = datasets.load_dataset(str(tmp_path), "matches", split="train", cache_dir=cache)
    assert len(matches) == 1 and matches[0]["votes"] == {"a": 0, "b": 0, "tie": 0, "both_bad": 1}
    assert matches.features["votes"]["tie"] == datasets.Value("int64")
    assert matches.features["started"] == datasets.Value("timestamp[us, tz=UTC]")
    assert matches[0]["episode_b"] == b["episode_id"] and matches[0]["reward_a"] == pytest.approx(a["reward"])
    for config in ("index", "rollouts"):
        loaded = datasets.load_dataset(str(tmp_path), config, split="train", cache_dir=cache)
        assert sorted(loaded["episode_id"]) == sorted([a["episode_id"], b["episode_id"]])
    store.close()


def test_the_pusher_takes_match_files_up_with_the_records_and_again_after_a_vote(tmp_path):
    token, repo = "hf_test_matches", "arena/matches"
    with running_fakehub(token=token) as hub:
        store = RolloutStore(tmp_path, writer_id="w1", dataset=repo, token=token, endpoint=hub.url,
                             push_every_s=3600, push_every_n=1000, retry_base_s=0.05, retry_max_s=0.4)
        try:
            a, b = pair(seed=7)
            store.save(a)
            store.save(b)
            book = MatchBook(tmp_path, store.writer_id)
            row = book.add(match_row(a, b, mode="named"))
            rel = match_rel("2026-11-29", "w1")
            assert store.flush(timeout=30)
            files = hub.files(repo)
            assert files[rel] == (tmp_path / rel).read_bytes() and f"rollouts/2026-11-29/{a['episode_id']}.json" in files
            book.vote(row["match_id"], "a")
            assert store.flush(timeout=30)
            assert json.loads(hub.files(repo)[rel])["votes"] == {**no_votes(), "a": 1}
        finally:
            store.close()
