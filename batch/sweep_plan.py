"""What a sweep is before anything is spent: its grid, the `python -m agent run --shard K/N` command each machine
runs, where the machines are (Hugging Face Jobs running a Space's or a Docker image, or local processes), and the
secrets its Jobs get.

Every check here raises SweepError with one line that says what to do, before any Job is submitted. A plan read
back from a state file (this machine's or the dataset's, which anyone who may write the dataset may have written)
passes `SweepPlan.check` first: every field typed and bounded, and the shards' arguments exactly what the plan's
own fields make, so a damaged or hostile copy gives one clear error instead of a command.
"""

from __future__ import annotations

import re
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from agent.limits import valid_task_id
from agent.netguard import ServerRefused, clean_url
from agent.providers.registry import MissingKey, parse_spec, provider_class
from agent.spec import SpecError
from batch.grid import check_run_name, grid_cells
from berth_env import TIERS
from rollouts import settings

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
# A query key or value that looks like a credential: never in a Job's command, which whoever can inspect it reads.
SECRET_KEY = re.compile(r"(?i)key|token|secret|passw|pwd|auth|sig|credential|session|cookie|bearer|jwt")
SECRET_VALUE = re.compile(r"(?:hf|sk|ghp|gho|github_pat|xox[a-z])[-_][A-Za-z0-9_-]{8,}")
# Bounds on a plan read back from a state file: far beyond any real sweep, so only damage or hostility meets them.
MAX_TIMEOUT_S = 7 * 86400
PLAN_BOUNDS = {"repeats": 1000, "machines": 1000, "concurrency": 1000, "models": 64, "tasks": 20000}
LIMIT_BOUNDS = {"--max-turns": (int, 1000), "--max-tokens": (int, 10_000_000), "--wall-clock": (float, 7 * 86400)}
FLAVOR = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
SPLIT = re.compile(r"[A-Za-z0-9_-]{1,32}")
PATH_MAX_CHARS = 4096


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
    selection: list[str] = field(default_factory=list)  # how the shards pick the tasks (--split/--tier/--limit, --task)

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
        """The plan a state file holds, checked (`check`); ValueError naming the first field that is wrong."""
        if not isinstance(data, dict):
            raise ValueError("its plan is not an object")
        values = {}
        for f in fields(cls):
            if f.name not in data:
                if f.default is MISSING and f.default_factory is MISSING:
                    raise ValueError(f"its plan has no {f.name!r}")
                continue
            if not _typed(data[f.name], _FIELD_TYPES[f.name]):
                raise ValueError(f"its plan's {f.name!r} is not {_FIELD_TYPES[f.name]}")
            values[f.name] = data[f.name]
        plan = cls(**values)
        plan.check()
        return plan

    def check(self) -> None:
        """ValueError naming what is wrong: a name, a bound, an image or flavor out of form, or shard arguments
        other than those the plan's own fields make (`shard_run_args`)."""
        check_run_name(self.run)
        for name in ("repeats", "machines", "concurrency"):
            if not 1 <= getattr(self, name) <= PLAN_BOUNDS[name]:
                raise ValueError(f"its {name} is not between 1 and {PLAN_BOUNDS[name]}")
        for name in ("models", "tasks"):
            items = getattr(self, name)
            if not 1 <= len(items) <= PLAN_BOUNDS[name] or len(set(items)) != len(items):
                raise ValueError(f"its {name} are not 1 to {PLAN_BOUNDS[name]} different names")
        for model in self.models:
            parse_spec(model)  # SpecError is a ValueError naming the spec
        if not all(valid_task_id(t) for t in self.tasks):
            raise ValueError("its tasks are not all task ids")
        if self.machines > len(self.tasks) * len(self.models):
            raise ValueError("it has more machines than cells")
        self._check_where()
        _check_selection(self.selection, self.tasks)
        _check_run_args(self)

    def _check_where(self) -> None:
        if self.on not in (HF_JOBS, LOCAL):
            raise ValueError(f"its 'on' is neither {HF_JOBS} nor {LOCAL}")
        if self.dataset is not None and not SPACE_ID.fullmatch(self.dataset):
            raise ValueError("its dataset is not OWNER/NAME")
        if not self.out or len(self.out) > PATH_MAX_CHARS or "\0" in self.out:
            raise ValueError("its rollout folder ('out') is not a path")
        if self.on == LOCAL:
            if self.image is not None or self.namespace is not None:
                raise ValueError("a local sweep names an image or a namespace")
            return
        if self.image is None or self.dataset is None or self.namespace is None:
            raise ValueError("a sweep on Jobs lacks its image, dataset or namespace")
        try:
            resolve_image(self.image, None)
        except SweepError as exc:
            raise ValueError(f"its image: {exc}") from None
        if not FLAVOR.fullmatch(self.flavor) or not NAMESPACE.fullmatch(self.namespace):
            raise ValueError("its flavor or namespace is not a name")
        if self.timeout_s is not None and not 1 <= self.timeout_s <= MAX_TIMEOUT_S:
            raise ValueError(f"its timeout is not between 1 s and {MAX_TIMEOUT_S // 86400} days")


_FIELD_TYPES = {"run": "a text", "models": "a list of texts", "tasks": "a list of texts", "repeats": "a number",
                "machines": "a number", "run_args": "a list of texts", "on": "a text", "dataset": "a text or null",
                "image": "a text or null", "flavor": "a text", "timeout_s": "a number or null",
                "namespace": "a text or null", "concurrency": "a number", "out": "a text",
                "selection": "a list of texts"}


def _typed(value: Any, kind: str) -> bool:
    if value is None:
        return kind.endswith("or null")
    if kind.startswith("a number"):
        return isinstance(value, int) and not isinstance(value, bool)
    if kind.startswith("a text"):
        return isinstance(value, str) and len(value) <= PATH_MAX_CHARS
    return isinstance(value, list) and all(isinstance(v, str) and len(v) <= PATH_MAX_CHARS for v in value)


def _check_selection(selection: list[str], tasks: list[str]) -> None:
    """`--task ID ...` naming exactly the plan's tasks, or `--split S [--tier T ...] [--limit N]`."""
    if selection[:1] == ["--task"]:
        if selection != [a for t in tasks for a in ("--task", t)]:
            raise ValueError("its selection does not name its tasks")
        return
    rest = selection[2:]
    limit = rest[-2:] if rest[-2:-1] == ["--limit"] else []
    tiers = rest[:len(rest) - len(limit)]
    if (len(selection) < 2 or len(selection) % 2 or selection[0] != "--split" or not SPLIT.fullmatch(selection[1])
            or any(flag != "--tier" for flag in tiers[::2])):
        raise ValueError("its selection is neither --task ID ... nor --split S [--tier T ...] [--limit N]")
    if any(tier not in TIERS for tier in tiers[1::2]):
        raise ValueError(f"its selection's --tier is not one of {', '.join(TIERS)}")
    if limit and (not (limit[1].isascii() and limit[1].isdigit())
                  or not len(tasks) <= int(limit[1]) <= PLAN_BOUNDS["tasks"]):
        raise ValueError("its selection's --limit is not a number of tasks")


def _check_run_args(plan: SweepPlan) -> None:
    """The shards' arguments must be exactly what `shard_run_args` makes of the plan's fields, its limits and its
    server: nothing added, dropped or changed (no other model, dataset, folder or server slipped in)."""
    args = plan.run_args
    given = dict(zip(args[::2], args[1::2], strict=False)) if len(args) % 2 == 0 else {}
    limits = []
    for flag, (kind, most) in LIMIT_BOUNDS.items():
        try:
            number = kind(given[flag])
        except (KeyError, ValueError):
            raise ValueError(f"its shard arguments lack a {flag} number") from None
        if not 0 < number <= most:
            raise ValueError(f"its shard arguments' {flag} is not between 0 and {most}")
        limits += [flag, given[flag]]
    try:
        rebuilt = shard_run_args(models=plan.models, selection=plan.selection, repeats=plan.repeats, run=plan.run,
                                 concurrency=plan.concurrency, limits=limits, env_url=given.get("--env-url"),
                                 dataset=plan.dataset, out=None if plan.on == HF_JOBS else plan.out)
    except SweepError as exc:
        raise ValueError(str(exc)) from None
    if rebuilt != args:
        raise ValueError("its shard arguments are not the ones its plan makes (one added, dropped or changed)")


def check_env_url(env_url: str) -> None:
    """SweepError when the server URL every shard gets is not a server URL, or carries a secret: credentials in
    `user:pass@`, or a query key or value that looks like a key or token. A Job's command is visible to whoever
    can inspect the Job; a secret goes to the Jobs as a Job secret, never in the command."""
    try:
        clean_url(env_url)
    except ServerRefused:
        raise SweepError(f"--env-url {env_url[:80]!r} is not a server URL (http(s):// or ws(s)://HOST)") from None
    parts = urlsplit(env_url)
    if parts.username or parts.password:
        raise SweepError("--env-url carries credentials (user:pass@): a Job's command is visible to whoever can "
                         "inspect it; give a URL without them, and a secret to the Jobs as a Job secret instead")
    for key, value in parse_qsl(parts.query, keep_blank_values=True) + parse_qsl(parts.fragment):
        if SECRET_KEY.search(key) or SECRET_VALUE.search(value):
            raise SweepError(f"--env-url carries what looks like a secret (the query key {key[:40]!r}): a Job's "
                             "command is visible to whoever can inspect it; give a URL without it, and a secret "
                             "to the Jobs as a Job secret instead")
    if SECRET_VALUE.search(parts.path) or SECRET_VALUE.search(parts.fragment):
        raise SweepError("--env-url carries what looks like a key or token in its path: a Job's command is visible "
                         "to whoever can inspect it; give a URL without it, and a secret to the Jobs as a Job "
                         "secret instead")


def command_secrets(command: list[str], secrets: dict[str, str]) -> list[str]:
    """The names of the secrets whose value shows up in `command` (a Job's command is public to its viewers)."""
    return sorted(name for name, value in secrets.items()
                  if value and len(value) >= 8 and any(value in arg for arg in command))


def shard_run_args(*, models: list[str], selection: list[str], repeats: int, run: str, concurrency: int,
                   limits: list[str], env_url: str | None, dataset: str | None, out: str | None) -> list[str]:
    """The `agent run` arguments every shard shares. Nothing secret: a Job's command is shown to whoever can
    inspect it, so a server URL carrying a secret is refused (`check_env_url`)."""
    if env_url:
        check_env_url(env_url)
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
    if image is None:
        space = space or settings.SPACE_ID.get(environ)
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
    seconds = int(float(match.group(1)) * _UNIT_S[match.group(2)]) if match else 0
    if not 1 <= seconds <= MAX_TIMEOUT_S:
        raise SweepError(f"--timeout {text[:40]!r}: give a duration such as 90m, 6h or 1d (at most "
                         f"{MAX_TIMEOUT_S // 86400}d)")
    return seconds


def job_secrets(models: list[str], hf_token: str | None) -> dict[str, str]:
    """The secrets the shards need and nothing more: each chosen model's key (and endpoint, when one is set), and
    the Hub token they push with, named as each provider declares them (its `key_env` and `endpoint_env`).
    SweepError naming the variable when a model's key is missing."""
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
        # Where the provider sends requests when not to its default server: a Job needs it as much as the key. A
        # secret too: such a URL may carry credentials, and a Job's plain environment is shown to whoever looks.
        endpoint = api.endpoint_url()
        if api.endpoint_env and endpoint:
            secrets[api.endpoint_env] = endpoint
    if hf_token:
        secrets["HF_TOKEN"] = hf_token
    return secrets

