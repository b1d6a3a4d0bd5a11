"""`python -m agent run`: batch runs through the store, resumable, with a board; Ctrl-C keeps what finished.

Each run is its own process. One is started cold (`subprocess`), to hold the entry point itself; the others fork
from a warm interpreter (testkit/warm_python.py) that imported the CLI once, which saves about 2.5 s a run.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from batch.grid import task_ids
from berth_env import TIERS, grade, greedy_plan, load_pack
from testkit.peers import ChatPeer, Error, Text, ToolCall, Turn
from testkit.servers import free_port
from testkit.tasks import optimal_args

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def agent(warm_python):
    def run(*args: str, env: dict | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
        return warm_python.run("agent", *args, env={**os.environ, **(env or {})}, timeout=timeout)

    return run


def records(root: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(root.glob("rollouts/*/*.json"))]


def test_batch_run_writes_the_dataset_layout_resumes_and_writes_a_board(agent, tmp_path):
    out = tmp_path / "rollouts"
    first = agent("run", "--model", "baseline:greedy", "--model", "baseline:naive", "--split", "eval",
                  "--limit", "3", "--out", str(out), "--run", "smoke", "--concurrency", "2",
                  env={"ARENA_URL": "https://arena.example.org"})
    assert first.returncode == 0, first.stderr
    saved = records(out)
    assert len(saved) == 6 and {r["run"] for r in saved} == {"smoke"}
    tasks = task_ids(None, "eval", 3, None)
    assert {(r["model"], r["task_id"]) for r in saved} == {(m, t) for m in ("baseline:greedy", "baseline:naive")
                                                          for t in tasks}
    for r in saved:
        if r["model"] == "baseline:greedy":
            task = load_pack().get(r["task_id"])
            assert r["reward"] == grade(task, greedy_plan(task))["reward"]
    index_rows = [json.loads(line) for p in out.glob("index/*/*.jsonl") for line in p.read_text().splitlines()]
    assert len(index_rows) == 6
    board = (out / "runs" / "smoke" / "board.md").read_text()
    assert "| baseline:greedy | 3 |" in board and "| baseline:naive | 3 |" in board  # every figure, in Markdown
    assert "every model has fewer than 5 episodes, so none is ranked" in board
    # The terminal gets the compact board, 100 columns at most, and the path of board.md for the rest.
    assert re.search(r"^baseline:greedy +3 ", first.stdout, re.M) and re.search(r"^baseline:naive +3 ", first.stdout,
                                                                              re.M)
    assert max(len(line) for line in first.stdout.splitlines() if "board.md" not in line) <= 100, first.stdout
    assert "| baseline:greedy |" not in first.stdout and "board.md." in first.stdout
    # Each model's best rollout by its share page (ARENA_URL, as on a Space, says where the pages are served).
    by_id = {r["episode_id"]: r for r in saved}
    for model in ("baseline:greedy", "baseline:naive"):
        link = re.search(rf"  {re.escape(model)}: reward .* https://arena\.example\.org/r/(\w+)$", first.stderr, re.M)
        assert link, first.stderr
        best = by_id[link.group(1)]
        assert best["model"] == model and best["reward"] == max(r["reward"] for r in saved if r["model"] == model)

    again = agent("run", "--model", "baseline:greedy", "--model", "baseline:naive", "--split", "eval",
                  "--limit", "3", "--out", str(out), "--run", "smoke")
    assert again.returncode == 0 and "6 already in" in again.stderr and "0 to play" in again.stderr
    assert len(records(out)) == 6

    forced = agent("run", "--model", "baseline:greedy", "--task", tasks[0], "--out", str(out), "--run", "smoke",
                   "--force")
    assert forced.returncode == 0 and "1 to play" in forced.stderr
    assert len(records(out)) == 7


def test_limit_spreads_the_tasks_over_the_tiers_prints_them_and_tier_filters(agent, tmp_path):
    out = tmp_path / "rollouts"
    first_four = {t["difficulty"] for t in load_pack().split("eval")[:4]}
    assert first_four == {"busy"}  # what the first N alphabetically would give
    spread = agent("run", "--model", "baseline:naive", "--split", "eval", "--limit", "4", "--out", str(out),
                   "--run", "spread")
    assert spread.returncode == 0, spread.stderr
    printed = re.search(r"^4 tasks of split eval, a seeded sample spread over the tiers:\n((?:  .+\n)+)",
                        spread.stderr, re.M)
    assert printed, spread.stderr
    assert max(len(line) for line in printed.group(0).splitlines()) <= 100  # wrapped for a terminal
    saved = records(out)
    assert sorted(printed.group(1).split()) == sorted(r["task_id"] for r in saved)
    assert {r["task"]["difficulty"] for r in saved} == set(TIERS)
    board = (out / "runs" / "spread" / "board.md").read_text().splitlines()
    naive = next(line for line in board if line.startswith("| baseline:naive |")).split(" | ")
    assert all(cell != "-" for cell in naive[3:7])  # every tier has its figure
    again = agent("run", "--model", "baseline:naive", "--split", "eval", "--limit", "4", "--out", str(out),
                  "--run", "spread")
    assert printed.group(0) in again.stderr and "4 already in" in again.stderr  # seeded: the same four

    storms = agent("run", "--model", "baseline:naive", "--split", "eval", "--tier", "storm", "--tier", "extreme",
                   "--limit", "2", "--out", str(out), "--run", "storms")
    assert storms.returncode == 0, storms.stderr
    assert "2 tasks of split eval, tier storm, extreme, a seeded sample spread over the tiers:\n  " in storms.stderr
    assert {r["task"]["difficulty"] for r in records(out) if r["run"] == "storms"} == {"storm", "extreme"}
    for bad, said in ((["--tier", "stormy", "--split", "eval"], "invalid choice: 'stormy'"),
                      (["--tier", "storm", "--task", "dock-24B-w06x1-busy-0"], "--tier picks from a split"),
                      (["--limit", "2", "--task", "dock-24B-w06x1-busy-0"], "--limit takes N tasks of a split"),
                      (["--limit", "0", "--split", "eval"], "a whole number of at least 1")):
        refused = agent("run", "--model", "baseline:naive", *bad, "--out", str(out))
        assert refused.returncode == 2 and said in refused.stderr, (bad, refused.stderr)


def test_episodes_with_errors_are_played_again_on_resume(agent, tmp_path):
    out = tmp_path / "rollouts"

    def player(request: dict) -> Turn | Error:  # one turn taken, then the model's API refuses the next request
        if any(m.get("role") == "tool" for m in request["messages"]):
            return Error(400, "this model is not served right now")
        return Turn(ToolCall("get_situation"))

    with ChatPeer(player) as peer:
        env = {"VLLM_BASE_URL": peer.url + "/v1"}
        broken = agent("run", "--model", "vllm:m", "--task", "dock-24B-w06x1-busy-0", "--out", str(out), env=env)
        assert broken.returncode == 0, broken.stderr  # it started: a rollout, saved and counted as ever
        (saved,) = records(out)
        assert saved["end_reason"] == "error" and saved["turns"] == 1 and "400" in saved["errors"][0]
        retry = agent("run", "--model", "vllm:m", "--task", "dock-24B-w06x1-busy-0", "--out", str(out), env=env)
    assert "1 to play" in retry.stderr


def test_a_mistyped_model_or_task_is_refused_naming_the_valid_ones_before_anything_is_played(agent, tmp_path):
    """Before, `--model baseline:greedy --task dock-99Z-nope-0` saved an error episode with reward 0 and exited 0."""
    out = tmp_path / "rollouts"
    task = "dock-24B-w06x1-busy-0"
    model = agent("run", "--model", "baseline:smart", "--task", task, "--out", str(out))
    assert model.returncode == 2, model.stderr
    assert "unknown baseline 'smart': the baselines are baseline:greedy, baseline:naive, baseline:hasty" in \
        model.stderr
    typo = agent("run", "--model", "baseline:greedy", "--task", "dock-99Z-nope-0", "--task", task, "--out", str(out))
    assert typo.returncode == 2, typo.stderr
    named = re.search(r"unknown task 'dock-99Z-nope-0': the closest tasks offered here are (.+) \(`python -m agent "
                      r"tasks` lists all (\d+)\)", typo.stderr)
    assert named, typo.stderr
    offered = {t["task_id"] for t in load_pack().tasks}
    assert len(named.group(1).split(", ")) == 3 and set(named.group(1).split(", ")) <= offered
    near = agent("run", "--model", "baseline:greedy", "--task", "dock-24B-w06x1-busy-1", "--out", str(out))
    assert near.returncode == 2 and "closest tasks offered here are dock-24B-w06x1-busy-0, " in near.stderr
    keyless = agent("run", "--model", "anthropic:claude-x", "--task", task, "--out", str(out),
                    env={"ANTHROPIC_API_KEY": ""})
    assert keyless.returncode == 2
    assert "anthropic:claude-x needs an API key: set ANTHROPIC_API_KEY in this shell" in keyless.stderr
    assert not out.exists()  # nothing played, nothing saved, not even a folder
    for result in (model, typo, near, keyless):
        assert "Traceback" not in result.stderr and "to play" not in result.stderr


def test_an_episode_whose_server_cannot_be_reached_is_said_and_not_saved(agent, tmp_path):
    out = tmp_path / "rollouts"
    lost = agent("run", "--model", "baseline:greedy", "--task", "dock-24B-w06x1-busy-0", "--out", str(out),
                 "--env-url", f"http://127.0.0.1:{free_port()}")
    assert lost.returncode == 1, lost.stderr
    assert "baseline:greedy dock-24B-w06x1-busy-0: did not start, not saved: EnvError" in lost.stderr, lost.stderr
    assert "1 episode ended before the first turn and was not saved" in lost.stderr
    assert records(out) == [] and not list(out.glob("index/*/*")) and not list(out.glob(".push/running/*.json"))


def test_bad_arguments_fail_with_a_message_not_a_traceback(agent, tmp_path):
    # A bad model name, from a cold start: test_a_mistake_is_said_before_the_server_and_openenv_are_imported.
    result = agent("run", "--model", "baseline:greedy", "--split", "nope", "--out", str(tmp_path))
    assert result.returncode == 2 and "has no tasks" in result.stderr


def test_a_mistake_is_said_before_the_server_and_openenv_are_imported(tmp_path):
    """openenv's server package imports Gradio (4 CPU-s): a mistyped flag must not wait for it. A cold
    `python -m agent`, which lists every module it imports on stderr (-X importtime)."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "agent", "run", "--model", "gpt-5", "--split",
                             "eval", "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert result.returncode == 2 and "must start with one of" in result.stderr and "Traceback" not in result.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()
                if line.startswith("import time:")}
    assert "batch.cli" in imported, result.stderr[-2000:]  # the list is read right, so the check below can fail
    assert not imported & {"gradio", "openenv", "berth_env.server"}, sorted(imported)


def test_ctrl_c_stops_cleanly_and_keeps_what_finished(warm_python, tmp_path):
    out = tmp_path / "rollouts"

    def player(request: dict) -> Turn:
        # Quick on one task, slow on the others (the task shows in the situation).
        if any(m.get("role") == "tool" for m in request["messages"]):
            return Turn(ToolCall("submit_plan", optimal_args()))
        if "week 6 of 2024" in request["messages"][1]["content"] and "APM" in request["messages"][1]["content"]:
            return Turn(ToolCall("get_situation"))
        return Turn(Text("thinking slowly " * 400), chunk=8, delay=0.05)

    with ChatPeer(player) as peer:
        process = warm_python.popen(
            "agent", "run", "--model", "vllm:m", "--task", "dock-24B-w06x1-busy-0", "--task",
            "dock-36A-w15x1-busy-0", "--task", "dock-36A-w17x1-busy-0", "--out", str(out), "--concurrency", "3",
            env={**os.environ, "VLLM_BASE_URL": peer.url + "/v1"})
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(records(out)) < 1:
            time.sleep(0.2)
        assert len(records(out)) == 1
        time.sleep(1.0)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    kept = {r["task_id"]: r for r in records(out)}
    assert kept["dock-24B-w06x1-busy-0"]["end_reason"] == "submitted"
    assert kept["dock-24B-w06x1-busy-0"]["reward"] == 1.0
    assert {r["end_reason"] for t, r in kept.items() if t != "dock-24B-w06x1-busy-0"} <= {"stopped"}
    assert "Traceback" not in stderr and re.search(r"^vllm:m +\d", stdout, re.M), stdout  # the compact board
