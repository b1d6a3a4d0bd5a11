"""A sweep's shards as Hugging Face Jobs, through huggingface_hub (`run_job`, `inspect_job`, `fetch_job_logs`,
`cancel_job`, `list_jobs`, `list_jobs_hardware`, `whoami`); no HTTP of our own.

`open_jobs` checks, before anything is spent, that the token works and may write, that the namespace can run
Jobs and that the flavor exists; each refusal is a SweepError saying what to do. A Job gets its keys as secrets
(never in its command or plain environment), and labels that tie it to its sweep and shard.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.providers.base import scrub
from batch.sweep_plan import SweepError, SweepPlan

SWEEP_LABEL, SHARD_LABEL = "arena-sweep", "arena-shard"
# What a shard's plain environment holds: nothing secret, only that its logs arrive line by line.
JOB_ENV = {"PYTHONUNBUFFERED": "1"}
NO_JOBS = (401, 402, 403, 404)


@dataclass(frozen=True)
class JobView:
    """A Job as last seen: its stage (huggingface_hub's JobStage names), why it ended, where to look at it."""

    stage: str
    message: str | None = None
    url: str | None = None
    running_s: float | None = None


@dataclass(frozen=True)
class Flavor:
    name: str
    usd_per_hour: float | None


class HubJobs:
    """Submits, inspects, cancels and reads the logs of a sweep's Jobs in one namespace."""

    where = "Hugging Face Jobs"

    def __init__(self, api: Any, namespace: str, secrets: dict[str, str]) -> None:
        self.api = api
        self.namespace = namespace
        self._secrets = secrets

    def submit(self, plan: SweepPlan, shard: int) -> tuple[str, JobView]:
        labels = {SWEEP_LABEL: plan.run, SHARD_LABEL: f"{shard}-of-{plan.machines}"}
        name = f"{plan.run}-shard-{shard}-of-{plan.machines}".replace(".", "-")
        job = self.api.run_job(image=plan.image, command=plan.command(shard), env=dict(JOB_ENV),
                               secrets=dict(self._secrets) or None, flavor=plan.flavor, timeout=plan.timeout_s,
                               labels=labels, name=name, namespace=self.namespace)
        return job.id, _view(job)

    def inspect(self, job_id: str) -> JobView:
        return _view(self.api.inspect_job(job_id=job_id, namespace=self.namespace))

    def inspect_sweep(self, run: str, job_ids: list[str]) -> dict[str, JobView]:
        """Every Job of the sweep in one listing (by its label) rather than one request per Job: a sweep of many
        machines polled every few seconds would otherwise spend the Hub's rate limit. A Job the listing lacks is
        asked for alone."""
        wanted = set(job_ids)
        views = {job.id: _view(job) for job in self.api.list_jobs(namespace=self.namespace, labels={SWEEP_LABEL: run})
                 if job.id in wanted}
        return {**views, **{job_id: self.inspect(job_id) for job_id in wanted - set(views)}}

    def cancel(self, job_id: str) -> None:
        self.api.cancel_job(job_id=job_id, namespace=self.namespace)

    def logs(self, job_id: str, lines: int) -> list[str]:
        return list(self.api.fetch_job_logs(job_id=job_id, namespace=self.namespace, tail=lines))


def open_jobs(api: Any, namespace: str | None, flavor: str) -> tuple[str, Flavor]:
    """(the namespace the Jobs run in, the flavor with its price), after checking that this token may run Jobs
    there; SweepError saying what to do otherwise. Spends nothing: whoami, one page of the namespace's Jobs, the
    hardware list."""
    from huggingface_hub.errors import HfHubHTTPError

    try:
        me = api.whoami()
    except HfHubHTTPError as exc:
        if _status(exc) == 401:
            raise SweepError("the Hugging Face token was refused: make one with write access at "
                             "https://huggingface.co/settings/tokens and set HF_TOKEN") from None
        raise SweepError(f"the Hub did not say who the token belongs to ({describe(exc)})") from None
    except Exception as exc:  # a refused connection, a timeout, offline mode: nothing to go on
        raise SweepError(f"cannot reach the Hub at {api.endpoint} ({describe(exc)})") from None
    role = ((me.get("auth") or {}).get("accessToken") or {}).get("role")
    if role == "read":
        raise SweepError("the Hugging Face token is read-only: the Jobs need one that may write (to run Jobs and "
                         "push rollouts); make one at https://huggingface.co/settings/tokens")
    mine = [me["name"], *[org.get("name") for org in me.get("orgs") or [] if org.get("name")]]
    namespace = namespace or me["name"]
    if namespace not in mine:
        raise SweepError(f"the token's account {me['name']} cannot run Jobs in {namespace!r}: pass --namespace with "
                         f"one of {', '.join(mine)}")
    try:
        next(iter(api.list_jobs(namespace=namespace)), None)
    except HfHubHTTPError as exc:
        if _status(exc) in NO_JOBS:
            raise SweepError(f"{namespace} cannot run Jobs ({describe(exc)}): Jobs need a PRO account or a Team or "
                             "Enterprise organization, and a token allowed to start them; pick another with "
                             "--namespace") from None
        raise SweepError(f"the Jobs of {namespace} cannot be listed ({describe(exc)})") from None
    try:
        hardware = api.list_jobs_hardware()
    except Exception as exc:  # without the list the flavor cannot be checked nor priced
        raise SweepError(f"the Hub did not list the Jobs hardware ({describe(exc)})") from None
    found = next((h for h in hardware if h.name == flavor), None)
    if found is None:
        names = ", ".join(sorted(h.name for h in hardware))
        raise SweepError(f"unknown flavor {flavor!r}: pass --flavor with one of {names}")
    from batch.sweep_cost import hourly_usd

    return namespace, Flavor(found.name, hourly_usd(found.unit_cost_usd, found.unit_label))


def describe(exc: BaseException, secrets: dict[str, str] | None = None) -> str:
    """A one-line reason for a failed Hub call, with no secret in it."""
    status = _status(exc)
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    text = f"HTTP {status}: {first}" if status and str(status) not in first else first
    return scrub(text, secrets or {})[:240]


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def _view(job: Any) -> JobView:
    stage = getattr(job.status.stage, "value", job.status.stage)
    running = job.durations.running_secs if job.durations is not None else None
    if running is None and job.started_at and job.finished_at:
        running = (job.finished_at - job.started_at).total_seconds()
    return JobView(str(stage), job.status.message, job.url, running)
