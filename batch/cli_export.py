"""`python -m agent export (--dir DIR | --dataset REPO) (--out DIR | --to REPO) [--min-reward R] [--min-gap G]
[--include-eval] [--env-url URL] [--private]`: turn graded rollouts into a training set.

The source is a rollout folder (`--dir`, default ROLLOUT_DIR) or a rollout dataset on the Hub (`--dataset`: its
records and index downloaded into a temporary folder first); either is read through the archive's read side
(rollouts.archive.Archive.of_folder: rollouts only, one row per episode by the index's precedence rule), and each
record through the local source's checked reader. The source is never changed.

The destination is a local folder (`--out`), a Hub dataset repo (`--to`, needs HF_TOKEN; created if missing,
`--private` to create it private), or both (the folder is written, then pushed). A folder that holds anything but
an earlier export, and a repo that holds rollouts, are refused: an export never overwrites data it did not write.

What it writes is rollouts.training_sets' (the three configs `sft`, `dpo`, `tasks`) with rollouts.training_card's
card. What is decided here: a task's split, the catalog's (the bundled tasks and TASKS_DATASET, loaded first as
`run` loads them), else the one its record kept; the tools, listed by the environment's server (the embedded one,
or `--env-url`'s); the secrets of this shell (every provider's key and HF_TOKEN), scrubbed from every value by the
one scrubber, agent.providers.base.scrub. Eval tasks stay out unless `--include-eval`, which says it contaminates
the board and marks the card.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tqdm import tqdm

from rollouts import settings
from rollouts.layout import (
    CARD,
    INDEX_DIR,
    INDEX_GLOB,
    INDEX_PARQUET_GLOB,
    RECORD_GLOB,
    RECORDS_DIR,
    default_rollout_dir,
)
from rollouts.training_sets import CONFIGS, DEFAULT_MIN_GAP, DEFAULT_MIN_REWARD, EVAL_SPLIT, ExportSettings

EXPORT_FILES = {CARD, *CONFIGS}  # what a folder may already hold to be written again


def add_parser(commands: argparse._SubParsersAction) -> None:
    command = commands.add_parser("export", help="write graded rollouts as a training set (sft, dpo, tasks)")
    source = command.add_mutually_exclusive_group()
    source.add_argument("--dir", type=Path, help="rollout folder to read (default: ROLLOUT_DIR or ./data/rollouts)")
    source.add_argument("--dataset", metavar="REPO", help="a Hub rollout dataset to read (HF_TOKEN if private)")
    command.add_argument("--out", type=Path, help="write the training set into this local folder")
    command.add_argument("--to", metavar="REPO", help="push the training set to this Hub dataset repo (needs HF_TOKEN)")
    command.add_argument("--private", action="store_true", help="create the --to repo private")
    command.add_argument("--min-reward", type=_unit, default=DEFAULT_MIN_REWARD, metavar="R",
                         help="sft keeps rollouts with at least this reward (default: %(default)s)")
    command.add_argument("--min-gap", type=_unit, default=DEFAULT_MIN_GAP, metavar="G",
                         help="dpo pairs differ by at least this reward (default: %(default)s)")
    command.add_argument("--include-eval", action="store_true",
                         help="keep rollouts of eval tasks too: contaminates the board (the card says so)")
    command.add_argument("--env-url", help="the PortSimEnv v1 server whose tools the set lists and which the tasks "
                                           "config names (default: the embedded server's tools, the public server)")


def main(args: argparse.Namespace) -> int:
    token = settings.HF_TOKEN.get()
    problem = _check(args, token)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.include_eval:
        print("warning: --include-eval keeps rollouts of eval tasks: a model trained on this set has seen the board's "
              "tasks, so its scores there mean nothing; the card is marked", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="berth-export-") as scratch:
        try:
            root = _snapshot(args.dataset, Path(scratch) / "source", token) if args.dataset else \
                (args.dir or default_rollout_dir())
        except Exception as exc:  # any Hub failure: one clear line, never a token
            print(f"error: cannot read {args.dataset}: {_reason(exc)}", file=sys.stderr)
            return 1
        if not (root / RECORDS_DIR).is_dir() or not (root / INDEX_DIR).is_dir():
            print(f"error: no rollouts in {args.dataset or root} (expected rollouts/ and index/ folders)",
                  file=sys.stderr)
            return 2
        out = args.out or Path(scratch) / "export"
        try:
            counts = _write(args, root, out)
        except CannotExport as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"sft: {counts.sft} conversations, dpo: {counts.dpo} pairs, tasks: {counts.tasks} "
              f"(read {counts.read}; left out: {counts.eval_left_out} eval, {counts.unknown_split_left_out} of an "
              f"unknown split, {counts.unreadable} unreadable)", file=sys.stderr)
        if not counts.tasks:
            print("error: no rollout was kept, so there is no training set (the counts above say why)",
                  file=sys.stderr)
            return 1
        empty = [config for config in CONFIGS if not getattr(counts, config)]
        if empty:
            print(f"note: no rows for {', '.join(empty)}, so the set has no such config (see --min-reward, "
                  "--min-gap)", file=sys.stderr)
        if args.out:
            print(f"written to {args.out}", file=sys.stderr)
        if args.to:
            return _push(out, args.to, token, private=args.private, source=args.dataset)
    return 0


def _check(args: argparse.Namespace, token: str | None) -> str | None:
    """What is wrong with the command as given, before anything is read."""
    if not args.out and not args.to:
        return "say where the training set goes: --out DIR (a local folder), --to USER/REPO (the Hub), or both"
    if args.to and not token:
        return "--to needs HF_TOKEN (a token that can write to the repo) in this shell"
    if args.to and args.dataset and args.to.strip("/") == args.dataset.strip("/"):
        return "--to names the source dataset: push the training set to a repo of its own"
    if args.out and args.out.exists():
        if not args.out.is_dir():
            return f"--out {args.out} is a file, not a folder"
        foreign = sorted(p.name for p in args.out.iterdir() if p.name not in EXPORT_FILES)
        if foreign:
            return (f"--out {args.out} holds {', '.join(foreign[:3])}{' ...' if len(foreign) > 3 else ''}, which no "
                    "export wrote: give an empty or new folder")
    return None


def _write(args: argparse.Namespace, root: Path, out: Path) -> Any:
    """Read the source, write the three configs and the card into `out`; the counts."""
    from batch.cli_tasks import serve_tasks
    from rollouts.archive import Archive
    from rollouts.filters import Filters
    from rollouts.jsonio import atomic_write
    from rollouts.training_card import render
    from rollouts.training_sets import export

    serve_tasks()  # the catalog that says each task's split
    environment = _environment(args.env_url)
    archive = Archive.of_folder(root)
    # What a record is found by, oldest first; read batch by batch, so a million rows never sit as Python dicts.
    found = archive.matching(Filters(), sort="started", descending=False).select(["episode_id", "path"])
    rows = (row for batch in found.to_batches() for row in batch.to_pylist())
    settings = ExportSettings(min_reward=args.min_reward, min_gap=args.min_gap, include_eval=args.include_eval)
    out.mkdir(parents=True, exist_ok=True)
    with tqdm(total=found.num_rows, unit="rollout", file=sys.stderr, disable=None, leave=False) as bar:
        counts = export(rows, archive.local.record, out, split_of=task_split, clean=_cleaner(), environment=environment,
                        settings=settings, progress=bar.update)
    # A folder by its name alone: a card may go public, and where a machine keeps its files is nobody's business.
    sources = [f"Hub dataset `{args.dataset}`" if args.dataset else f"a local rollout folder, `{root.resolve().name}`"]
    atomic_write(out / CARD, render(counts, settings, environment, sources).encode())
    if args.include_eval:
        print(f"warning: {counts.eval_included} rollouts of {EVAL_SPLIT} tasks are in the set", file=sys.stderr)
    return counts


def task_split(view: Any) -> str | None:
    """A rollout's task split: the catalog's (the task pack this process serves), else the one its record kept;
    None when neither knows."""
    from berth_env import load_pack

    try:
        return str(load_pack().get(view.task_id)["split"])
    except KeyError:
        split = view.task.get("split")
        return split if isinstance(split, str) and split else None


def _environment(env_url: str | None) -> Any:
    """The tools the server lists (as JSON-schema functions) and where a `tasks` row is played."""
    from agent.session import EnvError, EnvSession
    from berth_env import GRADER_VERSION
    from berth_env.server import ENV_NAME, PROMPT_VERSION
    from catalog.tasks import PUBLIC_SERVER
    from rollouts.conversations import tool_schemas
    from rollouts.training_sets import Environment

    try:
        if env_url is None:
            from berth_env.embedded import embedded_url

            session = EnvSession(embedded_url())
        else:
            session = EnvSession(env_url)  # its URL as the session cleaned it: no userinfo reaches the card
            env_url = session.url
        try:
            tools = tool_schemas(session.tools())
        finally:
            session.close()
    except (EnvError, ValueError, OSError) as exc:
        raise CannotExport(f"cannot list the tools of {env_url or 'the embedded server'}: {_reason(exc)}") from None
    return Environment(tools=tools, env_name=ENV_NAME, env_url=env_url or PUBLIC_SERVER,
                       reward_version=GRADER_VERSION, prompt_version=PROMPT_VERSION)


def _cleaner() -> Callable[[Any], Any]:
    """Every string of a row with this shell's secrets scrubbed (the one scrubber)."""
    from agent.providers.base import scrub
    from agent.providers.registry import key_providers

    secrets = sorted({(settings.setting(api.key_env).get() if api.key_env else "") or "" for _, api in key_providers()}
                     | {(settings.HF_TOKEN.get() or "")} - {""})

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return scrub(value, secrets)
        if isinstance(value, dict):
            return {clean(k): clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    return clean


def _snapshot(repo: str, folder: Path, token: str | None) -> Path:
    """The dataset's records and index, downloaded into `folder` (plain files, which the folder's readers accept:
    the Hub cache's links are not)."""
    from huggingface_hub import snapshot_download

    snapshot_download(repo, repo_type="dataset", allow_patterns=[RECORD_GLOB, INDEX_GLOB, INDEX_PARQUET_GLOB],
                      local_dir=folder, endpoint=settings.HF_ENDPOINT.get(), token=token or False)
    return folder


def _push(out: Path, repo: str, token: str | None, *, private: bool, source: str | None) -> int:
    """The export folder to `repo` in one commit; a repo that holds rollouts is refused."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=settings.HF_ENDPOINT.get(), token=token)
    try:
        api.create_repo(repo, repo_type="dataset", private=private, exist_ok=True)
        held = api.list_repo_files(repo, repo_type="dataset")
        if any(path.startswith((f"{RECORDS_DIR}/", f"{INDEX_DIR}/")) for path in held):
            print(f"error: {repo} holds rollouts: push the training set to a repo of its own", file=sys.stderr)
            return 2
        # The configs' folders mirror this export: a config it has no rows for goes, as it went from the folder.
        commit = api.upload_folder(folder_path=out, repo_id=repo, repo_type="dataset",
                                   delete_patterns=[f"{config}/*" for config in CONFIGS],
                                   commit_message=f"Training set from {source or 'a rollout folder'}")
    except Exception as exc:  # any Hub failure: one clear line, never a token
        print(f"error: could not push to {repo}: {_reason(exc)}", file=sys.stderr)
        return 1
    print(f"pushed to {repo} ({commit.oid[:12]})", file=sys.stderr)
    return 0


def _reason(exc: BaseException) -> str:
    from agent.providers.base import scrub

    return scrub(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300],
                 [(settings.HF_TOKEN.get() or "")])


def _unit(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not between 0 and 1 (rewards are)")
    return value


class CannotExport(Exception):
    """The export cannot be made as asked (its server out of reach); the message says why."""


__all__ = ["CannotExport", "add_parser", "main", "task_split"]
