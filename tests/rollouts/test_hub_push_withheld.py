"""A withheld episode stays off the Hub until it is public (rollouts.withheld through rollouts.hub_push), with the
real huggingface_hub against testkit/fakehub.py: a random match's two records, traces, index rows and match row
are absent while nobody has voted or skipped, and arrive at the next timed push after the vote, the skip or the
ballot's day, each file once;
the rest of the folder goes up meanwhile; a restart pushes what an earlier run held back; a compaction never folds
a held row into a Parquet file that goes up."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from agent.request import EpisodeRequest
from live.match_runs import BALLOT_S, SKIP, MatchRegistry
from live.runs import RunRegistry
from rollouts import hub_push
from rollouts.matches import MatchBook
from testkit.records import make_records
from testkit.tasks import TASK_ID
from tests.rollouts.conftest import REPO
from tests.rollouts.test_hub_push import local_files, wait_for

WAIT_S = 60.0


def everything(root: Path) -> dict[str, bytes]:
    """The folder's dataset files: card, records, traces, JSONL and Parquet index files, match files."""
    paths = [*local_files(root)]
    paths += [p.relative_to(root).as_posix() for pattern in ("index/*/*.parquet", "matches/*/*.jsonl")
              for p in root.glob(pattern)]
    return {rel: (root / rel).read_bytes() for rel in paths}


def naming(files: dict[str, bytes], episode_ids) -> list[str]:
    """The files whose path or bytes name any of these episodes."""
    return sorted(rel for rel, data in files.items()
                  if any(e in rel or e.encode() in data for e in episode_ids))


def times_committed(hub) -> Counter:
    return Counter(path for commit in hub.commits(REPO) for path in commit.paths)


def pushed_once_but_rows(hub) -> bool:
    """Every record, trace and Parquet file went up once; only row files (index, matches) went more often."""
    return all(n == 1 for rel, n in times_committed(hub).items() if not rel.endswith(".jsonl")
               or rel.startswith("traces/"))


@pytest.mark.parametrize("decision", ["a", SKIP, "a day on"])
def test_a_random_match_reaches_the_hub_only_after_the_vote_or_the_skip(tmp_path, hub, open_store, env_url,
                                                                          monkeypatch, decision):
    store = open_store(tmp_path, push_every_s=0.3)  # the timer, not a flush, carries the released files up
    runs = RunRegistry(store.save, max_per_visitor=4)
    matches = MatchRegistry(runs, MatchBook(store.root, store.writer_id, on_write=store.notify))
    store.hold_back(matches.withheld_episodes)  # as viewer.context wires it
    def sides(*models: str) -> list[EpisodeRequest]:
        return [EpisodeRequest.of(model, TASK_ID, env_url=env_url) for model in models]

    hidden = matches.start(*sides("baseline:greedy", "baseline:naive"), mode="random", owner="page-1",
                           visitor="ip:203.0.113.5")
    named = matches.start(*sides("baseline:greedy", "baseline:hasty"), mode="named", owner="page-2",
                          visitor="ip:198.51.100.7")
    assert hidden.concluded.wait(WAIT_S) and named.concluded.wait(WAIT_S)
    assert hidden.row is not None and named.row is not None
    hidden_ids = [run.episode_id for run in hidden.runs]
    named_ids = [run.episode_id for run in named.runs]
    local = everything(tmp_path)
    # Both records, both traces, one index file and one match file name the hidden pair in the folder...
    assert len(naming(local, hidden_ids)) == 6
    assert store.flush(timeout=30)
    on_hub = hub.files(REPO)
    assert naming(on_hub, hidden_ids) == []  # ...and nothing on the Hub does, not even a row
    assert hidden.match_id.encode() not in b"".join(on_hub.values())
    # The rest went up: the named match's records, traces, index rows and match row.
    assert len(naming(on_hub, named_ids)) == 6
    assert set(on_hub) == set(local) - {rel for rel in naming(local, hidden_ids) if not rel.endswith("w.jsonl")}
    assert store.status()["waiting"] == 2  # the two held records

    if decision == "a day on":  # nobody voted: the ballot closes and the pair is public (the rule's day)
        later = time.time() + BALLOT_S + 1
        monkeypatch.setattr("live.match_runs.time.time", lambda: later)
    else:
        matches.vote(hidden.match_id, decision, visitor="ip:192.0.2.9")
    assert not matches.withheld_episodes()
    # No save, no flush: the next timed push takes what was held.
    assert wait_for(lambda: hub.files(REPO) == everything(tmp_path) and store.status()["waiting"] == 0,
                    timeout=30), sorted(set(everything(tmp_path)) - set(hub.files(REPO)))
    assert pushed_once_but_rows(hub)
    commits = len(hub.commits(REPO))
    assert store.flush(timeout=30) and len(hub.commits(REPO)) == commits  # nothing left: nothing pushed again


def test_a_restart_pushes_what_an_earlier_run_held_back(tmp_path, hub, open_store):
    records = make_records(4, seed=31, started="2026-11-27T10:00:00Z")  # one index file: sent without a row
    held = {records[1]["episode_id"]}
    first = open_store(tmp_path, writer_id="before")
    first.hold_back(lambda: held)
    for record in records:
        first.save(record)
    assert first.flush(timeout=30)
    on_hub = hub.files(REPO)
    assert naming(on_hub, held) == [] and len(naming(everything(tmp_path), held)) == 3  # record, trace, index row
    assert len([rel for rel in on_hub if rel.startswith("rollouts/")]) == 3
    assert on_hub["index/2026-11-27/before.jsonl"].count(b"\n") == 3
    first.close()

    # After a restart nothing is withheld any more (the match registry starts empty: its ballots are gone).
    second = open_store(tmp_path, writer_id="after")
    # The backlog goes out without a flush.
    assert wait_for(lambda: hub.files(REPO) == everything(tmp_path) and second.status()["waiting"] == 0)
    assert pushed_once_but_rows(hub)


def test_a_held_row_is_never_folded_into_a_parquet_file_that_goes_up(tmp_path, hub, open_store, monkeypatch):
    monkeypatch.setattr(hub_push, "COMPACT_OVER_BYTES", 1)  # every push folds every JSONL index file it may
    records = make_records(2, seed=32, started="2026-11-27T10:00:00Z") + \
        make_records(1, seed=33, started="2026-11-28T10:00:00Z")
    held = {records[0]["episode_id"]}
    store = open_store(tmp_path)
    store.hold_back(lambda: held)
    for record in records:
        store.save(record)
    assert store.flush(timeout=30)
    index = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("index/*/*"))
    # The file naming a held episode is left in JSONL (sent without that row); the other day's is folded.
    assert index == ["index/2026-11-27/w.jsonl", "index/2026-11-28/w.parquet"]
    assert naming(hub.files(REPO), held) == []
    assert records[1]["episode_id"].encode() in hub.files(REPO)["index/2026-11-27/w.jsonl"]
    assert len([rel for rel in hub.files(REPO) if rel.startswith("rollouts/")]) == 2

    held.clear()  # the vote
    assert store.flush(timeout=30)
    index = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("index/*/*"))
    assert index == ["index/2026-11-27/w.parquet", "index/2026-11-28/w.parquet"]  # folded now, and sent
    assert hub.files(REPO) == everything(tmp_path)  # the JSONL copy deleted on the Hub, its rows in the Parquet
    assert len(naming(hub.files(REPO), {records[0]["episode_id"]})) == 3
    assert pushed_once_but_rows(hub)
