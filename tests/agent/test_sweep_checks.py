"""`python -m agent sweep` before anything is spent: each mistake refused in one line with what to do and no Job
submitted, the dry run's plan and estimate, and the pieces they rest on (images, timeouts, secrets, the estimate's
arithmetic). The Hub and its Jobs are the local peer (testkit/fakejobs.py), reached through huggingface_hub."""

from __future__ import annotations

import re

import pytest

from agent.providers.base import scrub
from batch.grid import grid_cells, task_ids
from batch.sweep_cost import JOB_START_S, LOCAL_START_S, episode_guess, estimate, hourly_usd
from batch.sweep_jobs import describe
from batch.sweep_plan import SweepError, SweepPlan, job_secrets, parse_timeout, resolve_image
from rollouts.prices import episode_usd
from rollouts.store import RolloutStore
from testkit.records import make_record
from testkit.sweeps import REPO, SPACE, TOKEN, jobs_endpoint, sweep
from testkit.tasks import TASK_ID

SONNET = "anthropic:claude-sonnet-5-5"


def test_each_mistake_is_refused_in_one_line_and_no_job_is_submitted(tmp_path, monkeypatch):
    with jobs_endpoint(tmp_path, monkeypatch, orgs=("arena", "free-org"), without_jobs=("free-org",)) as (hub, jobs):
        good = {"--model": "baseline:greedy", "--task": TASK_ID, "--dataset": REPO, "--space": SPACE,
                "--out": str(tmp_path / "here")}

        def refused(change: dict[str, str | None] | None = None, *more: str) -> str:
            """The one line `sweep` says with `good` changed (None: an option left out) or `more` added."""
            options = {**good, **(change or {})}
            ran = sweep(*[a for k, v in options.items() if v is not None for a in (k, v)], *more, "--dry-run")
            lines = ran.err.strip().splitlines()
            assert ran.code == 2 and len(lines) == 1 and lines[0].startswith("error: "), ran.err
            return lines[0]

        assert sweep(*[a for k, v in good.items() for a in (k, v)], "--dry-run").code == 0  # right, it passes
        assert "free-org cannot run Jobs" in refused({"--namespace": "free-org"})
        assert "--namespace with one of arena-user, arena, free-org" in refused({"--namespace": "someone-else"})
        assert "pass --flavor with one of a10g-small, cpu-basic, cpu-upgrade" in refused({"--flavor": "h900-huge"})
        assert "anthropic:claude-x needs ANTHROPIC_API_KEY: set it in this shell" in refused(
            None, "--model", "anthropic:claude-x")
        assert "is neither a Space (hf.co/spaces/OWNER/NAME) nor a Docker image" in refused({"--image": "Not An Image!"})
        assert "no image for the Jobs: pass --space" in refused({"--space": None})
        assert "--dataset USER/REPO is required" in refused({"--dataset": None})
        assert "more than the 1 cells" in refused({"--machines": "3"})
        assert "give a duration" in refused({"--timeout": "soon"})
        assert "credentials" in refused({"--env-url": "https://user:pw@berth.example.org"})
        # A mistyped player or task is said before anything is planned, with the valid ones named.
        assert "unknown baseline 'smart': the baselines are baseline:greedy" in refused({"--model": "baseline:smart"})
        assert "unknown task 'dock-99Z-nope-0': the closest tasks offered here are " in refused(
            {"--task": "dock-99Z-nope-0"})
        jobs.role = "read"
        assert "read-only" in refused()
        jobs.role = "write"
        monkeypatch.setenv("HF_TOKEN", "hf_not_this_one")
        assert "token was refused" in refused()
        monkeypatch.delenv("HF_TOKEN")
        assert "no Hugging Face token: set HF_TOKEN" in refused()
        assert jobs.received == [] and hub.repos == {}  # no Job, and not even the dataset was made


def test_the_dry_run_prints_the_plan_and_its_cost_from_earlier_rollouts_and_submits_nothing(tmp_path, monkeypatch):
    here = tmp_path / "here"
    with RolloutStore(here) as store:  # three earlier rollouts of the model: their medians price the sweep
        for i in range(3):
            store.save(make_record(seed=i, model=SONNET, usage={"input_tokens": 30000 + 1000 * i,
                                                                "output_tokens": 9000},
                                   seconds=200.0, turns=5, errors=[], end_reason="submitted"))
    with jobs_endpoint(tmp_path, monkeypatch) as (hub, jobs):
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-dry-3a9f0c")
        ran = sweep("--model", SONNET, "--model", "baseline:greedy", "--split", "eval", "--limit", "20",
                    "--machines", "4", "--run", "board-dry", "--dataset", REPO, "--space", SPACE, "--out", str(here),
                    "--dry-run")
        assert ran.code == 0, ran.err
        assert jobs.received == [] and hub.repos == {} and not (here / ".sweeps" / "board-dry.json").exists()
    text = ran.err
    assert "sweep board-dry: 20 tasks x 2 models x 1 repeat(s) = 40 episodes on 4 machine(s)" in text
    assert f"image hf.co/spaces/{SPACE}, flavor cpu-basic, timeout 6h" in text
    assert ("shard 1/4 runs: python -m agent run --model anthropic:claude-sonnet-5-5 --model baseline:greedy "
            "--split eval --limit 20 --repeats 1 --run board-dry") in text and text.rstrip().endswith("nothing submitted")
    assert "secrets for the shards: ANTHROPIC_API_KEY, HF_TOKEN" in text
    assert "sk-ant-dry-3a9f0c" not in text + ran.out and TOKEN not in text + ran.out

    # The model's cost: 20 episodes at the price of its earlier rollouts' median episode.
    line = next(line for line in text.splitlines() if line.strip().startswith(SONNET))
    assert "20 episodes x 31,000 in + 9,000 out tokens, 200 s (medians of 3 earlier rollouts in the folder" in line
    each, total = (float(v.replace(",", "")) for v in re.search(r"x \$([\d.,]+) = \$([\d.,]+)$", line).groups())
    expected = episode_usd({"model": SONNET, "turns": 5, "usage": {"input_tokens": 31000, "output_tokens": 9000}})
    assert expected and each == pytest.approx(expected, abs=1e-4) and total == pytest.approx(20 * expected, abs=0.01)
    # The Jobs' cost: cpu-basic at the peer's $0.000167 a minute, and the most the 4 Jobs can cost (6 h each).
    jobs_line = next(line for line in text.splitlines() if "Jobs: 4 x cpu-basic" in line)
    assert "at $0.0100/hour" in jobs_line and "at most $0.2405 if every Job runs to its timeout" in jobs_line
    assert "baseline:greedy: 20 episodes, no tokens" in text and "total: about $" in text


def test_images_timeouts_and_the_secrets_a_sweep_sends():
    assert resolve_image(None, "arena/berth-arena") == "hf.co/spaces/arena/berth-arena"
    assert resolve_image(None, None, {"SPACE_ID": "arena/berth-arena"}) == "hf.co/spaces/arena/berth-arena"
    for image in ("python:3.11", "ghcr.io/astral-sh/uv:python3.12-bookworm", "hf.co/spaces/arena/x",
                  "https://huggingface.co/spaces/arena/x", "registry.example.org:5000/team/img@sha256:" + "a" * 64):
        assert resolve_image(image, None) == image
    for image in ("Python:3.11", "hf.co/spaces/only-owner", "a b", "ghcr.io//x", ""):
        with pytest.raises(SweepError, match="neither a Space"):
            resolve_image(image, None)
    with pytest.raises(SweepError, match="no image"):
        resolve_image(None, None, {})
    assert [parse_timeout(t) for t in ("90", "90s", "30m", "6h", "1.5h", "1d")] == [90, 90, 1800, 21600, 5400, 86400]

    env = {"ANTHROPIC_API_KEY": "sk-ant-1", "OPENAI_API_KEY": "sk-oa-2", "VLLM_BASE_URL": "https://vllm.example.org/v1"}
    with pytest.MonkeyPatch.context() as patch:
        for name in ("VLLM_API_KEY", "HF_TOKEN", "HF_ROUTER_URL"):
            patch.delenv(name, raising=False)
        for name, value in env.items():
            patch.setenv(name, value)
        assert job_secrets(["baseline:greedy", "anthropic:claude-x"], "hf_t") == {"ANTHROPIC_API_KEY": "sk-ant-1",
                                                                                   "HF_TOKEN": "hf_t"}
        assert job_secrets(["vllm:m", "hf:org/model:novita"], "hf_t") == {
            "VLLM_BASE_URL": "https://vllm.example.org/v1", "HF_TOKEN": "hf_t"}  # a local vLLM takes no key
        patch.delenv("OPENAI_API_KEY")
        with pytest.raises(SweepError, match="openai:gpt-x needs OPENAI_API_KEY"):
            job_secrets(["openai:gpt-x"], "hf_t")
    assert scrub("token hf_t and sk-ant-1 here", {"a": "hf_t", "b": "sk-ant-1"}) == "token [redacted] and [redacted] here"


def test_the_sweep_scrubs_a_masked_echo_of_a_secret_as_the_loop_does():
    """One scrubber (rollouts.scrub, re-exported as agent.providers.base.scrub): the sweep's own copy replaced whole values only, so a Hub error
    quoting the token masked (`hf_PqRs…8Rd2`) reached the terminal with its first and last characters."""
    token = "hf_PqRsTuVwXyZaBcDeFgHiJkLmNoPq8Rd2"
    said = describe(RuntimeError(f"401 Client Error: invalid token {token[:7]}…{token[-4:]} for the namespace"),
                    {"HF_TOKEN": token})
    assert said == "401 Client Error: invalid token [redacted] for the namespace"


def test_the_estimate_counts_waves_of_concurrent_episodes_and_the_timeout_bounds_the_jobs():
    tasks = [f"task-{i}" for i in range(10)]
    plan = SweepPlan(run="r", models=["baseline:greedy", SONNET], tasks=tasks, repeats=2, machines=2, run_args=[],
                     timeout_s=3600, concurrency=4)
    rows = [{"model": SONNET, "seconds": 60.0, "input_tokens": 1000, "output_tokens": 100, "turns": 2, "errors": 0}
            for _ in range(3)]
    guess = episode_guess(SONNET, rows, "the folder x")
    assert (guess.input_tokens, guess.seconds) == (1000, 60.0) and "3 earlier rollouts in the folder x" in guess.source
    assert "rough assumption" in episode_guess(SONNET, rows[:2], "x").source  # two say too little
    assert hourly_usd(0.000167, "minute") == pytest.approx(0.01002)
    priced = estimate(plan, rows, "x", usd_per_hour=0.6)
    # Each shard holds one model's 10 cells (the grid sorted by task, then model): 20 episodes of the model,
    # in 5 waves of 4, 60 s each; the baselines' shard 20 episodes of 2 s.
    assert [len(grid_cells(tasks, plan.models, (k, 2))) for k in (1, 2)] == [10, 10]
    assert priced.shard_hours == pytest.approx([(JOB_START_S + 5 * 60) / 3600, (JOB_START_S + 5 * 2) / 3600])
    assert priced.cap_usd == pytest.approx(2 * 0.6)
    sonnet = next(m for m in priced.models if m.model == SONNET)
    assert sonnet.episodes == 20 and sonnet.usd == pytest.approx(20 * sonnet.usd_per_episode)
    assert priced.total_usd == pytest.approx(priced.jobs_usd + sonnet.usd)


def test_a_local_sweep_is_estimated_from_a_local_start_and_shares_runs_tier_and_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("TASKS_DATASET", "")  # the bundled tasks
    plan = SweepPlan(run="r", models=["baseline:greedy"], tasks=[f"task-{i}" for i in range(8)], repeats=1,
                     machines=2, run_args=[], on="local", concurrency=4)
    local = estimate(plan, [], "x", usd_per_hour=None)
    # 4 cells a shard, one wave of 2 s baseline episodes, after a local process's start (not a Job's image pull).
    assert local.shard_hours == pytest.approx([(LOCAL_START_S + 2) / 3600] * 2) and LOCAL_START_S < 60
    ran = sweep("--on", "local", "--model", "baseline:greedy", "--split", "eval", "--tier", "storm", "--tier",
                "extreme", "--limit", "3", "--machines", "2", "--run", "local-dry", "--out", str(tmp_path),
                "--dry-run")
    assert ran.code == 0, ran.err
    assert "machines: 2 local processes, about 20 s each (start-up 18 s included)" in ran.err
    assert "3 min" not in ran.err and "start-up 3" not in ran.err
    chosen = task_ids(None, "eval", 3, None, ["storm", "extreme"])
    assert f"3 tasks of split eval, tier storm, extreme, a seeded sample spread over the tiers:\n  {' '.join(chosen)}" \
        in ran.err
    assert "--split eval --tier storm --tier extreme --limit 3 --repeats 1 --run local-dry" in ran.err
    refused = sweep("--on", "local", "--model", "baseline:greedy", "--task", chosen[0], "--tier", "storm",
                    "--out", str(tmp_path), "--dry-run")
    assert refused.code == 2 and "--limit and --tier pick from a split" in refused.err
