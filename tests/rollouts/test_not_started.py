"""Nothing that did not start is a rollout (rollouts.record.STARTED_SQL, the one rule): an episode that ended
before its player's first turn is never saved, never recovered from the crash journal, and the rows an older
version saved of such episodes (a mistyped baseline, a task the server refused) are left out of Browse's list, its
choices, the board, the heatmap and the arena ratings."""

from __future__ import annotations

import pytest

from agent.loop import run_episode, stream_episode
from agent.request import EpisodeRequest
from agent.spec import SpecError
from berth_env import load_pack
from rollouts.archive import Archive
from rollouts.filters import Filters
from rollouts.jsonio import append_line, atomic_write, encode_record, json_line
from rollouts.layout import index_rel, record_rel
from rollouts.schema import index_row
from rollouts.store import NotStarted, RolloutStore
from testkit.tasks import TASK_ID

OTHER_TASK = next(t["task_id"] for t in load_pack().split("eval") if t["task_id"] != TASK_ID)


def _saved_as_an_older_version_did(root, record: dict) -> None:
    """The record and its index row, written the way the store wrote every record before this rule."""
    rel = record_rel(record)
    atomic_write(root / rel, encode_record(record))
    append_line(root / index_rel(rel.split("/")[1], "0ldwr1te"), json_line(index_row(record, rel)))


def test_a_record_that_ended_before_its_first_turn_is_refused_and_nothing_is_written(tmp_path, env_url):
    typo = run_episode(EpisodeRequest.of("baseline:greedy", "dock-99Z-nope-0", env_url=env_url))  # the server refuses the task
    assert typo["end_reason"] == "error" and typo["turns"] == 0
    with RolloutStore(tmp_path / "rollouts") as store:
        with pytest.raises(NotStarted, match="ended before its first turn"):
            store.save(typo)
        assert store.rows() == [] and not list(store.root.glob("rollouts/**/*.json"))
        assert not list(store.root.glob("index/**/*.jsonl"))
        played = run_episode(EpisodeRequest.of("baseline:greedy", TASK_ID, env_url=env_url))
        store.save(played)  # one that took a turn is a rollout as ever
        assert [r["episode_id"] for r in store.rows()] == [played["episode_id"]]


def test_a_journal_entry_that_died_before_its_first_turn_is_not_recovered(tmp_path, env_url):
    root = tmp_path / "rollouts"
    dead = RolloutStore(root, writer_id="dead")
    journal = dead.running
    # What the loop journals as an episode opens: the record with the rules and the situation, no turn yet.
    events = stream_episode(EpisodeRequest.of("baseline:greedy", TASK_ID, env_url=env_url),
                            progress=lambda record: journal.write(record, force=True))
    opened = next(e for e in events if e["type"] == "episode_started")
    # And one that had taken its first turn when the process died.
    turned = stream_episode(EpisodeRequest.of("baseline:naive", TASK_ID, env_url=env_url),
                            progress=lambda record: journal.write(record, force=True))
    turned_id = next(e for e in turned if e["type"] == "episode_started")["episode_id"]
    next(e for e in turned if e["type"] == "turn_finished")  # journalled with its turn as the event went out
    journal.close()  # as the kernel does when the process dies
    assert sorted(journal.running()) == sorted([opened["episode_id"], turned_id])
    with RolloutStore(root, writer_id="next") as store:
        assert store.load(opened["episode_id"]) is None
        assert store.load(turned_id)["end_reason"] == "interrupted"
        assert [r["episode_id"] for r in store.rows()] == [turned_id]
        assert store.running.running() == []  # the entry is gone, not left for the start after
    assert not list(root.glob(".set-aside/*"))
    events.close()
    turned.close()
    dead.close()


def test_stored_typo_rollouts_are_left_out_of_browse_the_board_and_the_ratings(tmp_path, env_url):
    root = tmp_path / "rollouts"
    with RolloutStore(root) as store:
        played = [run_episode(EpisodeRequest.of(model, task, env_url=env_url)) for model in ("baseline:greedy", "baseline:naive")
                  for task in (TASK_ID, OTHER_TASK)]
        for record in played:
            store.save(record)
    with pytest.raises(SpecError, match="unknown baseline 'smart'"):  # no record at all now: the request refuses it
        EpisodeRequest.of("baseline:smart", TASK_ID, env_url=env_url)
    typo = run_episode(EpisodeRequest.of("baseline:greedy", "dock-99Z-nope-0", env_url=env_url))
    # What an older loop recorded for a mistyped spec: the episode's record with the error, no turn taken.
    smart = {**run_episode(EpisodeRequest.of("baseline:greedy", "dock-99Z-nope-0", env_url=env_url)),
             "model": "baseline:smart", "task_id": TASK_ID,
             "errors": ["SpecError: unknown baseline 'smart': the baselines are baseline:greedy, ..."]}
    typos = [smart, typo]
    assert [t["end_reason"] for t in typos] == ["error", "error"] and all(t["turns"] == 0 for t in typos)
    for record in typos:
        _saved_as_an_older_version_did(root, record)

    archive = Archive.of_folder(root)
    rows, total, _, _ = archive.query(Filters())
    assert sorted(rows.column("episode_id").to_pylist()) == sorted(r["episode_id"] for r in played)
    assert total == 4
    assert archive.options()["model"] == ["baseline:greedy", "baseline:naive"]
    assert "dock-99Z-nope-0" not in archive.options()["task"]
    board = {line["model"]: line for line in archive.board(Filters())}
    assert set(board) == {"baseline:greedy", "baseline:naive"}
    greedy = [r["reward"] for r in played if r["model"] == "baseline:greedy"]
    assert board["baseline:greedy"]["n"] == 2
    assert board["baseline:greedy"]["mean_reward"] == pytest.approx(sum(greedy) / 2)
    assert board["baseline:greedy"]["feasible_pct"] == 100.0
    assert {line.model for line in archive.ratings(Filters())} == {"baseline:greedy", "baseline:naive"}
    heatmap = archive.heatmap(Filters())
    assert set(heatmap.models) == set(board)
    assert {task for _, task in heatmap.tasks} == {TASK_ID, OTHER_TASK}
