"""What a sweep is before anything is spent: its grid, the `python -m agent run --shard K/N` command each machine
runs, where the machines are (Hugging Face Jobs running a Space's or a Docker image, or local processes), and the
secrets its Jobs get.

Every check here raises SweepError with one line that says what to do, before any Job is submitted.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any
from urllib.parse import urlsplit

from agent.grid import grid_cells
from agent.providers.registry import MissingKey, parse_spec, provider_class
from agent.spec import SpecError

HF_JOBS, LOCAL = "hf-jobs", "local"
# The forms huggingface_hub's run_job reads as a Space (it sends them as `spaceId`).
SPACE_PREFIXES = ("https://huggingface.co/spaces/", "https://hf.co/spaces/", "huggingface.co/spaces/",
                  "hf.co/spaces/")
SPACE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
# Docker's reference grammar, in short: [host[:port]/]path[:tag][@sha256:digest], lower-case path components.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
DOCKER_REF = re.compile(rf"(?:[A-Za-z0-9.-]+(?::\d+)?/)?{_COMPONENT}(?:/{_COMPONENT})*"
                        rf"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})?(?:@sha256:[0-9a-f]{{64}})?")
TIMEOUT = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
# Where a provider sends requests when not to its default server: a Job needs it as much as the key. Sent as a
# secret too: such a URL may carry credentials, and a Job's plain environment is shown to whoever inspects it.
ENDPOINT_ENV = {"hf": "HF_ROUTER_URL", "vllm": "VLLM_BASE_URL"}


class SweepError(Exception):
    """Refused before anything is spent; the message is one line saying what to do."""


@dataclass(frozen=True)
class SweepPlan:
    """One sweep: the grid, how it is cut and the shared arguments of the shards' `agent run`."""

    run: str
    models: list[str]
    tasks: list[str]  # the ids the shards will play, resolved when the sweep was planned
    repeats: int
    machines: int
    run_args: list[str]  # `python -m agent run` arguments every shard shares (without --shard)
    on: str = HF_JOBS
    dataset: str | None = None
    image: str | None = None
    flavor: str = "cpu-basic"
    timeout_s: int | None = None
    namespace: str | None = None
    concurrency: int = 4
    out: str = ""  # the local rollout folder: the sweep's state, and the rollouts of local shards
    selection: list[str] = field(default_factory=list)  # how the shards pick the tasks (--split/--limit or --task)

    def command(self, shard: int) -> list[str]:
        """What machine `shard` (1-based) runs."""
        return ["python", "-m", "agent", "run", *self.run_args, "--shard", f"{shard}/{self.machines}"]

    def cells(self, shard: int | None = None) -> list[tuple[str, str]]:
        """The (model, task) cells of the grid, or of one shard's slice."""
        return grid_cells(self.tasks, self.models, None if shard is None else (shard, self.machines))

    def episodes(self, shard: int | None = None) -> int:
        return len(self.cells(shard)) * self.repeats

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> SweepPlan:
        if not isinstance(data, dict):
            raise ValueError("the sweep's plan is not an object")
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def shard_run_args(*, models: list[str], selection: list[str], repeats: int, run: str, concurrency: int,
                   limits: list[str], env_url: str | None, dataset: str | None, out: str | None) -> list[str]:
    """The `agent run` arguments every shard shares. Nothing secret: a Job's command is shown to whoever can
    inspect it, so a server URL carrying credentials is refused."""
    if env_url and (urlsplit(env_url).username or urlsplit(env_url).password):
        raise SweepError("--env-url carries credentials (user:pass@): a Job's command is visible to whoever can "
                         "inspect it; give a URL without them")
    args = [a for m in models for a in ("--model", m)] + selection
    args += ["--repeats", str(repeats), "--run", run, "--concurrency", str(concurrency), *limits]
    if env_url:
        args += ["--env-url", env_url]
    if dataset:
        args += ["--dataset", dataset]
    if out:
        args += ["--out", out]
    return args


def resolve_image(image: str | None, space: str | None, environ: dict[str, str] | None = None) -> str:
    """The image the Jobs run: --image as given, else the Space named by --space or SPACE_ID (where this code is
    deployed). SweepError when there is none, or it is neither a Space nor a Docker image reference."""
    environ = os.environ if environ is None else environ
    if image is None:
        space = space or environ.get("SPACE_ID")
        if not space:
            raise SweepError("no image for the Jobs: pass --space OWNER/NAME (the Space that runs this arena) or "
                             "--image, or run the sweep from the Space (SPACE_ID)")
        if not SPACE_ID.fullmatch(space):
            raise SweepError(f"--space {space[:80]!r} is not OWNER/NAME")
        return f"hf.co/spaces/{space}"
    for prefix in SPACE_PREFIXES:
        if image.startswith(prefix):
            if SPACE_ID.fullmatch(image[len(prefix):]):
                return image
            break
    else:
        if len(image) <= 255 and DOCKER_REF.fullmatch(image):
            return image
    raise SweepError(f"--image {image[:80]!r} is neither a Space (hf.co/spaces/OWNER/NAME) nor a Docker image "
                     "reference (e.g. python:3.11 or ghcr.io/org/image:tag)")


def parse_timeout(text: str | None) -> int | None:
    """`90`, `90s`, `30m`, `6h`, `1d` (huggingface_hub's forms) -> seconds."""
    if text is None:
        return None
    match = TIMEOUT.fullmatch(text.strip())
    if not match or float(match.group(1)) <= 0:
        raise SweepError(f"--timeout {text[:40]!r}: give a duration such as 90m, 6h or 1d")
    return int(float(match.group(1)) * _UNIT_S[match.group(2)])


def job_secrets(models: list[str], hf_token: str | None) -> dict[str, str]:
    """The secrets the shards need and nothing more: each chosen model's key (and endpoint, when one is set), and
    the Hub token they push with. SweepError naming the variable when a model's key is missing."""
    secrets: dict[str, str] = {}
    for text in models:
        try:
            spec = parse_spec(text)
            api = provider_class(spec.provider)
            api.check_endpoint(spec)
        except SpecError as exc:
            raise SweepError(str(exc)) from None
        if api.key_env == "HF_TOKEN" and hf_token:
            continue  # the same token, sent once below
        try:
            key = api.resolve_key(spec)
        except MissingKey:
            raise SweepError(f"{text} needs {api.key_env}: set it in this shell (the Jobs get it as a secret, "
                             "never in their command or environment)") from None
        if key and api.key_env:
            secrets[api.key_env] = key
        endpoint = ENDPOINT_ENV.get(spec.provider)
        if endpoint and os.environ.get(endpoint):
            secrets[endpoint] = os.environ[endpoint]
    if hf_token:
        secrets["HF_TOKEN"] = hf_token
    return secrets


def scrub(text: str, secrets: dict[str, str] | list[str]) -> str:
    """`text` with every secret value masked, for anything printed that came from elsewhere (logs, errors)."""
    for value in (secrets.values() if isinstance(secrets, dict) else secrets):
        if value and len(value) >= 4:
            text = text.replace(value, "***")
    return text
