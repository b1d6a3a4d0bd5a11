"""`python -m agent sweep` end to end: the sweep runs in this process, its Jobs go through huggingface_hub to the local
Jobs peer (testkit/fakejobs.py), which runs each shard's `python -m agent run --shard K/N` as a real process that
plays on the berth server and pushes to the local Hub on the same endpoint. What is checked is what lands in the
dataset, what the peer received, and everything written or printed along the way."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from batch.grid import grid_cells, task_ids
from testkit.fakejobs import warm_spawn
from testkit.index_rows import hub_index_rows
from testkit.peers import ChatPeer, ToolCall, Turn, always
from testkit.sweeps import (
    REPO,
    SPACE,
    TOKEN,
    interrupt,
    jobs_endpoint,
    leaks,
    state_file,
    sweep,
)
from testkit.tasks import optimal_args

BASELINES = ["baseline:greedy", "baseline:naive"]


def eval_tasks(n: int) -> list[str]:
    """The tasks `--split eval --limit n` plays: n spread over the tiers (batch.grid)."""
    return task_ids(None, "eval", n, None)


def run_cells(files: dict[str, bytes], tmp: Path, run: str) -> list[tuple[str, str]]:
    return sorted((r["model"], r["task_id"]) for r in hub_index_rows(files, tmp) if r["run"] == run)


def job_cells(folder: Path) -> list[tuple[str, str]]:
    """What one Job's machine played, from the records in its own rollout folder."""
    return sorted((r["model"], r["task_id"]) for r in
                  (json.loads(p.read_text()) for p in folder.glob("data/rollouts/rollouts/*/*.json")))


def everything_written(folder: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_four_jobs_save_every_episode_of_the_grid_once_and_the_secrets_stay_secret(tmp_path, monkeypatch,
                                                                                   warm_python, env_url):
    not_needed = "sk-openai-not-needed-91f2c"
    here = tmp_path / "here"
    with jobs_endpoint(tmp_path, monkeypatch, warm_python) as (hub, jobs):
        monkeypatch.setenv("OPENAI_API_KEY", not_needed)  # no chosen model needs it: it must go nowhere
        ran = sweep(*[a for m in BASELINES for a in ("--model", m)], "--split", "eval", "--limit", "8",
                    "--run", "sweep-four", "--machines", "4", "--dataset", REPO, "--space", SPACE,
                    "--env-url", env_url, "--out", str(here), "--poll", "0.1", wait=time.sleep)
        assert ran.code == 0, ran.err
        tasks = eval_tasks(8)  # two of each tier: 16 episodes, 4 a machine
        files = hub.files(REPO)

        # One Job per shard, in the Space's image, the Hub token its only secret, labelled with its sweep.
        assert sorted(spec["command"][-1] for spec in jobs.received) == ["1/4", "2/4", "3/4", "4/4"]
        for spec in jobs.received:
            assert spec["command"][:4] == ["python", "-m", "agent", "run"] and spec["command"][-2] == "--shard"
            assert spec["spaceId"] == SPACE and spec["flavor"] == "cpu-basic" and spec["timeoutSeconds"] == 6 * 3600
            assert spec["secrets"] == {"HF_TOKEN": TOKEN} and spec["environment"] == {"PYTHONUNBUFFERED": "1"}
            assert spec["labels"]["arena-sweep"] == "sweep-four"
        # Each machine played its own slice, and the dataset holds every episode of the grid exactly once.
        for job in jobs.jobs.values():
            k = int(job.spec["command"][-1].split("/")[0])
            assert job_cells(job.folder) == sorted(grid_cells(tasks, BASELINES, (k, 4)))
        assert run_cells(files, tmp_path, "sweep-four") == sorted(grid_cells(tasks, BASELINES))
        assert len([p for p in files if p.startswith("rollouts/")]) == 16

        # The state, here and in the dataset; the progress and the leaderboard.
        for state in (json.loads(files[".sweeps/sweep-four.json"]), state_file(here, "sweep-four")):
            assert [s["stage"] for s in state["shards"]] == ["COMPLETED"] * 4
            assert state["secret_names"] == ["HF_TOKEN"] and len({s["job_id"] for s in state["shards"]}) == 4
        assert "episodes saved: 16/16" in ran.err and "shards 4/4 done" in ran.err
        board_md = (here / "runs" / "sweep-four" / "board.md").read_text()
        assert "| baseline:greedy | 8 |" in board_md and "| baseline:naive | 8 |" in board_md  # every figure
        # The terminal gets the compact board, 100 columns at most, and where the rest is.
        assert re.search(r"^baseline:greedy +8 ", ran.out, re.M) and re.search(r"^baseline:naive +8 ", ran.out, re.M)
        assert max(len(line) for line in ran.out.splitlines() if "board.md" not in line) <= 100
        assert "board.md." in ran.out

        # The token was each shard's environment (what a Job does with a secret); it and the key no model needed
        # are nowhere else: not in a command, a plain environment, a log, the state, the dataset or the output.
        assert all(job.env["HF_TOKEN"] == TOKEN and "OPENAI_API_KEY" not in job.env for job in jobs.jobs.values())
        places = {"stdout": ran.out, "stderr": ran.err, **everything_written(here),
                  **{f"dataset {p}": data for p, data in files.items()},
                  **{f"logs of {job.id}": job.output() for job in jobs.jobs.values()},
                  **{f"Job {i} command, environment, labels": json.dumps([s["command"], s["environment"], s["labels"]])
                     for i, s in enumerate(jobs.received)},
                  "every secret sent": json.dumps([s.get("secrets") for s in jobs.received]).replace(TOKEN, "")}
        assert not leaks([TOKEN, not_needed], places)


def test_resume_submits_only_the_failed_shard_and_its_key_reaches_the_model_as_a_secret(tmp_path, monkeypatch,
                                                                                        warm_python, env_url):
    vllm_key = "vllm-key-5e8d1c0b77"
    here = tmp_path / "here"
    model = always(Turn(ToolCall("submit_plan", optimal_args())))
    with ChatPeer(model) as provider, jobs_endpoint(tmp_path, monkeypatch, warm_python) as (hub, jobs):
        monkeypatch.setenv("VLLM_BASE_URL", provider.url + "/v1")
        monkeypatch.setenv("VLLM_API_KEY", vllm_key)
        jobs.fail_next(match="--shard 2/2")  # its machine fails at once: nothing of its slice is played
        first = sweep("--model", "baseline:greedy", "--model", "vllm:m", "--split", "eval", "--limit", "3",
                      "--max-turns", "1", "--run", "sweep-mend", "--machines", "2", "--dataset", REPO, "--space",
                      SPACE, "--env-url", env_url, "--out", str(here), "--poll", "0.1", wait=time.sleep)
        tasks = eval_tasks(3)
        assert first.code == 1, first.err
        assert "shard 2/2" in first.err and "injected: the Job's machine failed" in first.err
        assert "--resume sweep-mend" in first.err
        assert run_cells(hub.files(REPO), tmp_path, "sweep-mend") == sorted(grid_cells(tasks, ["baseline:greedy",
                                                                                                "vllm:m"], (1, 2)))
        assert provider.requests == []  # shard 2 holds every vllm cell (sorted by task, then model)
        shard_one = state_file(here, "sweep-mend")["shards"][0]["job_id"]

        again = sweep("--resume", "sweep-mend", "--out", str(here), "--poll", "0.1", wait=time.sleep)
        assert again.code == 0, again.err
        assert len(jobs.received) == 3 and jobs.received[2]["command"][-2:] == ["--shard", "2/2"]
        assert jobs.received[2]["secrets"] == {"HF_TOKEN": TOKEN, "VLLM_API_KEY": vllm_key,
                                               "VLLM_BASE_URL": provider.url + "/v1"}
        files = hub.files(REPO)
        assert run_cells(files, tmp_path, "sweep-mend") == sorted(grid_cells(tasks, ["baseline:greedy", "vllm:m"]))
        shards = state_file(here, "sweep-mend")["shards"]
        assert shards[0]["job_id"] == shard_one and shards[0]["earlier"] == []
        assert len(shards[1]["earlier"]) == 1 and [s["stage"] for s in shards] == ["COMPLETED", "COMPLETED"]
        # The key reached the model's server from the resumed shard, and only as that shard's secret.
        assert len(provider.requests) == 3
        assert {r.headers["authorization"] for r in provider.requests} == {f"Bearer {vllm_key}"}
        places = {"stdout": first.out + again.out, "stderr": first.err + again.err, **everything_written(here),
                  **{f"dataset {p}": data for p, data in files.items()},
                  **{f"logs of {job.id}": job.output() for job in jobs.jobs.values()},
                  **{f"Job {i} command and environment": json.dumps([s["command"], s["environment"]])
                     for i, s in enumerate(jobs.received)}}
        assert not leaks([TOKEN, vllm_key], places)


def test_ctrl_c_asks_then_status_cancel_and_resume_do_what_they_say(tmp_path, monkeypatch, warm_python, env_url):
    here = tmp_path / "here"

    def grid(run: str) -> list[str]:
        return [*[a for m in BASELINES for a in ("--model", m)], "--split", "eval", "--limit", "2", "--run", run,
                "--machines", "2", "--dataset", REPO, "--space", SPACE, "--env-url", env_url, "--out", str(here),
                "--poll", "0.1"]

    with jobs_endpoint(tmp_path, monkeypatch, warm_python) as (hub, jobs):
        jobs.hold()  # the Jobs wait in SCHEDULING
        left = sweep(*grid("sweep-pause"), answers="\n", wait=interrupt)
        assert left.code == 130 and "left 2 running" in left.err, left.err
        assert [job.stage for job in jobs.jobs.values()] == ["SCHEDULING", "SCHEDULING"]

        status = sweep("--status", "sweep-pause", "--out", str(here))
        assert status.code == 0 and status.out.count(" SCHEDULING ") == 2 and "episodes saved: 0/4" in status.out

        cancelled = sweep("--cancel", "sweep-pause", "--out", str(here))
        assert cancelled.code == 0 and "cancelled 2" in cancelled.err
        assert [job.stage for job in jobs.jobs.values()] == ["CANCELED", "CANCELED"]
        remote = json.loads(hub.files(REPO)[".sweeps/sweep-pause.json"])
        assert [s["stage"] for s in remote["shards"]] == ["CANCELED", "CANCELED"]

        jobs.release()
        resumed = sweep("--resume", "sweep-pause", "--out", str(here), "--poll", "0.1", wait=time.sleep)
        assert resumed.code == 0 and "submitting shard(s) 1, 2 again" in resumed.err, resumed.err
        assert len(jobs.received) == 4
        assert run_cells(hub.files(REPO), tmp_path, "sweep-pause") == sorted(grid_cells(eval_tasks(2), BASELINES))

        jobs.hold()
        stopped = sweep(*grid("sweep-stop"), answers="c\n", wait=interrupt)
        assert stopped.code == 130 and "cancelled 2" in stopped.err
        assert [job.stage for job in list(jobs.jobs.values())[-2:]] == ["CANCELED", "CANCELED"]
        assert [s["stage"] for s in state_file(here, "sweep-stop")["shards"]] == ["CANCELED", "CANCELED"]


def test_on_local_the_shards_are_processes_of_this_machine(tmp_path, monkeypatch, warm_python, env_url):
    here = tmp_path / "here"
    with jobs_endpoint(tmp_path, monkeypatch):  # no Job may be asked for: the peer would record it
        monkeypatch.delenv("HF_TOKEN")
        ran = sweep("--on", "local", *[a for m in BASELINES for a in ("--model", m)], "--split", "eval", "--limit",
                    "3", "--run", "sweep-here", "--machines", "2", "--env-url", env_url, "--out", str(here),
                    "--poll", "0.1", spawn=warm_spawn(warm_python), wait=time.sleep)
    assert ran.code == 0, ran.err
    played = sorted((r["model"], r["task_id"]) for r in
                    (json.loads(p.read_text()) for p in here.glob("rollouts/*/*.json")))
    assert played == sorted(grid_cells(eval_tasks(3), BASELINES))
    assert [s["stage"] for s in state_file(here, "sweep-here")["shards"]] == ["COMPLETED", "COMPLETED"]
    assert re.search(r"^baseline:greedy +3 ", ran.out, re.M) and "episodes saved: 6/6" in ran.err
