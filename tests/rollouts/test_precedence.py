"""One precedence rule, through every reader: a rollout whose index row is in both a JSONL and a Parquet file (a
compaction killed between writing the Parquet file and rewriting the JSONL) counts once, and the JSONL copy wins, so
an annotation made afterwards (it edits the JSONL copy) is what the store, Browse (its reader and its API), the CLI
board and a Hub source all see."""

from __future__ import annotations

import json

from gradio_client import Client

from batch.cli import main as agent_main
from rollouts.archive import Archive
from rollouts.index.compaction import compact
from rollouts.sources.hub import HubSource
from rollouts.store import RolloutStore
from testkit.app import launched_app
from testkit.fakehub import running_fakehub
from testkit.published import folder_files, publish
from testkit.records import make_record

DAY = "2026-11-20"
MODEL = "baseline:greedy"
TOKEN = "hf_test_precedence"


def killed_compaction(root, count: int = 4) -> str:
    """Rollouts saved, folded into Parquet by a compaction killed before it rewrote the JSONL file; the id of one
    whose JSONL copy was then edited (annotated, and its reward changed so every board shows the difference)."""
    with RolloutStore(root, writer_id="w1") as store:
        for i in range(count):
            store.save(make_record(seed=40 + i, episode_id=f"prec{i}", model=MODEL, reward=0.25,
                                   started=f"{DAY}T0{i}:00:00Z"))
    jsonl = root / "index" / DAY / "w1.jsonl"
    lines = jsonl.read_bytes()
    assert compact(root).rows == count and not jsonl.exists()
    jsonl.write_bytes(lines)  # the JSONL rewrite the kill prevented: every row is in both files now
    with RolloutStore(root, writer_id="w2") as store:
        assert store.annotate("regrade", {"prec0": {"grader_version": "2", "reward": 0.5, "grade": {},
                                                    "checks": []}}) == 1
    edited = [json.loads(line) for line in jsonl.read_bytes().splitlines()]
    assert edited[0]["episode_id"] == "prec0" and edited[0]["regrade_reward"] == 0.5  # the JSONL copy, edited
    edited[0]["reward"] = 1.0
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in edited))
    return "prec0"


def test_the_jsonl_copy_wins_in_every_reader(tmp_path, capsys):
    root = tmp_path / "rollouts"
    edited = killed_compaction(root)
    mean = (1.0 + 3 * 0.25) / 4

    with RolloutStore(root, writer_id="w3") as store:  # the store's ledger
        [row] = store.find(episode_id=edited)
        assert (row["reward"], row["regrade_reward"]) == (1.0, 0.5) and len(store.rows()) == 4

    archive = Archive.of_folder(root)  # Browse's reader
    assert archive.total() == 4 and archive.row(edited)["regrade_reward"] == 0.5
    assert archive.row(edited)["reward"] == 1.0

    assert agent_main(["board", "--dir", str(root), "--json"]) == 0  # the CLI board
    [line] = [json.loads(text) for text in capsys.readouterr().out.splitlines()]
    assert (line["n"], line["mean_reward"]) == (4, mean)

    with running_fakehub(token=TOKEN) as hub:  # a Hub source, over the same files pushed
        publish(hub.url, "team/precedence", folder_files(root), token=TOKEN)
        loaded = HubSource("team/precedence", endpoint=hub.url, cache_dir=tmp_path / "cache").load()
        rows = {r["episode_id"]: r for r in loaded.table.to_pylist()}
        assert len(rows) == 4 and rows[edited]["reward"] == 1.0 and rows[edited]["regrade_reward"] == 0.5


def test_browses_api_shows_the_jsonl_copy(tmp_path):
    root = tmp_path / "rollouts"
    edited = killed_compaction(root)
    with launched_app(tmp_path) as app:
        client = Client(app.url, verbose=False)
        answer = client.predict(api_name="/browse_rollouts", page_size=50)
        rows = {r["episode_id"]: r for r in answer["rows"]}
        assert answer["total"] == 4 and rows[edited]["reward"] == 1.0
        [line] = client.predict(api_name="/browse_leaderboard")
        assert (line["n"], line["mean_reward"]) == (4, (1.0 + 3 * 0.25) / 4)
