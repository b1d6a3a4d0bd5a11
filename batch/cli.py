"""Batch runs: `python -m agent run --model SPEC ... (--task ID ... | --split eval [--tier T] [--limit N])`; the board, the
arena ratings and regrading of stored rollouts are `python -m agent board` (batch/cli_board.py), `python -m agent
ratings` (batch/cli_ratings.py) and `python -m agent regrade` (batch/cli_regrade.py); the tasks offered, `python -m
agent tasks` (batch/cli_tasks.py); a rollout's gap to the optimum ship by ship, `python -m agent explain`
(batch/cli_explain.py); training sets from stored rollouts, `python -m agent export` (batch/cli_export.py).
Commands that play or grade tasks load the tasks dataset first (TASKS_DATASET: every dock-v1 task; offline, the
bundled eval tasks).

One thread pool per model, so a slow model never holds the workers a fast one needs. Every finished rollout goes
through the rollout store (the dataset layout in ROLLOUT_DIR; pushed to the Hub with --dataset). A rerun resumes:
episodes the folder already holds for the same run, model and task, without errors, are skipped. Every model spec
(the registry's one check, its key, its endpoint) and task id (the catalog's) is checked before anything is played:
a mistake exits 2 naming the bad value and the valid ones. An episode that ends before its first turn is said and
not saved (it is no rollout), and the run then exits 1.

`--repeats R` plays every task x model cell R times (resuming counts the rollouts a cell already has).
`--shard K/N` plays the K-th of N disjoint slices of the task x model grid (the rule is batch/grid.py's), so N
machines fill one dataset together. Every machine must be given the same models, tasks and repeats; each resumes
its own slice. `python -m agent sweep` (batch/cli_sweep.py) starts, follows and mends those N machines as
Hugging Face Jobs or local processes.
"""

from __future__ import annotations

import argparse
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from tqdm import tqdm

from agent.limits import DEFAULT_MAX_TOKENS, DEFAULT_MAX_TURNS, DEFAULT_WALL_CLOCK_S
from agent.providers.registry import MissingKey, parse_spec, playable, preload_and_freeze, provider_class
from agent.request import EpisodeRequest, Limits
from agent.spec import ModelSpec, SpecError
from batch import cli_board, cli_explain, cli_export, cli_ratings, cli_regrade, cli_sweep, cli_tasks
from batch.grid import check_run_name, describe_tasks, grid_cells, parse_shard, positive, task_ids
from berth_env import TIERS
from catalog.task_api import TaskAPIError
from rollouts import settings
from rollouts.journal import NoRoom
from rollouts.layout import default_rollout_dir
from rollouts.links import public_base, rollout_page
from rollouts.store import NotStarted, RolloutStore

# A rollout that ended like this is worth another try when the run is resumed.
RERUN_END_REASONS = ("error", "wall_clock", "stopped", "interrupted")
LOCAL_APP = "http://127.0.0.1:7860"  # where `python app.py` serves the share pages off a Space


# Every command but `run`, each a module with add_parser() and main(args).
COMMANDS = {"tasks": cli_tasks, "board": cli_board, "explain": cli_explain, "ratings": cli_ratings,
            "regrade": cli_regrade, "sweep": cli_sweep, "export": cli_export}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m agent", description="Run models on berth-planning tasks.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="play episodes and save every rollout")
    run.add_argument("--model", action="append", required=True, metavar="SPEC",
                     help="provider:model[@effort], repeatable (e.g. baseline:greedy, anthropic:claude-sonnet-5-5)")
    which = run.add_mutually_exclusive_group(required=True)
    which.add_argument("--task", action="append", metavar="ID", help="a task id, repeatable")
    which.add_argument("--split", help="every task of a split (e.g. eval)")
    run.add_argument("--tier", action="append", choices=TIERS, help="only the split's tasks of this tier, repeatable")
    run.add_argument("--limit", type=positive, metavar="N",
                     help="N of the split's tasks, spread over the tiers (a seeded sample; the ids are printed)")
    run.add_argument("--env-url", help="a PortSimEnv v1 server; default: start the embedded one")
    run.add_argument("--out", type=Path, help="rollout folder (default: ROLLOUT_DIR or ./data/rollouts)")
    run.add_argument("--run", default="default", help="run name; resuming uses it (default: %(default)s)")
    run.add_argument("--dataset", help="Hub dataset repo to push to (needs HF_TOKEN)")
    run.add_argument("--concurrency", type=int, default=4, help="episodes in flight per model (default: 4)")
    run.add_argument("--max-turns", type=int, default=DEFAULT_MAX_TURNS)
    run.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS)
    run.add_argument("--wall-clock", type=float, default=DEFAULT_WALL_CLOCK_S, help="seconds per episode")
    run.add_argument("--force", action="store_true", help="rerun episodes the folder already holds")
    run.add_argument("--repeats", type=positive, default=1, metavar="R",
                     help="play each task x model cell R times, e.g. to average over sampling (default: 1)")
    run.add_argument("--shard", type=parse_shard, metavar="K/N",
                     help="play only the K-th of N disjoint slices of the task x model grid (e.g. 2/4)")
    for command in (cli_board, cli_explain, cli_ratings, cli_regrade, cli_tasks, cli_sweep, cli_export):
        command.add_parser(commands)  # in the order --help lists them
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command in ("tasks", "regrade"):
        cli_tasks.serve_tasks()  # bounded: offline, the bundled tasks serve
    if args.command in COMMANDS:
        return COMMANDS[args.command].main(args)
    try:
        args.specs = {model: check_model(model) for model in args.model}
        check_run_name(args.run)
        if args.env_url is None:
            cli_tasks.serve_tasks()  # after the checks above, so a mistyped flag is said at once
        if args.task and args.limit:
            raise ValueError("--limit takes N tasks of a split: give --split with it, not --task")
        tasks = task_ids(args.task, args.split, args.limit, args.env_url, args.tier)
    except (SpecError, KeyError, ValueError, TaskAPIError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.limit or args.tier:
        print(describe_tasks(tasks, args.split, args.limit, args.tier), file=sys.stderr)
    return run_batch(args, tasks)


def check_model(text: str) -> ModelSpec:
    """The spec, parsed, once this process can play it, or SpecError naming what to fix: the one check of a spec
    (registry.parse_spec, which names the valid choices), its key in this shell's environment, its endpoint."""
    try:
        return playable(text, {})[0]
    except MissingKey:
        api = provider_class(parse_spec(text).provider)
        raise SpecError(f"{text} needs an API key: set {api.key_env} in this shell") from None


def run_batch(args: argparse.Namespace, task_ids: list[str]) -> int:
    """Play every (model, task) the folder does not hold yet, save each rollout, then write the run's board."""
    root = args.out or default_rollout_dir()
    token = settings.HF_TOKEN.get() if args.dataset else None
    if args.dataset and not token:
        print("warning: --dataset needs HF_TOKEN to push; saving locally only", file=sys.stderr)
    # HF_ENDPOINT as this process has it now, not as it was when huggingface_hub was first imported (a shard forked
    # from a warm interpreter, or started by a local Jobs peer, is pointed at its Hub through it).
    store = RolloutStore(root, dataset=args.dataset if token else None, token=token,
                         endpoint=settings.HF_ENDPOINT.get())
    try:  # the episodes played at once (a pool per model) must fit on the disk before any starts
        store.running.check_room(max(1, args.concurrency) * len(args.model))
    except NoRoom as exc:
        print(f"error: {exc}", file=sys.stderr)
        store.close()
        return 2
    if args.env_url is None:
        # Imported here, not at the top: the server (and openenv's Gradio) costs seconds to import, and a command
        # with a mistake in it should say so at once.
        from berth_env.embedded import embedded_url

        embedded_url()  # start it once, before the pools race to
    preload_and_freeze()
    cells = grid_cells(task_ids, args.model, args.shard)
    jobs, kept = _plan_jobs(args, cells, store)
    slice_note = f", shard {args.shard[0]}/{args.shard[1]}: {len(cells)} cells" if args.shard else ""
    print(f"{len(task_ids)} tasks x {len(args.model)} models{slice_note}: {len(kept)} already in {root}, "
          f"{len(jobs)} to play", file=sys.stderr)
    interrupted, not_started = _play_jobs(args, jobs, store)
    store.fill_index()  # rows a resumed run kept from an older version get the board's newer columns
    _write_board(args, task_ids, root)
    if args.dataset and token:
        pushed = store.flush(timeout=600)
        print("pushed to the Hub" if pushed else f"push incomplete: {store.status()}", file=sys.stderr)
    store.close()
    return 130 if interrupted else 1 if not_started else 0


def _plan_jobs(args: argparse.Namespace, cells: list[tuple[str, str]],
               store: RolloutStore) -> tuple[list[tuple[str, str]], list[dict]]:
    """The episodes to play, one (model, task) each, so that every cell has `--repeats` rollouts of this run
    without errors, and the rows already saved that count towards them (a resumed run keeps them unless
    --force, which plays every cell again)."""
    jobs, kept = [], []
    done: dict[tuple[str, str], list[dict]] = {}
    for row in store.rows():  # once: find() per cell would re-read the index for every cell of a big grid
        if row.get("run") == args.run and not row.get("errors") and row.get("end_reason") not in RERUN_END_REASONS:
            done.setdefault((row.get("model"), row.get("task_id")), []).append(row)
    repeats = args.repeats
    for cell in cells:
        have = [] if args.force else done.get(cell, [])[-repeats:]
        kept += have
        jobs += [cell] * (repeats - len(have))
    return jobs, kept


def _play_jobs(args: argparse.Namespace, jobs: list[tuple[str, str]], store: RolloutStore) -> tuple[bool, int]:
    """Play the jobs, one thread pool per model, with a progress bar; returns whether Ctrl-C stopped them, and how
    many ended before their first turn (each said as it ended, none saved)."""
    stop = threading.Event()
    pools = {m: ThreadPoolExecutor(max_workers=max(1, args.concurrency), thread_name_prefix=f"episodes-{i}")
             for i, m in enumerate(args.model)}
    limits = Limits(args.max_turns, args.max_tokens, args.wall_clock)
    specs: dict[str, ModelSpec] = args.specs  # each checked once, by main

    from agent.loop import run_episode  # see run_batch: the loop imports the OpenEnv client

    def play(model: str, task_id: str) -> tuple[dict, bool]:
        """The episode's record, and whether it was saved (one that ended before its first turn is no rollout)."""
        if stop.is_set():
            raise _Skipped()
        request = EpisodeRequest(specs[model], task_id, limits, args.env_url, run=args.run, source="cli")
        record = run_episode(request, stop=stop, progress=store.running.write)  # a killed run leaves its episodes
        try:
            store.save(record)
        except NotStarted:
            store.running.end(record["episode_id"])
            return record, False
        store.running.end(record["episode_id"])  # not after a failed save: the entry is kept for the next start
        return record, True

    futures: list[Future] = [pools[m].submit(play, m, t) for m, t in jobs]
    bar = tqdm(total=len(jobs), unit="episode", file=sys.stderr, dynamic_ncols=True)
    try:
        not_started = _follow(futures, bar)
    except KeyboardInterrupt:
        bar.write("stopping: episodes in flight end as 'stopped' and are kept (those past their first turn); Ctrl-C "
                  "again to quit at once", file=sys.stderr)
        stop.set()
        for future in futures:
            future.cancel()
        return True, 0
    finally:
        for pool in pools.values():
            pool.shutdown(wait=True)
        bar.close()
    if not_started:
        print(f"error: {not_started} episode{'s' * (not_started != 1)} ended before the first turn and "
              f"{'were' if not_started != 1 else 'was'} not saved (the errors are above); a rerun plays them again",
              file=sys.stderr)
    return False, not_started


def _follow(futures: list[Future], bar: tqdm) -> int:
    """Show each finished episode on the bar: the running mean reward per model, and the first error if any; the
    number of episodes that ended before their first turn (not saved)."""
    finished: list[dict] = []
    not_started = 0
    for future in as_completed(futures):
        try:
            record, saved = future.result()
        except _Skipped:
            continue
        bar.update(1)
        if not saved:
            not_started += 1
            first = (record.get("errors") or [record.get("end_reason") or "no turn taken"])[0]
            bar.write(f"{record['model']} {record['task_id']}: did not start, not saved: {first[:160]}",
                      file=sys.stderr)  # tqdm writes to stdout unless told, and stdout is the board
            continue
        finished.append(record)
        bar.set_postfix_str(_running_means(finished))
        if record.get("errors"):
            bar.write(f"{record['model']} {record['task_id']}: {record['errors'][0][:160]}", file=sys.stderr)
    return not_started


def _write_board(args: argparse.Namespace, tasks: list[str], root: Path) -> None:
    """The run's leaderboard (the latest --repeats rollouts per model and task) to stdout and
    runs/<run>/board.md."""
    from rollouts.archive import Archive  # the index engine (DuckDB) only once there is a board to draw
    from rollouts.board import board
    from rollouts.board_text import board_document, board_terminal

    archive = Archive.of_folder(root)
    where = "run = ? AND model = ANY(?::VARCHAR[]) AND task_id = ANY(?::VARCHAR[])"
    lines = board(archive.engine, where, [args.run, list(args.model), list(tasks)], latest=args.repeats)
    board_path = root / "runs" / args.run / "board.md"
    board_path.parent.mkdir(parents=True, exist_ok=True)
    board_path.write_text(board_document(lines))
    print(board_terminal(lines, wide=str(board_path)))  # the compact board fits a terminal; board.md has it all
    print(f"board: {board_path}", file=sys.stderr)
    print(_best_links(archive, args.run, tasks, args.model), file=sys.stderr)


def _best_links(archive: Any, run: str, tasks: list[str], models: list[str]) -> str:
    """Each model's best rollout of the run by its share page, `/r/<id>` (rollouts.links: on the Space's host or
    ARENA_URL; else where `python app.py` serves the share pages of its ROLLOUT_DIR)."""
    from rollouts.filters import order_by

    base = public_base()
    where = "run = ? AND model = ? AND task_id = ANY(?::VARCHAR[])"
    lines = ["best rollout of each model, by its share page" + ("" if base else " (served by `python app.py` over "
                                                                            "this folder; ARENA_URL says where else)") + ":"]
    for model in models:
        rows = archive.engine.fetch(where, [run, model, list(tasks)], order=order_by("reward"), limit=1).to_pylist()
        if rows:
            lines.append(f"  {model}: reward {float(rows[0]['reward'] or 0):.4f} on {rows[0]['task_id']}  "
                         f"{rollout_page(rows[0]['episode_id'], base or LOCAL_APP)}")
    return "\n".join(lines)


class _Skipped(Exception):
    """An episode not started because the run was stopped."""


def _running_means(records: list[dict]) -> str:
    by_model: dict[str, list[float]] = {}
    for record in records:
        by_model.setdefault(record["model"], []).append(float(record.get("reward") or 0.0))
    return "  ".join(f"{m}: {sum(v) / len(v):.3f}" for m, v in by_model.items())
