"""A sweep's plan is its owner's. The dataset's copy of `.sweeps/<run>.json` can be written by anyone who may write
the dataset (every machine of the sweep), so `--resume` acts on this machine's copy and refuses a dataset copy
whose plan differs, naming the fields, unless the owner passes --accept-remote-plan and says yes once shown it;
before anything is submitted it prints the image and the names of the secrets. The Hub and its Jobs are the local
peer (testkit/fakejobs.py), held in SCHEDULING so that no shard plays: what is checked is what the Jobs API got."""

from __future__ import annotations

import json

from huggingface_hub import HfApi

from batch.sweep_plan import shard_run_args
from testkit.sweeps import REPO, SPACE, TOKEN, interrupt, jobs_endpoint, sweep

RUN = "sweep-owned"
ATTACKER_IMAGE = "docker.io/attacker/arena:latest"


def hostile(plan: dict) -> dict:
    """The plan a dataset writer would like the owner to run: every field the issue names, changed consistently
    (so it passes every check of a plan's form and differs only in whose it is)."""
    models = [*plan["models"], "baseline:naive"]
    run_args = shard_run_args(models=models, selection=plan["selection"], repeats=plan["repeats"], run=plan["run"],
                              concurrency=plan["concurrency"], limits=plan["run_args"][-10:-4],
                              env_url="https://berth.attacker.example", dataset=REPO, out=None)
    return {**plan, "image": ATTACKER_IMAGE, "flavor": "a10g-small", "timeout_s": 7 * 86400, "namespace": "arena",
            "models": models, "run_args": run_args}


def test_resume_refuses_a_dataset_copy_that_is_not_the_owners_plan_and_shows_what_it_will_run(tmp_path, monkeypatch,
                                                                                              env_url):
    here = tmp_path / "here"
    with jobs_endpoint(tmp_path, monkeypatch) as (hub, jobs):
        jobs.hold()  # no shard plays: each Job waits in SCHEDULING until cancelled
        started = sweep("--model", "baseline:greedy", "--split", "eval", "--limit", "2", "--run", RUN, "--machines",
                        "2", "--dataset", REPO, "--space", SPACE, "--env-url", env_url, "--out", str(here),
                        answers="c\n", wait=interrupt)
        assert started.code == 130 and "cancelled 2" in started.err, started.err
        owners = hub.files(REPO)[f".sweeps/{RUN}.json"]

        def upload(state: dict) -> None:  # what any writer of the dataset can do
            HfApi(endpoint=hub.url, token=TOKEN).upload_file(
                path_or_fileobj=json.dumps(state).encode(), path_in_repo=f".sweeps/{RUN}.json", repo_id=REPO,
                repo_type="dataset")

        state = json.loads(owners)
        upload({**state, "updated": "2999-01-01T00:00:00Z", "plan": hostile(state["plan"])})

        # Refused, in one line naming every field that differs; nothing submitted. The dataset's copy is read when
        # the owner names the dataset, and when not, from the dataset this machine's plan names.
        for named in (["--dataset", REPO], []):
            refused = sweep("--resume", RUN, *named, "--out", str(here), wait=interrupt)  # (Ctrl-C, did it follow)
            lines = refused.err.strip().splitlines()
            assert refused.code == 2 and len(lines) == 1, refused.err
            assert "differs from this machine's in models, arguments, image, flavor, timeout, namespace" in lines[0]
            assert "nothing submitted" in lines[0] and "--accept-remote-plan" in lines[0]
            assert len(jobs.received) == 2

        # Shown and asked: each differing field side by side, the image and the secrets' names; "no" submits nothing.
        declined = sweep("--resume", RUN, "--out", str(here), "--accept-remote-plan", answers="n\n", wait=interrupt)
        assert declined.code == 2 and "not accepted: nothing submitted" in declined.err, declined.err
        assert f"image: here hf.co/spaces/{SPACE}; in the dataset {ATTACKER_IMAGE}" in declined.err
        assert "timeout: here 21600; in the dataset 604800" in declined.err
        assert f"image {ATTACKER_IMAGE}, flavor a10g-small, timeout 168h" in declined.err
        assert "secrets for the shards: HF_TOKEN" in declined.err and TOKEN not in declined.err
        assert len(jobs.received) == 2

        # The owner's copy back in the dataset: the resume prints the image and the secrets before it submits.
        upload(state)
        resumed = sweep("--resume", RUN, "--out", str(here), answers="c\n", wait=interrupt)
        assert resumed.code == 130, resumed.err
        shown = resumed.err.index(f"image hf.co/spaces/{SPACE}, flavor cpu-basic, timeout 6h")
        assert shown < resumed.err.index("secrets for the shards: HF_TOKEN") < resumed.err.index("shard 1/2: ")
        assert [spec.get("spaceId") for spec in jobs.received[2:]] == [SPACE, SPACE]

        # From a machine with no copy of its own, the dataset's plan is used only once shown and accepted.
        (here / ".sweeps" / f"{RUN}.json").unlink()
        alone = sweep("--resume", RUN, "--dataset", REPO, "--out", str(here), wait=interrupt)
        assert alone.code == 2 and "known here only from the dataset's copy" in alone.err, alone.err
        accepted = sweep("--resume", RUN, "--dataset", REPO, "--out", str(here), "--accept-remote-plan",
                         answers="y\nc\n",
                         wait=interrupt)
        assert accepted.code == 130 and "use the dataset's plan above" in accepted.err, accepted.err
        assert len(jobs.received) == 6
        for spec in jobs.received:  # the attacker's image, flavor, namespace, server or model never reached a Job
            assert spec["spaceId"] == SPACE and spec["flavor"] == "cpu-basic" and spec["timeoutSeconds"] == 21600
            assert "attacker" not in json.dumps(spec) and "baseline:naive" not in spec["command"]
            assert spec["secrets"] == {"HF_TOKEN": TOKEN}
        assert {job.namespace for job in jobs.jobs.values()} == {"arena-user"}
