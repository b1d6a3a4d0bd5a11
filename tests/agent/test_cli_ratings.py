"""`python -m agent ratings`: the arena ratings of a folder, in JSON and Markdown, with the battles counted by hand.

Mean reward per task (two rollouts of greedy on t1 average to 0.5):
  t1: naive 0.2, greedy (0.4 + 0.6) / 2 = 0.5, X 0.5  -> greedy and X beat naive, greedy ties X
  t2: naive 0.3, greedy 0.6                           -> greedy beats naive
  t3: naive 0.4, X 0.1                                -> naive beats X
  t4-t7: naive, greedy and X all 0.5                  -> every pair ties, 3 battles a task
  t1: human 1.0 (one hand-played episode)             -> human beats the three
  t9: loner 1.0                                       -> no battle: no rating, and said so
So greedy: 12 battles, 2 wins, 1 loss, 9 ties; X: 12 battles, 1 win, 2 losses, 9 ties; naive: 13 battles, 1 win,
4 losses, 8 ties; human: 3 battles, 3 wins, on one task: too few to be rated (rollouts.sample_size.MIN_RANKED, 5),
so it is left out of the fit and the others' ratings are what they are without it.
"""

from __future__ import annotations

import json

import pytest

from batch.cli import main
from rollouts.ratings import ANCHOR
from rollouts.store import RolloutStore
from testkit.hand_records import hand_record
from tests.agent.test_cli_board import snapshot

X, GREEDY, LONER, HUMAN = "openai:gpt-x", "baseline:greedy", "anthropic:loner", "human"
KEYS = ["model", "rating", "ci_low", "ci_high", "rank", "battles", "wins", "losses", "ties", "note", "provisional"]


CELLS = [("t1", ANCHOR, 0.2), ("t1", GREEDY, 0.4), ("t1", GREEDY, 0.6), ("t1", X, 0.5), ("t2", ANCHOR, 0.3),
         ("t2", GREEDY, 0.6), ("t3", ANCHOR, 0.4), ("t3", X, 0.1), ("t9", LONER, 1.0),
         *[(f"t{k}", model, 0.5) for k in range(4, 8) for model in (ANCHOR, GREEDY, X)]]


def save(root, cells) -> None:
    with RolloutStore(root, writer_id="w1") as store:
        for k, (task, model, reward) in enumerate(cells):
            store.save(hand_record(f"r{k}", model=model, task_id=f"dock-{task}", reward=reward))


@pytest.fixture
def folder(tmp_path):
    save(tmp_path, [*CELLS, ("t1", HUMAN, 1.0)])
    return tmp_path


def test_ratings_json_counts_the_battles_of_every_shared_task_and_leaves_the_folder_as_it_was(folder, tmp_path,
                                                                                                 capsys):
    before = snapshot(folder)
    assert main(["ratings", "--dir", str(folder), "--json"]) == 0
    assert snapshot(folder) == before  # a command that reads leaves the folder byte for byte as it was
    items = json.loads(capsys.readouterr().out)
    assert all(list(item) == KEYS for item in items)
    assert all(item["provisional"] for item in items)  # every model here has fewer than 50 battles
    by_model = {item["model"]: item for item in items}
    counts = {m: (i["battles"], i["wins"], i["losses"], i["ties"]) for m, i in by_model.items()}
    assert counts == {GREEDY: (12, 2, 1, 9), X: (12, 1, 2, 9), ANCHOR: (13, 1, 4, 8), HUMAN: (3, 3, 0, 0),
                      LONER: (0, 0, 0, 0)}
    assert [item["model"] for item in items] == [GREEDY, X, ANCHOR, LONER, HUMAN]  # rated best first, then by name
    anchor = by_model[ANCHOR]
    assert anchor["rating"] == anchor["ci_low"] == anchor["ci_high"] == 1000.0
    assert by_model[GREEDY]["rating"] > by_model[X]["rating"] > 1000.0
    assert all(i["ci_low"] <= i["rating"] <= i["ci_high"] and i["rank"] >= 1 for i in items[:3])
    loner = by_model[LONER]
    assert loner["rating"] is loner["rank"] is None and loner["note"] == "no rating: it shares no task with another model"
    # One hand-played episode that beat everyone: no rating and no rank, said why, and no weight in the others'.
    human = by_model[HUMAN]
    assert human["rating"] is human["ci_low"] is human["rank"] is None
    assert human["note"] == "no rating: battles on 1 task; a rating needs at least 5 tasks shared with another model"
    without = tmp_path / "without-human"
    save(without, CELLS)
    assert main(["ratings", "--dir", str(without), "--json"]) == 0
    assert [i for i in json.loads(capsys.readouterr().out) if i["model"] in (GREEDY, X, ANCHOR)] == [
        {**i, "battles": i["battles"] - 1, "wins": i["wins"], "losses": i["losses"] - 1} for i in items[:3]]


def test_ratings_markdown_and_a_folder_without_rollouts(folder, tmp_path, capsys):
    assert main(["ratings", "--dir", str(folder)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| rank | model | rating (95% CI) | battles | wins | losses | ties |")
    assert f"| {GREEDY} | " in out and "| 1000 (1000-1000) provisional | 13 | 1 | 4 | 8 |" in out
    # The same notes as Browse's: the real anchor, who is rated, shared ranks in words, each unrated model and why.
    notes = out.split("\n\n", 1)[1]
    assert "scale: 1000 = baseline:naive, the anchor" in notes
    assert "a model is rated and ranked once it has battles on at least 5 tasks" in notes
    assert f"{LONER}: no rating: it shares no task with another model (0 battles)" in notes
    assert f"{HUMAN}: no rating: battles on 1 task; a rating needs at least 5 tasks" in notes
    assert [line.split(" | ")[0] for line in out.splitlines()[2:5]] == ["| 1"] * 3  # three intervals overlap
    assert (f"{GREEDY}, {X} and {ANCHOR} share rank 1: no rated model lies wholly above them, and their own "
            "intervals overlap, so the data cannot say which is ahead") in notes
    assert main(["ratings", "--dir", str(tmp_path / "nothing")]) == 2
    assert "no rollouts in" in capsys.readouterr().err
