"""`python -m agent explain <episode_id>`: a real rollout's gap to the optimum, ship by ship, from a folder that
is only read."""

from __future__ import annotations

import json

from batch.cli import main
from berth_env import load_pack
from rollouts.store import RolloutStore
from testkit.episodes import play
from testkit.tasks import TASK_ID


def saved(tmp_path, model: str, env_url: str) -> tuple[str, dict]:
    _, record = play(model, env_url)
    RolloutStore(tmp_path).save(record)
    return record["episode_id"], record


def test_a_naive_rollout_is_explained_ship_by_ship_and_the_shares_sum_to_its_gap(tmp_path, env_url, capsys):
    episode_id, record = saved(tmp_path, "baseline:naive", env_url)
    before = sorted((p.relative_to(tmp_path), p.stat().st_mtime_ns) for p in tmp_path.rglob("*") if p.is_file())
    assert main(["explain", episode_id, "--dir", str(tmp_path), "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    optimum = load_pack().get(TASK_ID)["reference"]["optimal_cost"]
    assert answer["feasible"] and answer["cost"] == record["final"]["grade"]["cost"]
    assert answer["gap"] == answer["cost"] - optimum > 0
    assert sum(ship["difference"] for ship in answer["ships"]) == answer["gap"]
    assert abs(sum(ship["share"] for ship in answer["ships"]) - 1) < 1e-9
    assert main(["explain", episode_id, "--dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    top = answer["ships"][0]
    assert f"a gap of {answer['gap']}" in text and f"| {top['ship']} {top['name']} |" in text
    after = sorted((p.relative_to(tmp_path), p.stat().st_mtime_ns) for p in tmp_path.rglob("*") if p.is_file())
    assert after == before  # a command that reads changes nothing on disk


def test_an_unknown_rollout_is_refused_with_a_message(tmp_path, env_url, capsys):
    saved(tmp_path, "baseline:greedy", env_url)
    assert main(["explain", "no-such-episode", "--dir", str(tmp_path)]) == 2
    assert "No rollout `no-such-episode`" in capsys.readouterr().err
