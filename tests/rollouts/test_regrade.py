"""`python -m agent regrade`: records graded by the real grader, a few tampered; exactly those are found.

Each record is built on a task of the bundled pack, its checks answered by `berth_env.evaluate` and its final plan
graded by `berth_env.grade`, so its stored grade is what the grader says. Then single fields are tampered with,
as a grader change would make them disagree, and the regrade must list exactly those.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import datasets
import pytest

from batch.cli import main
from batch.cli_regrade import GRADER
from berth_env import GRADER_VERSION, PlanError, evaluate, grade, load_pack
from rollouts.store import RolloutStore
from testkit.fakehub import running_fakehub
from testkit.published import publish

ROOT = Path(__file__).resolve().parents[2]
DAY = "2026-11-26"
TOKEN = "hf_test_regrade"


def graded_record(episode_id: str, task_id: str, final_plan, check_plans=(), *, model="anthropic:claude-sonnet-5-5"):
    """A record whose every answer comes from the grader itself."""
    task = load_pack().get(task_id)
    steps = []
    for turn, plan in enumerate(check_plans, start=1):
        try:
            result = evaluate(task, plan)
        except PlanError as err:
            result = {"error": err.message}
        steps.append({"turn": turn, "tool": "check_plan", "plan": plan, "result": result})
    final = {"submitted": False, "plan": None, "grade": None, "rubric": None}
    reward = 0.0
    if final_plan is not None:
        graded = grade(task, final_plan)
        steps.append({"turn": len(steps) + 1, "tool": "submit_plan", "plan": final_plan,
                      "result": {"submitted": True, "feasible": graded["feasible"], "reward": graded["reward"]}})
        final = {"submitted": True, "plan": final_plan, "grade": graded, "rubric": None}
        reward = graded["reward"]
    return {
        "schema_version": 1, "episode_id": episode_id, "run": "regrade-test", "source": "cli", "model": model,
        "task_id": task_id, "task": {"split": "eval", "difficulty": task["difficulty"], "quay": task["quay"],
                                     "ships": len(task["ships"]),
                                     "optimal_cost": task["reference"]["optimal_cost"],
                                     "naive_cost": task["reference"]["naive_cost"]},
        "env_url": "embedded", "limits": {"max_turns": 12, "max_tokens": 24000, "wall_clock_s": 1800},
        "started": f"{DAY}T09:00:00Z", "seconds": 30.0,
        "messages": [{"role": "system", "content": "rules"}, {"role": "user", "content": "situation"}],
        "steps": steps, "final": final, "reward": reward, "usage": {"input_tokens": 1000, "output_tokens": 100},
        "turns": max(len(steps), 1), "end_reason": "submitted" if final_plan is not None else "turn_limit", "errors": [],
        "app_version": "0.1.0",
    }


def plans(task_id: str) -> dict:
    reference = load_pack().get(task_id)["reference"]
    optimal, naive = reference["optimal_plan"], reference["naive_plan"]
    return {"optimal": optimal, "naive": naive, "missing_a_ship": optimal[:-1], "prose": "ship 1 first, please"}


def tampered_records() -> tuple[list[dict], dict[str, set[str]]]:
    """Records, and which ids must show up where: flipped on reward, on feasibility, on checked plans alone."""
    a, b = (task["task_id"] for task in load_pack().tasks[:2])
    pa, pb = plans(a), plans(b)
    sound = [graded_record("sound-optimal", a, pa["optimal"], [pa["naive"], pa["missing_a_ship"], pa["prose"]]),
             graded_record("sound-naive", b, pb["naive"], [pb["optimal"]]),
             graded_record("sound-infeasible", a, pa["missing_a_ship"]),
             graded_record("sound-no-submit", b, None, [pb["naive"]])]
    hair = graded_record("hair-width", a, pa["optimal"])
    hair["reward"] += 1e-12  # inside the tolerance: the same reward
    reward = graded_record("reward-moved", b, pb["naive"], [pb["naive"]])
    reward["reward"] = round(reward["reward"] + 0.01, 6)
    verdict = graded_record("verdict-flipped", a, pa["missing_a_ship"])
    verdict["final"]["grade"]["feasible"] = True
    unsubmitted = graded_record("paid-without-submit", a, None)
    unsubmitted["reward"] = 0.4
    check = graded_record("check-cost-moved", b, pb["optimal"], [pb["naive"], pb["optimal"]])
    check["steps"][1]["result"]["cost"] += 5
    check_verdict = graded_record("check-verdict-flipped", a, pa["optimal"], [pa["missing_a_ship"]])
    check_verdict["steps"][0]["result"]["feasible"] = True
    unknown = graded_record("unknown-task", a, pa["optimal"])
    unknown["task_id"] = "dock-99Z-w01x1-busy-0"
    records = [*sound, hair, reward, verdict, unsubmitted, check, check_verdict, unknown]
    expected = {"reward": {"reward-moved", "paid-without-submit"}, "feasibility": {"verdict-flipped"},
                "checks": {"check-cost-moved", "check-verdict-flipped"}}
    return records, expected


@pytest.fixture
def folder(tmp_path):
    records, expected = tampered_records()
    with RolloutStore(tmp_path / "rollouts-dir", writer_id="w1") as store:
        for record in records:
            store.save(record)
    (tmp_path / "rollouts-dir" / "rollouts" / DAY / "damaged.json").write_text('{"episode_id": "dam')
    return tmp_path / "rollouts-dir", records, expected


def table_ids(text: str) -> tuple[list[str], list[str]]:
    """(ids in the flips table, ids in the checked-plans table) of the printed report."""
    flips, checks, current = [], [], None
    for line in text.splitlines():
        if line.startswith("| episode | model | task | reward"):
            current = flips
        elif line.startswith("| episode | model | task | checks"):
            current = checks
        elif line.startswith("| ") and current is not None:
            current.append(line.split("|")[1].strip())
        elif not line.startswith("|"):
            current = None if not line.startswith("|---") else current
    return flips, checks


def test_regrade_lists_exactly_the_records_that_disagree(folder, capsys):
    root, records, expected = folder
    assert main(["regrade", "--dir", str(root)]) == 0
    out = capsys.readouterr().out
    flips, checks = table_ids(out)
    assert sorted(flips) == sorted(expected["reward"] | expected["feasibility"])
    assert sorted(checks) == sorted(expected["checks"])
    assert "| reward-moved |" in out and "| verdict-flipped |" in out
    moved = next(line for line in out.splitlines() if line.startswith("| reward-moved |"))
    original = next(r for r in records if r["episode_id"] == "reward-moved")["reward"]
    assert f"{original:.6f} -> {original - 0.01:.6f}" in moved
    assert "| yes -> no |" in next(line for line in out.splitlines() if line.startswith("| verdict-flipped |"))
    total = out.strip().splitlines()[-1]
    assert total == (f"total: 10 rollouts graded again under grader {GRADER}: 3 flipped (2 reward, 1 feasibility), "
                     "2 more with checked plans judged differently; skipped 2 (task not in the grader's task packs: 1, "
                     "unreadable: 1)")
    assert f"{GRADER_VERSION}+app0.1.0" == GRADER


def test_regrade_write_keeps_the_new_grade_beside_the_old_one(folder, capsys):
    root, _, _ = folder
    before = {p.stem: json.loads(p.read_bytes()) for p in root.glob("rollouts/*/*.json") if p.stem != "damaged"}
    assert main(["regrade", "--dir", str(root), "--write"]) == 0
    assert "wrote the new grade into 10 record(s)" in capsys.readouterr().out
    after = {p.stem: json.loads(p.read_bytes()) for p in root.glob("rollouts/*/*.json") if p.stem != "damaged"}
    for episode_id, record in after.items():
        original = {k: v for k, v in record.items() if k != "regrade"}
        assert original == before[episode_id]  # no recorded field touched
    moved = after["reward-moved"]["regrade"]
    assert moved["grader_version"] == GRADER and moved["reward"] == pytest.approx(before["reward-moved"]["reward"] - 0.01)
    assert moved["grade"]["feasible"] is True and moved["checks"][0]["check"] == 1
    assert after["paid-without-submit"]["regrade"]["reward"] == 0.0 and "regrade" not in after["unknown-task"]
    with RolloutStore(root, writer_id="w2") as store:
        rows = {row["episode_id"]: row for row in store.rows()}
    assert rows["verdict-flipped"]["regrade_feasible"] is False and rows["verdict-flipped"]["feasible"] is True
    assert rows["reward-moved"]["regrade_reward"] == moved["reward"]
    assert rows["reward-moved"]["reward"] == before["reward-moved"]["reward"]  # the original stays in the index
    assert rows["unknown-task"]["regrade_reward"] is None
    assert len(rows) == 11 and len(list(root.glob("index/*/*.jsonl"))) == 1
    # Once written, running again writes nothing, and the flips are still reported.
    assert main(["regrade", "--dir", str(root), "--write"]) == 0
    again = capsys.readouterr().out
    assert "wrote the new grade into 0 record(s)" in again and "| reward-moved |" in again


def test_regraded_records_still_load_with_datasets(folder, tmp_path):
    root, _, _ = folder
    (root / "rollouts" / DAY / "damaged.json").unlink()
    main(["regrade", "--dir", str(root), "--write"])
    loaded = datasets.load_dataset(str(root), "rollouts", split="train", cache_dir=str(tmp_path / "ds-cache"))
    by_id = {row["episode_id"]: row for row in loaded}
    assert by_id["reward-moved"]["regrade"]["grader_version"] == GRADER
    assert by_id["unknown-task"]["regrade"] is None
    index = datasets.load_dataset(str(root), "index", split="train", cache_dir=str(tmp_path / "ds-cache"))
    assert {row["episode_id"]: row["regrade_feasible"] for row in index}["verdict-flipped"] is False


def test_regrade_reads_a_hub_dataset(folder, tmp_path, monkeypatch, capsys):
    root, _, expected = folder
    files = {p.relative_to(root).as_posix(): p.read_bytes()
             for p in [*root.glob("rollouts/*/*.json"), *root.glob("index/*/*.jsonl"), root / "README.md"]}
    with running_fakehub(token=TOKEN) as hub:
        publish(hub.url, "team/arena-rollouts", files, token=TOKEN)
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub-cache"))
        assert main(["regrade", "--dataset", "team/arena-rollouts"]) == 0
        flips, checks = table_ids(capsys.readouterr().out)
        assert sorted(flips) == sorted(expected["reward"] | expected["feasibility"])
        assert sorted(checks) == sorted(expected["checks"])
        assert main(["regrade", "--dataset", "team/arena-rollouts", "--write"]) == 2
        assert "--write works on a rollout folder" in capsys.readouterr().err
        assert main(["regrade", "--dataset", "team/no-such-dataset"]) == 1
        assert "cannot read team/no-such-dataset" in capsys.readouterr().err


def test_regrade_on_an_empty_or_missing_folder(tmp_path, capsys):
    assert main(["regrade", "--dir", str(tmp_path / "nothing")]) == 2
    assert "no rollouts in" in capsys.readouterr().err


def test_the_command_line_entry_point(folder, warm_python):
    root, _, expected = folder
    done = warm_python.run("agent", "regrade", "--dir", str(root), timeout=120)
    assert done.returncode == 0, done.stderr
    assert set(table_ids(done.stdout)[0]) == expected["reward"] | expected["feasibility"]


def test_a_record_tampered_in_place_is_caught_even_after_a_write(folder, capsys):
    root, _, _ = folder
    main(["regrade", "--dir", str(root), "--write"])
    path = root / "rollouts" / DAY / "sound-naive.json"
    record = json.loads(path.read_bytes())
    changed = copy.deepcopy(record)
    changed["final"]["grade"]["feasible"] = False
    path.write_text(json.dumps(changed))
    capsys.readouterr()
    main(["regrade", "--dir", str(root)])
    assert "sound-naive" in table_ids(capsys.readouterr().out)[0]


def test_a_file_that_is_not_a_rollout_record_is_skipped_not_written(folder, capsys):
    root, _, _ = folder
    (root / "rollouts" / DAY / "stray.json").write_text(json.dumps({"episode_id": "stray", "reward": "lots"}))
    assert main(["regrade", "--dir", str(root), "--write"]) == 0
    out = capsys.readouterr().out
    assert "not a rollout record: 1" in out and "wrote the new grade into 10 record(s)" in out
    assert "regrade" not in json.loads((root / "rollouts" / DAY / "stray.json").read_text())
