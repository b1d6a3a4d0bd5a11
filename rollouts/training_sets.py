"""Training sets from graded rollouts: a dataset folder with three configs, in the layouts TRL documents.

- `sft` (conversational language modelling with tool calling): `messages` (rollouts.conversations) and `tools`,
  one row per rollout whose reward is at least `min_reward`.
- `dpo` (conversational preference, explicit prompt): `prompt` (the system prompt and the situation), `chosen` and
  `rejected` (the rest of two rollouts of the same task that opened with the same prompt), and `tools`. Within a
  task and prompt, as many pairs as keep a reward gap of at least `min_gap` (`preference_pairs`), each rollout in
  one pair at most, so no episode weighs more than another.
- `tasks` (prompt-only, for GRPO and other online methods): one row per task the rollouts played, its `prompt`
  and `tools`, and where to play it for a reward (the OpenEnv environment, its server, the reward and prompt
  versions), with what the rollouts scored on it.

**Eval tasks are left out of every config** unless `include_eval` (a task's split is the caller's answer: the task
catalog's, else the record's); a task whose split nobody knows is left out too, since it may be one. Every row says
its task's split (`task_split`).

Rows are written one JSON object a line (`<config>/train.jsonl`; no file for a config without rows); the card (rollouts.training_card) declares the
conversation columns `json`, so `datasets.load_dataset(folder, config)` hands each message back exactly as
written, whatever its keys. Every value goes through `clean` (the caller's secret scrubber) before it is written.
Records are read twice at most, through the caller's `fetch`: once for `sft` and `tasks`, and again for the two
sides of each pair, so memory holds a few numbers per rollout, not its conversation.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollouts.conversations import conversation, opening
from rollouts.jsonio import encode_record, fsync_dir
from rollouts.record import Record
from rollouts.sources import SourceError

EVAL_SPLIT = "eval"
CONFIGS = ("sft", "dpo", "tasks")
DEFAULT_MIN_REWARD = 0.9
DEFAULT_MIN_GAP = 0.2


def data_rel(config: str) -> str:
    """A config's one data file in the export."""
    return f"{config}/train.jsonl"


@dataclass(frozen=True)
class ExportSettings:
    min_reward: float = DEFAULT_MIN_REWARD
    min_gap: float = DEFAULT_MIN_GAP
    include_eval: bool = False


@dataclass(frozen=True)
class Environment:
    """Where a `tasks` row is played for its reward, and the tools every conversation was offered."""

    tools: list[dict]  # rollouts.conversations.tool_schemas of the server's tools
    env_name: str
    env_url: str
    reward_version: str
    prompt_version: int


@dataclass
class Counts:
    """What the export read, kept and left out, for the card and the terminal."""

    read: int = 0
    unreadable: int = 0
    eval_left_out: int = 0
    unknown_split_left_out: int = 0
    no_conversation: int = 0
    below_min_reward: int = 0
    sft: int = 0
    dpo: int = 0
    tasks: int = 0
    eval_included: int = 0  # rollouts of eval tasks kept (only with include_eval)
    models: dict[str, int] = field(default_factory=dict)  # model -> rollouts kept
    splits: dict[str, int] = field(default_factory=dict)  # task split -> rollouts kept


@dataclass
class _Played:
    """One rollout kept, as the pairing and the manifest need it."""

    row: Mapping[str, Any]
    reward: float
    model: str


@dataclass
class _Task:
    task_id: str
    split: str
    prompt: list[dict]
    summary: dict
    env_url: str
    rewards: list[float] = field(default_factory=list)


def export(rows: Iterable[Mapping[str, Any]], fetch: Callable[[Mapping[str, Any]], Mapping[str, Any]], folder: Path,
           *, split_of: Callable[[Record], str | None], clean: Callable[[Any], Any], environment: Environment,
           settings: ExportSettings = ExportSettings(), progress: Callable[[int], None] | None = None) -> Counts:
    """Write the three configs' data files into `folder` from the rollouts of `rows` (index rows; `fetch` gives a
    row's record, raising OSError, ValueError or SourceError for one that cannot be read). `progress(n)`: n more
    records read. The card is the caller's (rollouts.training_card), written from the counts returned."""
    counts = Counts()
    groups: dict[tuple[str, str], list[_Played]] = {}
    tasks: dict[str, _Task] = {}
    files = {config: _ConfigFile(folder, config) for config in CONFIGS}
    try:
        for row in rows:
            view = _read(row, fetch, counts)
            if progress is not None:
                progress(1)
            if view is not None:
                _take(view, row, split_of(view), files["sft"], groups, tasks, counts, clean, environment, settings)
        pairs = [pair for group in groups.values() for pair in preference_pairs(group, settings.min_gap)]
        for pair in _dpo_rows(pairs, fetch, environment, tasks):
            files["dpo"].add(clean(pair))
        for task in tasks.values():
            files["tasks"].add(clean(_task_row(task, environment)))
    except BaseException:
        for file in files.values():
            file.discard()
        raise
    counts.sft, counts.dpo, counts.tasks = (files[config].close() for config in CONFIGS)
    return counts


def _take(view: Record, row: Mapping[str, Any], split: str | None, sft: _ConfigFile,
          groups: dict[tuple[str, str], list[_Played]], tasks: dict[str, _Task], counts: Counts,
          clean: Callable[[Any], Any], environment: Environment, settings: ExportSettings) -> None:
    """One rollout read: left out (and counted why), or its `sft` row written and its place in the pairs and the
    manifest kept."""
    if not _allowed(split, settings, counts):
        return
    messages = conversation(view.data)
    prompt, completion = opening(messages)
    if not prompt or not completion:
        counts.no_conversation += 1
        return
    counts.models[view.model] = counts.models.get(view.model, 0) + 1
    counts.splits[str(split)] = counts.splits.get(str(split), 0) + 1
    counts.eval_included += split == EVAL_SPLIT
    task = tasks.setdefault(view.task_id, _Task(view.task_id, str(split), prompt, view.task,
                                                view.env_url))
    task.rewards.append(view.reward)
    groups.setdefault((view.task_id, _digest(prompt)), []).append(_Played(row, view.reward, view.model))
    if view.reward >= settings.min_reward:
        sft.add(clean(_sft_row(view, messages, environment, str(split))))
    else:
        counts.below_min_reward += 1


class _ConfigFile:
    """One config's data file, written line by line beside its place and moved in whole when closed, so a reader
    (or a crash) sees the earlier file or this one; none for a config without rows (`datasets` cannot load an empty
    split), an earlier export's file removed then, so the folder never shows rows this export did not keep."""

    def __init__(self, folder: Path, config: str) -> None:
        self.path = folder / data_rel(config)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.path.parent / f".{self.path.name}.{secrets.token_hex(4)}.tmp"
        self.file = open(self.tmp, "xb")  # noqa: SIM115 - closed by close() or discard()
        self.rows = 0

    def add(self, row: dict) -> None:
        self.file.write(encode_record(row) + b"\n")
        self.rows += 1

    def close(self) -> int:
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        if self.rows:
            os.replace(self.tmp, self.path)
        else:
            self.tmp.unlink()
            self.path.unlink(missing_ok=True)
            if not any(self.path.parent.iterdir()):
                self.path.parent.rmdir()
        fsync_dir(self.path.parent.parent)
        return self.rows

    def discard(self) -> None:
        self.file.close()
        self.tmp.unlink(missing_ok=True)


def preference_pairs(played: list[_Played], min_gap: float) -> list[tuple[_Played, _Played]]:
    """(chosen, rejected) pairs of one task and prompt: as many as the gap allows, each rollout in one at most.

    Ranked by reward, the k worst are paired in order with the k best (the worst with the k-th best, ..., the k-th
    worst with the best), for the largest k whose every pair keeps the gap: no other pairing has more pairs (if any
    k pairs keep the gap, these k do, each side being at least as far apart)."""
    ranked = sorted(played, key=lambda p: (p.reward, str(p.row.get("episode_id"))))
    n = len(ranked)

    def keeps(k: int) -> bool:
        return all(ranked[n - k + i].reward - ranked[i].reward >= min_gap - 1e-12 for i in range(k))

    k = next((k for k in range(n // 2, 0, -1) if keeps(k)), 0)
    return [(ranked[n - k + i], ranked[i]) for i in range(k)]


def _read(row: Mapping[str, Any], fetch: Callable, counts: Counts) -> Record | None:
    counts.read += 1
    try:
        record = fetch(row)
    except (OSError, ValueError, SourceError):  # counted, and the export goes on
        counts.unreadable += 1
        return None
    return Record(record)


def _allowed(split: str | None, settings: ExportSettings, counts: Counts) -> bool:
    if split is None:
        counts.unknown_split_left_out += 1
        return False
    if split == EVAL_SPLIT and not settings.include_eval:
        counts.eval_left_out += 1
        return False
    return True


def _digest(prompt: list[dict]) -> str:
    return hashlib.sha256(json.dumps(prompt, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _about(view: Record, split: str) -> dict:
    return {"episode_id": view.episode_id, "task_id": view.task_id, "task_split": split, "model": view.model,
            "reward": view.reward}


def _sft_row(view: Record, messages: list[dict], environment: Environment, split: str) -> dict:
    return {"messages": messages, "tools": environment.tools, **_about(view, split),
            "feasible": view.feasible, "end_reason": view.end_reason}


def _dpo_rows(pairs: list[tuple[_Played, _Played]], fetch: Callable, environment: Environment,
              tasks: dict[str, _Task]) -> Iterable[dict]:
    for chosen, rejected in pairs:
        try:
            better, worse = Record(fetch(chosen.row)), Record(fetch(rejected.row))
        except (OSError, ValueError, SourceError):  # read a moment ago: a file that went since then leaves its pair out
            continue
        prompt, chosen_turns = opening(conversation(better.data))
        _, rejected_turns = opening(conversation(worse.data))
        yield {"prompt": prompt, "chosen": chosen_turns, "rejected": rejected_turns, "tools": environment.tools,
               "task_id": better.task_id, "task_split": tasks[better.task_id].split,
               "chosen_episode_id": better.episode_id, "rejected_episode_id": worse.episode_id,
               "chosen_model": better.model, "rejected_model": worse.model,
               "chosen_reward": better.reward, "rejected_reward": worse.reward}


def _task_row(task: _Task, environment: Environment) -> dict:
    rewards = task.rewards
    return {"task_id": task.task_id, "split": task.split, "prompt": task.prompt, "tools": environment.tools,
            "env_name": environment.env_name, "env_url": environment.env_url, "played_on": task.env_url,
            "reward_version": environment.reward_version, "prompt_version": environment.prompt_version,
            "difficulty": task.summary.get("difficulty"), "quay": task.summary.get("quay"),
            "optimal_cost": task.summary.get("optimal_cost"), "naive_cost": task.summary.get("naive_cost"),
            "rollouts": len(rewards), "best_reward": max(rewards), "mean_reward": sum(rewards) / len(rewards)}
