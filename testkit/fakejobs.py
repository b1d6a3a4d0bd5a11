"""A local peer speaking the Hugging Face Jobs API as huggingface_hub 2.4 calls it, mounted on a FakeHub, so one
endpoint (HF_ENDPOINT) serves the dataset and the Jobs, as the Hub does.

Routes (what `HfApi.whoami`, `run_job`, `inspect_job`, `fetch_job_logs`, `cancel_job`, `list_jobs` and
`list_jobs_hardware` send): GET /api/whoami-v2, GET /api/jobs/hardware, GET and POST /api/jobs/{namespace},
GET /api/jobs/{namespace}/{id}, GET /api/jobs/{namespace}/{id}/logs (server-sent events), POST
/api/jobs/{namespace}/{id}/cancel. Every one wants the Hub's token (`Authorization: Bearer ...`).

Each Job runs its command as a local child process (the image is not pulled: the command is expected to be
`python -m ...`, run from this checkout), in a folder of its own (its "machine"), with its environment and its
secrets as the process's environment plus HF_ENDPOINT pointing at the hub: what a Job does with them. Its stdout
and stderr are its logs. Stages are the real API's: SCHEDULING, RUNNING, COMPLETED, ERROR, CANCELED; a Job past
its timeout is stopped and ends in ERROR. `spawn` starts the processes (testkit/warm_python.py's forks through
`warm_spawn`, so a shard starts in milliseconds).

Faults and pauses, for the sweep's tests:
    jobs.fail_next(match="--shard 2/4")    # the next Job whose command contains this fails at once (ERROR)
    jobs.hold(); ...; jobs.release()       # Jobs submitted meanwhile wait in SCHEDULING until released
`jobs.received` keeps every create request's body as sent; `jobs.jobs` each Job with its process.

Use:  with running_jobs_hub(tmp_path, token="hf_x", spawn=warm_spawn(warm_python)) as (hub, jobs): ...
"""

from __future__ import annotations

import copy
import json
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from batch.sweep_local import ShardProcess, Spawn, spawn_process
from testkit.fakehub import FakeHub
from testkit.warm_python import WarmPython

ROOT = Path(__file__).resolve().parents[1]
HARDWARE = [
    {"name": "cpu-basic", "prettyName": "CPU Basic", "cpu": "2 vCPU", "ram": "16 GB", "ephemeralStorage": "50 GB",
     "accelerator": None, "unitCostMicroUSD": 167, "unitCostUSD": 0.000167, "unitLabel": "minute"},
    {"name": "cpu-upgrade", "prettyName": "CPU Upgrade", "cpu": "8 vCPU", "ram": "32 GB",
     "ephemeralStorage": "50 GB", "accelerator": None, "unitCostMicroUSD": 500, "unitCostUSD": 0.0005,
     "unitLabel": "minute"},
    {"name": "a10g-small", "prettyName": "Nvidia A10G - small", "cpu": "4 vCPU", "ram": "15 GB",
     "ephemeralStorage": "110 GB", "accelerator": {"type": "gpu", "model": "A10G", "quantity": "1",
                                                   "vram": "24 GB", "manufacturer": "Nvidia"},
     "unitCostMicroUSD": 16667, "unitCostUSD": 0.016667, "unitLabel": "minute"},
]


@dataclass
class FakeJob:
    id: str
    namespace: str
    spec: dict
    folder: Path
    stage: str = "SCHEDULING"
    message: str | None = None
    created: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    process: ShardProcess | None = None
    env: dict[str, str] = field(default_factory=dict)  # what its process was given
    canceled: bool = False

    def output(self) -> str:
        return self.process.output() if self.process is not None else ""


class FakeJobs:
    def __init__(self, hub: FakeHub, root: Path, *, user: str = "arena-user", orgs: tuple[str, ...] = ("arena",),
                 without_jobs: tuple[str, ...] = (), role: str = "write", spawn: Spawn | None = None,
                 hardware: list[dict] | None = None) -> None:
        self.hub = hub
        self.root = Path(root)
        self.user, self.orgs, self.without_jobs, self.role = user, orgs, without_jobs, role
        self.hardware = HARDWARE if hardware is None else hardware
        self.received: list[dict] = []
        self.jobs: dict[str, FakeJob] = {}
        self._spawn = spawn or _cold_spawn
        self._failures: list[tuple[str, str]] = []
        self._held = False
        self._lock = threading.RLock()
        self._mount(hub.app)

    # -- control ---------------------------------------------------------------------------------------------------

    def fail_next(self, match: str = "", message: str = "injected: the Job's machine failed") -> None:
        """The next Job whose command (joined by spaces) contains `match` fails as it is created."""
        with self._lock:
            self._failures.append((match, message))

    def hold(self) -> None:
        with self._lock:
            self._held = True

    def release(self) -> None:
        with self._lock:
            self._held = False
            for job in self.jobs.values():
                if job.stage == "SCHEDULING":
                    self._start(job)

    def wait(self, timeout: float = 60) -> None:
        """Until no Job runs (their processes have ended)."""
        deadline = time.monotonic() + timeout
        while any(self._update(j) in ("RUNNING",) for j in list(self.jobs.values())):
            if time.monotonic() > deadline:
                raise TimeoutError("fake Jobs still running")
            time.sleep(0.05)

    def close(self) -> None:
        """Kill what still runs."""
        for job in self.jobs.values():
            if job.process is not None and job.process.poll() is None:
                with suppress(ProcessLookupError):
                    job.process.send_signal(signal.SIGKILL)

    # -- the Jobs --------------------------------------------------------------------------------------------------

    def _start(self, job: FakeJob) -> None:
        spec = job.spec
        job.env = {"PATH": os.environ.get("PATH", ""), "HOME": str(job.folder), "HF_HOME": str(job.folder / "hf"),
                   "HF_ENDPOINT": self.hub.url, "HF_HUB_DISABLE_TELEMETRY": "1", "PYTHONPATH": str(ROOT),
                   "JOB_ID": job.id, **(spec.get("environment") or {}), **(spec.get("secrets") or {})}
        command = [*spec["command"], *(spec.get("arguments") or [])]
        job.process = self._spawn(command, job.env, job.folder, job.folder / "logs.txt")
        job.stage, job.started = "RUNNING", time.time()

    def _update(self, job: FakeJob) -> str:
        with self._lock:
            if job.stage == "RUNNING" and job.process is not None:
                code = job.process.poll()
                timeout = job.spec.get("timeoutSeconds")
                if code is None and timeout and time.time() - (job.started or 0) > timeout:
                    job.process.send_signal(signal.SIGKILL)
                    job.stage, job.message, job.finished = "ERROR", "Job timed out", time.time()
                elif code is not None:
                    job.finished = time.time()
                    if job.canceled:
                        job.stage = "CANCELED"
                    elif code == 0:
                        job.stage = "COMPLETED"
                    else:
                        job.stage, job.message = "ERROR", f"Job failed with exit code: {code}"
            return job.stage

    def _info(self, job: FakeJob) -> dict:
        self._update(job)
        spec = job.spec
        image = {"spaceId": spec["spaceId"]} if spec.get("spaceId") else {"dockerImage": spec.get("dockerImage")}
        end = job.finished or time.time()
        durations = {"schedulingSecs": int((job.started or end) - job.created),
                     "runningSecs": int(end - job.started) if job.started else None,
                     "totalSecs": int(end - job.created)}
        owner_type = "user" if job.namespace == self.user else "org"
        return {"id": job.id, "createdAt": _iso(job.created), "startedAt": _iso(job.started),
                "finishedAt": _iso(job.finished), **image, "command": spec.get("command"),
                "arguments": spec.get("arguments") or [], "environment": spec.get("environment") or {},
                # The Hub never hands a secret back; its names only.
                "secrets": dict.fromkeys(spec.get("secrets") or {}), "flavor": spec.get("flavor"),
                "labels": spec.get("labels"), "status": {"stage": job.stage, "message": job.message},
                "durations": durations, "owner": {"id": f"id-{job.namespace}", "name": job.namespace,
                                                  "type": owner_type}}

    # -- the routes ------------------------------------------------------------------------------------------------

    def _mount(self, app: FastAPI) -> None:
        """Add the routes ahead of the hub's own, whose `/api/{kind}/{ns}/{name}` would match `/api/jobs/...`."""
        before = len(app.router.routes)
        app.add_api_route("/api/whoami-v2", self._on_whoami, methods=["GET"])
        app.add_api_route("/api/jobs/hardware", self._on_hardware, methods=["GET"])
        app.add_api_route("/api/jobs/{namespace}", self._on_list, methods=["GET"])
        app.add_api_route("/api/jobs/{namespace}", self._on_create, methods=["POST"])
        app.add_api_route("/api/jobs/{namespace}/{job_id}", self._on_inspect, methods=["GET"])
        app.add_api_route("/api/jobs/{namespace}/{job_id}/logs", self._on_logs, methods=["GET"])
        app.add_api_route("/api/jobs/{namespace}/{job_id}/cancel", self._on_cancel, methods=["POST"])
        added = app.router.routes[before:]
        del app.router.routes[before:]
        app.router.routes[0:0] = added

    def _refused(self, request: Request, namespace: str | None = None) -> Response | None:
        if self.hub.token and request.headers.get("authorization") != f"Bearer {self.hub.token}":
            return JSONResponse({"error": "Invalid credentials in Authorization header"}, status_code=401)
        if namespace is not None and namespace not in (self.user, *self.orgs):
            return JSONResponse({"error": f"You are not a member of {namespace}"}, status_code=403)
        if namespace in self.without_jobs:
            return JSONResponse({"error": "Jobs are available to PRO users and Team or Enterprise organizations"},
                                status_code=403)
        return None

    async def _on_whoami(self, request: Request):
        refused = self._refused(request)
        if refused:
            return refused
        return {"type": "user", "id": f"id-{self.user}", "name": self.user, "fullname": "Arena Tester",
                "isPro": True, "canPay": True,
                "orgs": [{"type": "org", "id": f"id-{org}", "name": org} for org in self.orgs],
                "auth": {"type": "access_token", "accessToken": {"displayName": "sweep-tests", "role": self.role}}}

    async def _on_hardware(self, request: Request):
        return self._refused(request) or self.hardware

    async def _on_list(self, namespace: str, request: Request):
        refused = self._refused(request, namespace)
        if refused:
            return refused
        labels = dict(item.split("=", 1) for item in request.query_params.getlist("label"))
        stages = set(request.query_params.getlist("stage"))
        found = [self._info(j) for j in list(self.jobs.values()) if j.namespace == namespace]
        return [info for info in found if (not stages or info["status"]["stage"] in stages)
                and all((info["labels"] or {}).get(k) == v for k, v in labels.items())]

    async def _on_create(self, namespace: str, request: Request):
        refused = self._refused(request, namespace)
        if refused:
            return refused
        spec = await request.json()
        with self._lock:
            self.received.append(copy.deepcopy(spec))
            if spec.get("flavor") not in {h["name"] for h in self.hardware}:
                return JSONResponse({"error": f"Invalid flavor: {spec.get('flavor')}"}, status_code=400)
            job = FakeJob(secrets.token_hex(12), namespace, spec, self.root / f"job-{len(self.jobs) + 1}")
            job.folder.mkdir(parents=True)
            self.jobs[job.id] = job
            failure = self._take_failure(" ".join(spec.get("command") or []))
            if failure is not None:
                job.stage, job.message, job.finished = "ERROR", failure, time.time()
            elif not self._held:
                self._start(job)
        return self._info(job)

    async def _on_inspect(self, namespace: str, job_id: str, request: Request):
        job, refused = self._find(request, namespace, job_id)
        return refused or self._info(job)

    async def _on_logs(self, namespace: str, job_id: str, request: Request):
        job, refused = self._find(request, namespace, job_id)
        if refused:
            return refused
        self._update(job)
        lines = job.output().splitlines() or ([job.message] if job.message else [])
        tail = request.query_params.get("tail")
        if tail is not None:
            lines = lines[-int(tail):] if int(tail) else []
        # huggingface_hub's reader without `follow` stops at the first line stamped more than a second after the
        # answer's Date header, and uvicorn refreshes that header only once a second (it lagged the Job's start
        # in 1 of 10 runs): the lines are stamped a second before the whole second the Job started in.
        stamp = _iso(int(job.started or job.created) - 1)
        events = [f"===== Job started at {_iso(job.started or job.created)} =====", *lines]
        body = "".join(f"data: {json.dumps({'data': line, 'timestamp': stamp})}\n\n" for line in events)
        return Response(body, media_type="text/event-stream")

    async def _on_cancel(self, namespace: str, job_id: str, request: Request):
        job, refused = self._find(request, namespace, job_id)
        if refused:
            return refused
        with self._lock:
            if self._update(job) in ("SCHEDULING", "RUNNING"):
                job.canceled = True
                if job.process is not None and job.process.poll() is None:
                    job.process.send_signal(signal.SIGTERM)
                else:
                    job.stage, job.finished = "CANCELED", time.time()
        return {}

    def _find(self, request: Request, namespace: str, job_id: str) -> tuple[FakeJob | None, Response | None]:
        refused = self._refused(request, namespace)
        job = self.jobs.get(job_id)
        if refused is None and (job is None or job.namespace != namespace):
            refused = JSONResponse({"error": "Job not found"}, status_code=404)
        return job, refused

    def _take_failure(self, command: str) -> str | None:
        for i, (match, message) in enumerate(self._failures):
            if match in command:
                del self._failures[i]
                return message
        return None


@contextmanager
def running_jobs_hub(root: Path, *, token: str, spawn: Spawn | None = None,
                     **options: Any) -> Iterator[tuple[FakeHub, FakeJobs]]:
    """A FakeHub serving the Jobs API too, on one port; the Jobs' processes are killed at the end."""
    hub = FakeHub(token=token)
    jobs = FakeJobs(hub, root, spawn=spawn, **options)
    hub.up()
    try:
        yield hub, jobs
    finally:
        jobs.close()
        hub.down()


class _WarmShard:
    def __init__(self, child: Any) -> None:
        self._child, self.pid = child, child.pid

    def poll(self) -> int | None:
        return self._child.poll()

    def send_signal(self, sig: int) -> None:
        with suppress(ProcessLookupError):
            self._child.send_signal(sig)

    def output(self) -> str:
        text = ""
        for stream in ("stdout", "stderr"):
            with suppress(FileNotFoundError):
                text += self._child.output(stream)
        return text


def warm_spawn(warm: WarmPython) -> Spawn:
    """A `spawn` that forks `python -m module ...` from the warm interpreter (anything else runs cold)."""
    def spawn(command: list[str], env: dict[str, str], cwd: Path, log: Path) -> ShardProcess:
        if len(command) > 2 and Path(command[0]).name.startswith("python") and command[1] == "-m":
            return _WarmShard(warm.popen(command[2], *command[3:], env=env, cwd=cwd))
        return _cold_spawn(command, env, cwd, log)

    return spawn


def _cold_spawn(command: list[str], env: dict[str, str], cwd: Path, log: Path) -> ShardProcess:
    """A Job's `python` is this interpreter (the image is not pulled)."""
    if command and command[0] == "python":
        command = [sys.executable, *command[1:]]
    return spawn_process(command, env, cwd, log)


def _iso(moment: float | None) -> str | None:
    if moment is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment)) + f".{int(moment % 1 * 1000):03d}Z"
