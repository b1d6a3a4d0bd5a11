"""`python -m agent ratings`: the arena ratings of a folder, in JSON and Markdown, with the battles counted by hand.

Mean reward per task (two rollouts of greedy on t1 average to 0.5):
  t1: naive 0.2, greedy (0.4 + 0.6) / 2 = 0.5, X 0.5  -> greedy and X beat naive, greedy ties X
  t2: naive 0.3, greedy 0.6                           -> greedy beats naive
  t3: naive 0.4, X 0.1                                -> naive beats X
  t9: loner 1.0                                       -> no battle: no rating, and said so
So greedy: 3 battles, 2 wins, 1 tie; X: 3 battles, 1 win, 1 loss, 1 tie; naive: 4 battles, 1 win, 3 losses.
"""

from __future__ import annotations

import json

import pytest

from agent.cli import main
from rollouts.ratings import ANCHOR
from rollouts.store import RolloutStore
from tests.agent.test_cli_board import snapshot
from tests.hand_records import hand_record

X, GREEDY, LONER = "openai:gpt-x", "baseline:greedy", "anthropic:loner"
KEYS = ["model", "rating", "ci_low", "ci_high", "rank", "battles", "wins", "losses", "ties", "note"]


@pytest.fixture
def folder(tmp_path):
    cells = [("t1", ANCHOR, 0.2), ("t1", GREEDY, 0.4), ("t1", GREEDY, 0.6), ("t1", X, 0.5), ("t2", ANCHOR, 0.3),
             ("t2", GREEDY, 0.6), ("t3", ANCHOR, 0.4), ("t3", X, 0.1), ("t9", LONER, 1.0)]
    with RolloutStore(tmp_path, writer_id="w1") as store:
        for k, (task, model, reward) in enumerate(cells):
            store.save(hand_record(f"r{k}", model=model, task_id=f"dock-{task}", reward=reward))
    return tmp_path


def test_ratings_json_counts_the_battles_of_every_shared_task_and_leaves_the_folder_as_it_was(folder, capsys):
    before = snapshot(folder)
    assert main(["ratings", "--dir", str(folder), "--json"]) == 0
    assert snapshot(folder) == before  # a command that reads leaves the folder byte for byte as it was
    items = json.loads(capsys.readouterr().out)
    assert all(list(item) == KEYS for item in items)
    by_model = {item["model"]: item for item in items}
    counts = {m: (i["battles"], i["wins"], i["losses"], i["ties"]) for m, i in by_model.items()}
    assert counts == {GREEDY: (3, 2, 0, 1), X: (3, 1, 1, 1), ANCHOR: (4, 1, 3, 0), LONER: (0, 0, 0, 0)}
    assert [item["model"] for item in items] == [GREEDY, X, ANCHOR, LONER]  # rated best first, then the rest
    anchor = by_model[ANCHOR]
    assert anchor["rating"] == anchor["ci_low"] == anchor["ci_high"] == 1000.0
    assert by_model[GREEDY]["rating"] > by_model[X]["rating"] > 1000.0
    assert all(i["ci_low"] <= i["rating"] <= i["ci_high"] and i["rank"] >= 1 for i in items[:3])
    loner = by_model[LONER]
    assert loner["rating"] is loner["rank"] is None and loner["note"] == "no rating: it shares no task with another model"


def test_ratings_markdown_and_a_folder_without_rollouts(folder, tmp_path, capsys):
    assert main(["ratings", "--dir", str(folder)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| rank | model | rating (95% CI) | battles | wins | losses | ties |")
    assert f"| {GREEDY} | " in out and "| 1000 (1000-1000) | 4 | 1 | 3 | 0 |" in out
    assert f"{LONER}: no rating: it shares no task with another model (0 battles)" in out
    assert main(["ratings", "--dir", str(tmp_path / "nothing")]) == 2
    assert "no rollouts in" in capsys.readouterr().err
