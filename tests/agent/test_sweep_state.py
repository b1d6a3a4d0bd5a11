"""A sweep's state as it is read back (batch/sweep_state.py, batch/sweep_plan.py): a damaged or hostile copy gives
one clear error, never a command; a tampered local copy cannot read or write outside its rollout folder; no secret
goes into a shard's command, not in the server URL nor anywhere else."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import pytest

from batch.sweep import Console, Sweep
from batch.sweep_local import LocalShards
from batch.sweep_plan import HF_JOBS, LOCAL, SweepError, SweepPlan, check_env_url, shard_run_args
from batch.sweep_state import SweepState, SweepStateError, board_rel, in_folder, load_local, save_local
from testkit.sweeps import sweep

TASKS = ["dock-a", "dock-b"]
LIMITS = ["--max-turns", "12", "--max-tokens", "24000", "--wall-clock", "1800.0"]


def plan(on: str = HF_JOBS, out: str = "/srv/rollouts", **changes) -> SweepPlan:
    models, selection = ["baseline:greedy"], [a for t in TASKS for a in ("--task", t)]
    dataset = "arena/rollouts" if on == HF_JOBS else None
    run_args = shard_run_args(models=models, selection=selection, repeats=1, run="board-1", concurrency=4,
                              limits=LIMITS, env_url=None, dataset=dataset, out=None if on == HF_JOBS else out)
    jobs = {"image": "hf.co/spaces/arena/berth-arena", "namespace": "arena", "timeout_s": 21600} if on == HF_JOBS \
        else {}
    fields = {"run": "board-1", "models": models, "tasks": TASKS, "repeats": 1, "machines": 2, "run_args": run_args,
              "on": on, "dataset": dataset, "out": out, "selection": selection, **jobs}
    return SweepPlan(**{**fields, **changes})


def state_json(**plan_changes) -> dict:
    return json.loads(SweepState.new(plan(**plan_changes), ["HF_TOKEN"]).to_bytes())


def read(data: dict | bytes) -> SweepState:
    return SweepState.from_bytes(data if isinstance(data, bytes) else json.dumps(data).encode(), "here")


def test_a_good_state_reads_back_as_it_was_written():
    for on in (HF_JOBS, LOCAL):
        state = SweepState.new(plan(on), ["HF_TOKEN"])
        assert read(state.to_bytes()) == state


def with_plan(**changes) -> dict:
    data = state_json()
    data["plan"].update(changes)
    return data


def with_shard(**changes) -> dict:
    data = state_json()
    data["shards"][0].update(changes)
    return data


def added_to_args(*extra: str) -> dict:
    data = state_json()
    data["plan"]["run_args"] += list(extra)
    return data


DAMAGED = {
    "not JSON": (b"{not json", "Expecting property name"),
    "a list": (b"[]", "not a version 1 sweep state"),
    "another version": ({**state_json(), "version": 2}, "not a version 1"),
    "deeply nested": (b"[" * 100_000 + b"]" * 100_000, "cannot be read"),
    "a run name leading elsewhere": (with_plan(run="../other"), "run name '../other' must be"),
    "a model as a number": (with_plan(models=[7]), "'models' is not a list of texts"),
    "an unknown provider": (with_plan(models=["rogue:x"]), "model spec 'rogue:x' must start with one of"),
    "no machines": (with_plan(machines=0), "machines is not between 1 and 1000"),
    "more machines than cells": (with_plan(machines=3), "more machines than cells"),
    "repeats as text": (with_plan(repeats="3"), "'repeats' is not a number"),
    "a bool for a number": (with_plan(concurrency=True), "'concurrency' is not a number"),
    "an image out of form": (with_plan(image="Not An Image!"), "neither a Space"),
    "a flavor out of form": (with_plan(flavor="a10g; rm -rf"), "flavor or namespace is not a name"),
    "a namespace out of form": (with_plan(namespace="a/b"), "flavor or namespace is not a name"),
    "a timeout of a year": (with_plan(timeout_s=365 * 86400), "timeout is not between 1 s and 7 days"),
    "where neither Jobs nor local": (with_plan(on="cloud"), "neither hf-jobs nor local"),
    "a task id leading elsewhere": (with_plan(tasks=["..", "dock-b"]), "not all task ids"),
    "a selection naming other tasks": (with_plan(selection=["--task", "dock-a"]), "does not name its tasks"),
    "a tier out of form": (with_plan(selection=["--split", "eval", "--tier", "stormy; rm"]), "--tier is not one of"),
    "a limit before a tier": (with_plan(selection=["--split", "eval", "--limit", "2", "--tier", "storm"]),
                              "nor --split S [--tier T ...] [--limit N]"),
    "a shard argument added": (added_to_args("--out", "/etc"), "not the ones its plan makes"),
    "a model slipped into the arguments": (added_to_args("--model", "baseline:naive"), "not the ones its plan"),
    "a secret in the server URL": (added_to_args("--env-url", "https://b.example/?token=x"), "looks like a secret"),
    "a limit out of bounds": (with_plan(run_args=[a if a != "1800.0" else "inf" for a in plan().run_args]),
                              "--wall-clock is not between 0 and 604800"),
    "a job id leading elsewhere": (with_shard(job_id="../../jobs"), "shard 1 has a field out of form"),
    "a stage out of form": (with_shard(stage="running; rm"), "shard 1 has a field out of form"),
    "a shard field unknown": (with_shard(command=["sh"]), "not an object of a shard's fields"),
    "a secret name out of form": ({**state_json(), "secret_names": ["A B"]}, "not variable names"),
}


@pytest.mark.parametrize("name", list(DAMAGED))
def test_a_damaged_or_hostile_state_gives_one_clear_error(name):
    data, why = DAMAGED[name]
    with pytest.raises(SweepStateError) as error:
        read(data)
    assert str(error.value).startswith("the sweep state here cannot be read (") and why in str(error.value)
    assert "\n" not in str(error.value) and len(str(error.value)) < 400


def test_secrets_in_the_server_url_are_refused_with_what_to_do():
    for url in ("https://user:pw@berth.example.org", "https://berth.example.org/?key=SECRET",
                "https://berth.example.org/?api_key=SECRET", "https://berth.example.org/?access_token=SECRET",
                "https://berth.example.org/?X-Amz-Signature=SECRET", "https://berth.example.org/?p=hf_abcdefghijkl",
                "https://berth.example.org/hf_abcdefghijklSECRET/ws", "https://berth.example.org/#token=SECRET",
                "https://berth.example.org/#hf_abcdefghijklSECRET"):
        with pytest.raises(SweepError) as error:
            check_env_url(url)
        assert "Job secret instead" in str(error.value) and "SECRET" not in str(error.value), url
    for url in ("https://berth.example.org", "http://127.0.0.1:8000/?split=eval", "wss://berth.example.org/ws"):
        check_env_url(url)
    with pytest.raises(SweepError, match="not a server URL"):
        check_env_url("file:///etc/passwd")
    # Before anything is spent: `sweep` says it in one line, without the secret.
    ran = sweep("--on", "local", "--model", "baseline:greedy", "--task", TASKS[0], "--env-url",
                "https://berth.example.org/?key=SECRET", "--dry-run")
    assert ran.code == 2 and "the query key 'key'" in ran.err and "SECRET" not in ran.err, ran.err


def test_a_tampered_local_state_reads_and_writes_only_inside_its_folder(tmp_path):
    folder, elsewhere = tmp_path / "rollouts", tmp_path / "elsewhere"
    elsewhere.mkdir()
    save_local(SweepState.new(plan(LOCAL, out=str(folder)), []))
    assert load_local(folder, "board-1").plan.out == str(folder)

    # A run name that is a path, as `--resume ../x` would give it.
    with pytest.raises(SweepStateError, match="must be 1-64 letters, digits"):
        load_local(folder, "../elsewhere/x")
    # A local sweep's state naming another folder for its shards' rollouts (`--out` in their command).
    moved = SweepState.new(plan(LOCAL, out=str(elsewhere)), [])
    (folder / ".sweeps" / "board-1.json").write_bytes(moved.to_bytes())
    with pytest.raises(SweepStateError, match="sends its shards' rollouts to another folder"):
        load_local(folder, "board-1")
    # Links out of the folder: its .sweeps (the state and the shards' logs) and its runs/ (the board).
    (folder / ".sweeps" / "board-1.json").unlink()
    (folder / ".sweeps").rmdir()
    (folder / ".sweeps").symlink_to(elsewhere, target_is_directory=True)
    (elsewhere / "board-1.json").write_bytes(SweepState.new(plan(LOCAL, out=str(folder)), []).to_bytes())
    with pytest.raises(SweepStateError, match="leads outside the rollout folder"):
        load_local(folder, "board-1")
    spawned = []
    shards = LocalShards(folder, {}, spawn=lambda *a: spawned.append(a))
    with pytest.raises(SweepStateError, match="leads outside the rollout folder"):
        shards.submit(plan(LOCAL, out=str(folder)), 1)
    (folder / "runs").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(SweepStateError, match="leads outside"):
        in_folder(folder, board_rel("board-1"))
    assert spawned == [] and sorted(os.listdir(elsewhere)) == ["board-1.json"]


def test_no_secret_goes_into_a_shards_command(tmp_path):
    """Whatever put it there, a command holding a secret's value is not submitted: a Job's command is public to
    whoever can inspect the Job."""
    leaky = plan(LOCAL, out=str(tmp_path), tasks=["dock-a", "tok-5e8d1c0b77"],
                 selection=["--task", "dock-a", "--task", "tok-5e8d1c0b77"])
    leaky = SweepPlan(**{**leaky.to_json(), "run_args": shard_run_args(
        models=leaky.models, selection=leaky.selection, repeats=1, run=leaky.run, concurrency=4, limits=LIMITS,
        env_url=None, dataset=None, out=str(tmp_path))})
    spawned, err = [], io.StringIO()
    runner = LocalShards(tmp_path, {"VLLM_API_KEY": "tok-5e8d1c0b77"}, spawn=lambda *a: spawned.append(a))
    sweep_ = Sweep(SweepState.new(leaky, ["VLLM_API_KEY"]), runner, rollouts=None,
                   secrets={"VLLM_API_KEY": "tok-5e8d1c0b77"}, console=Console(err=err))
    assert sweep_.submit(sweep_.state.shards) is False and spawned == []
    assert "holds the value of VLLM_API_KEY: nothing submitted" in err.getvalue()
    assert "tok-5e8d1c0b77" not in err.getvalue()
    assert not Path(tmp_path, ".sweeps").exists()  # nor written in a state file, which holds the command


def test_a_failed_shards_log_leaves_a_masked_echo_of_a_secret_scrubbed(tmp_path):
    """A local shard's own output (its log, shown when it fails) goes through the one scrubber (rollouts.scrub): a
    Hub error quoting the token masked, `hf_PqRs…8Rd2`, reaches the terminal as `[redacted]`."""
    import sys

    from tqdm import tqdm

    from batch.sweep_local import spawn_process
    from batch.sweep_state import ShardJob

    token = "hf_PqRsTuVwXyZaBcDeFgHiJkLmNoPq8Rd2"
    echo = "import os; t = os.environ['HF_TOKEN']; print(f'401 Client Error: invalid token {t[:7]}…{t[-4:]}')"

    def spawn(command, env, cwd, log):
        return spawn_process([sys.executable, "-c", echo + "; raise SystemExit(1)"], env, cwd, log)

    runner = LocalShards(tmp_path, {"HF_TOKEN": token}, spawn=spawn)
    err = io.StringIO()
    sweep_ = Sweep(SweepState.new(plan(LOCAL, out=str(tmp_path)), ["HF_TOKEN"]), runner, rollouts=None,
                   secrets={"HF_TOKEN": token}, console=Console(err=err))
    job_id, _ = runner.submit(sweep_.plan, 1)
    for _ in range(300):
        if runner.inspect(job_id).stage != "RUNNING":
            break
        time.sleep(0.05)
    assert "invalid token hf_PqRs…8Rd2" in "\n".join(runner.logs(job_id, 10))  # what the shard really said
    view = runner.inspect(job_id)
    with tqdm(file=err, disable=False) as bar:
        sweep_._tell_failure(ShardJob(1, job_id, view.stage, view.message), bar)
    said = err.getvalue()
    assert "401 Client Error: invalid token [redacted]" in said and "PqRs" not in said and "8Rd2" not in said
