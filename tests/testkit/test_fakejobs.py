"""The local Jobs peer (testkit/fakejobs.py) answers what huggingface_hub's own Jobs calls send: the sweep's tests
are only as good as this peer's likeness to the Hub, so it is checked through HfApi itself, with real processes."""

from __future__ import annotations

import time

import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError

from testkit.fakejobs import running_jobs_hub

TOKEN = "hf_peer_token"
PRINT_ENV = ("import os, sys; print('greeting', os.environ.get('GREETING')); "
             "print('secret', os.environ.get('SHH') == 'hush'); print('hub', os.environ['HF_ENDPOINT']); sys.exit(3)")


def settle(api: HfApi, job_id: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while (stage := api.inspect_job(job_id=job_id, namespace="arena-user").status.stage) in ("SCHEDULING",
                                                                                             "RUNNING"):
        assert time.monotonic() < deadline, f"job {job_id} still {stage}"
        time.sleep(0.05)
    return stage


def test_the_peer_answers_huggingface_hubs_jobs_calls(tmp_path):
    with running_jobs_hub(tmp_path, token=TOKEN, orgs=("arena",), without_jobs=("arena",)) as (hub, jobs):
        api = HfApi(endpoint=hub.url, token=TOKEN)
        assert api.whoami()["name"] == "arena-user"
        cpu = next(h for h in api.list_jobs_hardware() if h.name == "cpu-basic")
        assert cpu.unit_label == "minute" and cpu.unit_cost_usd > 0

        job = api.run_job(image="hf.co/spaces/arena/berth-arena", command=["python", "-c", PRINT_ENV],
                          env={"GREETING": "hi"}, secrets={"SHH": "hush"}, labels={"arena-sweep": "s1"},
                          namespace="arena-user")
        assert job.space_id == "arena/berth-arena" and job.status.stage == "RUNNING"
        assert jobs.received[0]["secrets"] == {"SHH": "hush"} and jobs.received[0]["environment"] == {"GREETING": "hi"}
        assert settle(api, job.id) == "ERROR"
        done = api.inspect_job(job_id=job.id, namespace="arena-user")
        assert "exit code: 3" in done.status.message and done.secrets == {"SHH": None}  # never handed back
        logs = list(api.fetch_job_logs(job_id=job.id, namespace="arena-user"))
        assert logs == ["greeting hi", "secret True", f"hub {hub.url}"]  # secrets arrive as the environment
        assert list(api.fetch_job_logs(job_id=job.id, namespace="arena-user", tail=1)) == [f"hub {hub.url}"]
        assert [j.id for j in api.list_jobs(namespace="arena-user", labels={"arena-sweep": "s1"})] == [job.id]
        assert list(api.list_jobs(namespace="arena-user", labels={"arena-sweep": "s2"})) == []

        sleeper = api.run_job(image="python:3.11", command=["python", "-c", "import time; time.sleep(60)"],
                              namespace="arena-user")
        api.cancel_job(job_id=sleeper.id, namespace="arena-user")
        assert settle(api, sleeper.id) == "CANCELED"
        late = api.run_job(image="python:3.11", command=["python", "-c", "import time; time.sleep(60)"],
                           timeout=1, namespace="arena-user")
        time.sleep(1.2)
        assert settle(api, late.id) == "ERROR"
        assert api.inspect_job(job_id=late.id, namespace="arena-user").status.message == "Job timed out"

        jobs.fail_next(match="--shard 2/2")
        failing = api.run_job(image="python:3.11", command=["python", "-c", "pass", "--shard 2/2"],
                              namespace="arena-user")
        assert failing.status.stage == "ERROR" and jobs.jobs[failing.id].process is None

        for refused, status in ((lambda: api.run_job(image="python:3.11", command=["true"], flavor="h900-huge",
                                                     namespace="arena-user"), 400),
                                (lambda: next(iter(api.list_jobs(namespace="arena"))), 403),
                                (lambda: next(iter(api.list_jobs(namespace="someone-else"))), 403),
                                (lambda: HfApi(endpoint=hub.url, token="hf_wrong").whoami(), 401)):
            with pytest.raises(HfHubHTTPError) as caught:
                refused()
            assert caught.value.response.status_code == status
