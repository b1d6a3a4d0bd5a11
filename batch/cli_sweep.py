"""`python -m agent sweep`: one batch over N machines, on Hugging Face Jobs (the default) or as local processes.

    python -m agent sweep --model M ... (--split S [--tier T] [--limit L] | --task ID ...) --machines N --dataset USER/REPO
                          [--space OWNER/NAME | --image IMAGE] [--flavor cpu-basic] [--timeout 6h] [--dry-run]
    python -m agent sweep --resume RUN | --status RUN | --cancel RUN     [--dataset USER/REPO] [--out DIR]
                          [--accept-remote-plan]

Each machine runs `python -m agent run ... --shard K/N --dataset USER/REPO` (batch/grid.py cuts the grid), so the
shards meet in the dataset. Before anything is spent the sweep checks the token, the namespace, the flavor, the
image and every model's key, and prints its plan with an estimate of what it costs (`--dry-run` stops there). Then
it submits one Job per shard, follows them (shards done, episodes saved in the dataset, failures) and ends with
the run's leaderboard. Its state is kept in `.sweeps/<run>.json`, in the rollout folder and in the dataset.

A sweep's plan is its owner's: `--resume` and `--cancel` act on this machine's copy, checked, and refuse a dataset
copy whose plan differs (anyone who may write the dataset may have written it), naming the fields;
`--accept-remote-plan` shows that plan and asks. Before a resume submits anything it prints the image, flavor,
namespace, command and the names of the secrets its Jobs get.
"""

from __future__ import annotations

import argparse
import secrets
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from agent.limits import DEFAULT_MAX_TOKENS, DEFAULT_MAX_TURNS, DEFAULT_WALL_CLOCK_S
from batch.grid import check_run_name, describe_tasks, positive, task_ids
from batch.sweep import Console, Sweep, saved_count
from batch.sweep_cost import describe as describe_estimate
from batch.sweep_cost import estimate
from batch.sweep_local import LocalShards, Spawn
from batch.sweep_plan import (
    HF_JOBS,
    LOCAL,
    SweepError,
    SweepPlan,
    check_env_url,
    job_secrets,
    parse_timeout,
    resolve_image,
)
from batch.sweep_plan import shard_run_args as shard_args
from batch.sweep_state import SweepState, SweepStateError, check_folder, load_from_hub, load_local, reconcile
from berth_env import TIERS
from rollouts import settings
from rollouts.layout import default_rollout_dir


def add_parser(commands: argparse._SubParsersAction) -> None:
    sweep = commands.add_parser("sweep", help="play a batch over N machines: Hugging Face Jobs or local processes",
                                description=__doc__.split("\n\n")[0])
    sweep.add_argument("--model", action="append", metavar="SPEC", help="provider:model[@effort], repeatable")
    which = sweep.add_mutually_exclusive_group()
    which.add_argument("--task", action="append", metavar="ID", help="a task id, repeatable")
    which.add_argument("--split", help="every task of a split (e.g. eval)")
    sweep.add_argument("--tier", action="append", choices=TIERS, help="only the split's tasks of this tier, repeatable")
    sweep.add_argument("--limit", type=positive, metavar="N",
                       help="N of the split's tasks, spread over the tiers (a seeded sample, as `run` draws it)")
    sweep.add_argument("--repeats", type=positive, default=1, metavar="R", help="play each cell R times")
    sweep.add_argument("--run", help="run name, also the sweep's name (default: sweep-<UTC time>)")
    sweep.add_argument("--env-url", help="a PortSimEnv v1 server for every shard; default: each embeds one")
    sweep.add_argument("--concurrency", type=positive, default=4, help="episodes in flight per model and machine")
    sweep.add_argument("--max-turns", type=int, default=DEFAULT_MAX_TURNS)
    sweep.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS)
    sweep.add_argument("--wall-clock", type=float, default=DEFAULT_WALL_CLOCK_S, help="seconds per episode")
    sweep.add_argument("--machines", type=positive, default=1, metavar="N", help="shards, one machine each")
    sweep.add_argument("--on", choices=(HF_JOBS, LOCAL), default=HF_JOBS, help="where (default: %(default)s)")
    sweep.add_argument("--image", help="the Jobs' image: hf.co/spaces/OWNER/NAME or a Docker image")
    sweep.add_argument("--space", metavar="OWNER/NAME", help="run the Jobs on this Space's image (else SPACE_ID)")
    sweep.add_argument("--flavor", default="cpu-basic", help="Jobs hardware (default: %(default)s)")
    sweep.add_argument("--timeout", default="6h", help="each Job's time limit, e.g. 90m, 6h (default: %(default)s)")
    sweep.add_argument("--namespace", help="user or organization the Jobs run in (default: the token's user)")
    sweep.add_argument("--dataset", help="Hub dataset the shards push to (required with hf-jobs)")
    sweep.add_argument("--out", type=Path, help="rollout folder (default: ROLLOUT_DIR or ./data/rollouts)")
    sweep.add_argument("--poll", type=float, default=15.0, metavar="SECONDS", help="how often to look at the Jobs")
    sweep.add_argument("--dry-run", action="store_true", help="print the plan and its estimate; submit nothing")
    action = sweep.add_mutually_exclusive_group()
    action.add_argument("--resume", metavar="RUN", help="submit again the shards whose Job failed, then follow")
    action.add_argument("--status", metavar="RUN", help="each shard's stage and episodes saved")
    action.add_argument("--cancel", metavar="RUN", help="cancel the sweep's Jobs still running")
    sweep.add_argument("--accept-remote-plan", action="store_true",
                       help="with --resume or --cancel: show the dataset's copy of the plan when it differs from this "
                            "machine's (or this machine has none) and ask before using it")


def main(args: argparse.Namespace, *, spawn: Spawn | None = None, console: Console | None = None) -> int:
    """Run the sweep command; `spawn` starts local shards (batch/sweep_local.py), `console` is where it talks."""
    console = console or Console()
    # What is read from the dataset (its index files, many versions of them over a long sweep) is cached only for
    # this command's life.
    with tempfile.TemporaryDirectory(prefix="arena-sweep-") as cache:
        try:
            if args.resume or args.status or args.cancel:
                return _existing(args, spawn, console, Path(cache))
            return _start(args, spawn, console, Path(cache))
        except (SweepError, SweepStateError) as exc:
            print(f"error: {exc}", file=console.err)
            return 2


def _start(args: argparse.Namespace, spawn: Spawn | None, console: Console, cache: Path) -> int:
    plan, secret_values = _plan(args)
    api = _hub_api(secret_values.get("HF_TOKEN")) if secret_values.get("HF_TOKEN") else None
    namespace, flavor = None, None
    if plan.on == HF_JOBS:
        from batch.sweep_jobs import open_jobs

        namespace, flavor = open_jobs(api, args.namespace, args.flavor)
        plan = replace(plan, namespace=namespace)
    try:
        plan.check()  # what is written in the state is what a resume will read back
    except ValueError as exc:
        raise SweepError(f"the sweep's plan: {exc}") from None
    existing = load_local(plan.out, plan.run) or (load_from_hub(api, plan.dataset, plan.run, cache)
                                                   if api is not None and plan.dataset else None)
    if existing is not None and not args.dry_run:
        raise SweepError(f"sweep {plan.run} exists: `--resume {plan.run}` mends it, `--status {plan.run}` shows it; "
                         "or pick another --run")
    sources = _sources(plan, api, cache)
    read = [(source, _rows(source) or []) for source in sources]
    rows = [row for _, found in read for row in found]
    where = " and ".join(_named(source) for source, found in read if found) or "here"
    guess = estimate(plan, rows, where, flavor.usd_per_hour if flavor else None)
    _print_plan(plan, sorted(secret_values), console)
    if args.limit or args.tier:
        console.say(describe_tasks(plan.tasks, args.split, args.limit, args.tier))
    console.say("estimate, before it starts:")
    for line in describe_estimate(guess, plan.flavor):
        console.say(f"  {line}")
    if args.dry_run:
        console.say("dry run: nothing submitted")
        return 0
    state = SweepState.new(plan, list(secret_values))
    sweep = _sweep(state, api, secret_values, sources[0], spawn, console, args.poll)
    sweep.usd_per_hour = flavor.usd_per_hour if flavor else None
    return _submit_and_follow(sweep, state.shards)


def _existing(args: argparse.Namespace, spawn: Spawn | None, console: Console, cache: Path) -> int:
    run = args.resume or args.status or args.cancel
    folder = Path(args.out or default_rollout_dir())
    token = _token()
    api = _hub_api(token) if token else None
    state, shown = _owned_state(args, run, folder, api, console, cache)
    if state.plan.on == HF_JOBS:  # this machine's folder keeps its copy, wherever the sweep was started
        state.plan = replace(state.plan, out=str(folder.resolve()))
    plan = state.plan
    if plan.on == HF_JOBS and api is None:
        raise SweepError("no Hugging Face token: set HF_TOKEN (or run `hf auth login`) to reach the sweep's Jobs")
    secret_values, usd_per_hour = {}, None
    if args.resume:
        secret_values = job_secrets(plan.models, token)
        if plan.on == HF_JOBS:  # the namespace is still one this token runs Jobs in, the flavor still the Hub's
            from batch.sweep_jobs import open_jobs

            usd_per_hour = open_jobs(api, plan.namespace, plan.flavor)[1].usd_per_hour
        state.secret_names = sorted(secret_values)
    sweep = _sweep(state, api, secret_values, _sources(plan, api, cache)[0], spawn, console, args.poll)
    sweep.usd_per_hour = usd_per_hour
    sweep.refresh()
    if args.status:
        return _print_status(sweep, console)
    if args.cancel:
        cancelled = sweep.cancel()
        console.say(f"sweep {run}: cancelled {len(cancelled)} Jobs; " + sweep.shards_line())
        return 0
    again = sorted([s for s in state.shards if s.needs_job] + sweep.short(sweep.saved_rows()), key=lambda s: s.shard)
    if again and not shown:  # what the Jobs will run, with which secrets (their names), before anything is sent
        _print_plan(plan, state.secret_names, console)
    console.say(f"sweep {run}: " + (f"submitting shard(s) {', '.join(str(s.shard) for s in again)} again"
                                    if again else "no shard to submit again; following the rest"))
    return _submit_and_follow(sweep, again)


def _owned_state(args: argparse.Namespace, run: str, folder: Path, api: Any, console: Console,
                 cache: Path) -> tuple[SweepState, bool]:
    """The sweep's state to act on (and whether its plan was just shown): this machine's copy, with the dataset's
    shards when its plan is the same. A dataset copy that differs, or is the only one, is refused for --resume and
    --cancel unless the owner passes --accept-remote-plan and says yes once shown it; --status (it changes
    nothing) shows it with a warning."""
    local = load_local(folder, run)
    if local is not None and args.dataset and args.dataset != local.plan.dataset:
        raise SweepError(f"sweep {run} here pushes to {local.plan.dataset or 'no dataset'}, not {args.dataset}: "
                         "drop --dataset, or give --out the folder of that sweep")
    dataset = args.dataset or (local.plan.dataset if local is not None else None)
    remote = None
    try:
        remote = load_from_hub(api, dataset, run, cache) if api is not None and dataset else None
    except SweepStateError as exc:  # damaged or hostile: with no copy here there is nothing to go on
        if local is None:
            raise
        console.say(f"warning: {exc}; this machine's copy stands (and replaces it at the next upload)")
    state, differences = reconcile(local, remote)
    if state is None:
        where = f"{folder} or {dataset}" if dataset else f"{folder} (--out names another rollout folder, " \
            "--dataset a dataset to look in)"
        raise SweepStateError(f"no sweep {run!r} in {where}")
    if not differences and local is not None:
        return state, False
    names = ", ".join(name for name, _, _ in differences)
    what = (f"the dataset's copy of sweep {run} ({dataset}) differs from this machine's in {names}" if differences
            else f"sweep {run} is known here only from the dataset's copy ({dataset})")
    if args.status:
        console.say(f"warning: {what}; shown as {'this machine' if local else 'the dataset'} has it")
        return state, False
    if not args.accept_remote_plan:
        raise SweepError(f"{what}, which anyone who may write to the dataset may have written: nothing submitted or "
                         "cancelled; `--accept-remote-plan` shows its plan and asks before using it")
    check_folder(remote, folder, f"{dataset}/.sweeps/{run}.json")
    _accept(remote, differences, what, _job_secret_names(remote.plan) if args.resume else [], console)
    return remote, True


def _accept(remote: SweepState, differences: list[tuple[str, Any, Any]], what: str, secret_names: list[str],
            console: Console) -> None:
    """Show the dataset's plan (and where it differs from this machine's) and ask; SweepError unless yes."""
    console.say(f"{what}:")
    for name, mine, theirs in differences:
        console.say(f"  {name}: here {_short(mine)}; in the dataset {_short(theirs)}")
    _print_plan(remote.plan, secret_names, console)
    console.err.write("use the dataset's plan above, its image, flavor and command, with your secrets? [y/N]: ")
    console.err.flush()
    try:
        answer = console.answers.readline().strip().lower()
    except (OSError, ValueError):
        answer = ""
    if not answer.startswith("y"):
        raise SweepError("the dataset's plan was not accepted: nothing submitted or cancelled")


def _short(value: Any) -> str:
    text = " ".join(value) if isinstance(value, list) else str(value)
    return text if len(text) <= 200 else text[:200] + "..."


def _job_secret_names(plan: SweepPlan) -> list[str]:
    """The secrets (names) a resume of `plan` would give its Jobs, for showing it before it is accepted."""
    try:
        return sorted(job_secrets(plan.models, _token()))
    except SweepError:
        return ["(a model's key is not set here)"]


def _submit_and_follow(sweep: Sweep, shards: list[Any]) -> int:
    run = sweep.plan.run
    try:
        if shards and not sweep.submit(shards):
            return 1
    except KeyboardInterrupt:  # between two submissions: what was submitted is in the state
        sweep.save("interrupted while submitting")
        sweep.console.say(f"interrupted while submitting: `--resume {run}` submits the rest, `--cancel {run}` "
                          "stops the Jobs submitted")
        return 130
    return sweep.follow()


def _plan(args: argparse.Namespace) -> tuple[SweepPlan, dict[str, str]]:
    """The sweep's plan and the secret values its shards need, after every check that needs no network."""
    if not args.model:
        raise SweepError("give at least one --model")
    if not (args.task or args.split):
        raise SweepError("give the tasks: --split S [--tier T] [--limit N] or --task ID ...")
    if args.task and (args.limit or args.tier):
        raise SweepError("--limit and --tier pick from a split: give --split with them, not --task")
    run = args.run or f"sweep-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(2)}"
    try:
        check_run_name(run)
    except ValueError as exc:
        raise SweepError(str(exc)) from None
    on_jobs = args.on == HF_JOBS
    if on_jobs and not args.dataset:
        raise SweepError("--dataset USER/REPO is required with --on hf-jobs: it is where the shards meet")
    image = resolve_image(args.image, args.space) if on_jobs else None
    timeout_s = parse_timeout(args.timeout) if on_jobs else None
    token = _token() if (on_jobs or args.dataset) else None
    if on_jobs and not token:
        raise SweepError("no Hugging Face token: set HF_TOKEN or run `hf auth login` (it submits the Jobs, and "
                         "the Jobs push with it)")
    secret_values = job_secrets(args.model, token)
    out = Path(args.out or default_rollout_dir()).resolve()
    if args.env_url:
        check_env_url(args.env_url)  # before the server is asked about the tasks: a URL with a secret goes nowhere
    else:
        from batch import cli_tasks

        cli_tasks.serve_tasks()  # the tasks a shard will be offered: TASKS_DATASET's, as the shards load them
    try:
        tasks = task_ids(args.task, args.split, args.limit, args.env_url, args.tier)
    except Exception as exc:  # an unknown task, a split with no tasks, a server that does not answer
        raise SweepError(f"cannot list the tasks: {exc}") from None
    # Each shard draws the same tasks from the same split, tiers and limit (batch.grid.task_ids).
    selection = ([a for t in tasks for a in ("--task", t)] if args.task
                 else ["--split", args.split, *[a for tier in args.tier or () for a in ("--tier", tier)],
                       *(["--limit", str(args.limit)] if args.limit else [])])
    limits = ["--max-turns", str(args.max_turns), "--max-tokens", str(args.max_tokens),
              "--wall-clock", str(args.wall_clock)]
    cells = len(tasks) * len(set(args.model))
    if args.machines > cells:
        raise SweepError(f"--machines {args.machines} is more than the {cells} cells of the grid")
    run_args = shard_args(models=list(dict.fromkeys(args.model)), selection=selection, repeats=args.repeats,
                          run=run, concurrency=args.concurrency, limits=limits, env_url=args.env_url,
                          dataset=args.dataset, out=None if on_jobs else str(out))
    plan = SweepPlan(run=run, models=list(dict.fromkeys(args.model)), tasks=tasks, repeats=args.repeats,
                     machines=args.machines, run_args=run_args, on=args.on, dataset=args.dataset, image=image,
                     flavor=args.flavor, timeout_s=timeout_s, namespace=args.namespace if on_jobs else None,
                     concurrency=args.concurrency, out=str(out), selection=selection)
    return plan, secret_values


def _sweep(state: SweepState, api: Any, secret_values: dict[str, str], rollouts: Any, spawn: Spawn | None,
           console: Console, poll_s: float) -> Sweep:
    if state.plan.on == HF_JOBS:
        from batch.sweep_jobs import HubJobs

        runner: Any = HubJobs(api, state.plan.namespace, secret_values)
    else:
        runner = LocalShards(state.plan.out, secret_values, spawn)
    return Sweep(state, runner, rollouts, api=api if state.plan.dataset else None, secrets=secret_values,
                 console=console, poll_s=poll_s)


class FolderRows:
    """A rollout folder's index rows, read whole with the index's readers and its precedence rule, as a source that
    `load()`s like the Hub's."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def load(self) -> Any:
        from rollouts.index.format import index_files, read_index_files
        from rollouts.sources import Loaded

        table, skipped = read_index_files(index_files(self.root))
        return Loaded("local", f"the folder {self.root}", table=table, skipped=skipped)


def _sources(plan: SweepPlan, api: Any, cache: Path) -> list[Any]:
    """Where the shards' rollouts are read: the dataset (Jobs) or the folder (local shards); then the other."""
    local = FolderRows(plan.out)
    if api is None or not plan.dataset:
        return [local]
    from rollouts.sources.hub import HubSource

    hub = HubSource(plan.dataset, endpoint=api.endpoint, token=api.token,
                    cache_dir=cache)
    return [hub, local] if plan.on == HF_JOBS else [local, hub]


def _named(source: Any) -> str:
    hub = getattr(source, "hub", None)
    return f"the dataset {hub.repo}" if hub is not None else f"the folder {source.root}"


def _rows(source: Any) -> list[dict] | None:
    loaded = source.load()
    return loaded.table.to_pylist() if loaded.table is not None else None


def _print_plan(plan: SweepPlan, secret_names: list[str], console: Console) -> None:
    per = plan.episodes() / plan.machines
    console.say(f"sweep {plan.run}: {len(plan.tasks)} tasks x {len(plan.models)} models x {plan.repeats} "
                f"repeat(s) = {plan.episodes()} episodes on {plan.machines} machine(s), about {per:.0f} each")
    if plan.on == HF_JOBS:
        timeout = f"{plan.timeout_s / 3600:g}h" if plan.timeout_s else "the Hub's default"
        console.say(f"  where: Hugging Face Jobs in {plan.namespace}, image {plan.image}, flavor {plan.flavor}, "
                    f"timeout {timeout}")
    else:
        console.say(f"  where: {plan.machines} local process(es), rollouts in {plan.out}")
    if plan.dataset:
        console.say(f"  rollouts: dataset {plan.dataset}, run {plan.run} (state in its .sweeps/{plan.run}.json)")
    console.say(f"  secrets for the shards: {', '.join(secret_names) or 'none'} (values never printed or sent "
                "in a command)")
    console.say(f"  shard 1/{plan.machines} runs: {' '.join(plan.command(1))}")
    if plan.machines > 1:
        n = plan.machines
        console.say("  shard 2/2: the same with --shard 2/2" if n == 2 else
                    f"  shards 2/{n} to {n}/{n}: the same, each with its own --shard")


def _print_status(sweep: Sweep, console: Console) -> int:
    plan = sweep.plan
    rows = sweep.saved_rows()
    total = "?" if rows is None else saved_count(plan, rows)
    where = f"Hugging Face Jobs in {plan.namespace}" if plan.on == HF_JOBS else "local processes"
    print(f"sweep {plan.run} on {where}: {sweep.shards_line()}; episodes saved: {total}/{plan.episodes()}",
          file=console.out)
    for shard in sweep.state.shards:
        saved = "?" if rows is None else saved_count(plan, rows, shard.shard)
        why = f"  {shard.message}" if shard.message else ""
        print(f"  shard {shard.shard}/{plan.machines}  {shard.stage:<10} {saved}/{plan.episodes(shard.shard)} "
              f"episodes  {shard.job_id or '-'}  {shard.url or ''}{why}".rstrip(), file=console.out)
    sweep.save()
    return 0


def _token() -> str | None:
    token = settings.HF_TOKEN.get()
    if token:
        return token
    from huggingface_hub import get_token

    return get_token()


def _hub_api(token: str | None) -> Any:
    from huggingface_hub import HfApi

    # HF_ENDPOINT as the process has it now (huggingface_hub reads it once, at its import).
    return HfApi(endpoint=settings.HF_ENDPOINT.get(), token=token)

