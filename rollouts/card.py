"""The rollout dataset's README.md: what it holds, its licence, and the YAML that tells `datasets` how to read it.

The configs: `index` (default; the flat rows in `index/*/*.jsonl`), `rollouts` (the full records in
`rollouts/*/*.json`), `traces` (each record as an agent trace in `traces/*/*.jsonl`, rollouts.traces), `matches`
(arena matches, `matches/*/*.jsonl`, rollouts.matches; a folder without any still loads the others), `annotations`
(flags on a step, `annotations/*/*.jsonl`, rollouts.annotations), and the dated snapshots `boards` and `battles`
(rollouts.board_files). Compacted
index rows (`index/*/*.parquet`, rollouts.index.compaction) are no config: `datasets` picks one builder for a whole
repo from its first config's files, so a Parquet config beside the JSON ones would be read as JSON; the card says how
to read them (the Parquet builder, DuckDB, pandas). `index`, `rollouts`, `matches` and `annotations` declare their
features, so the
column types never depend on which files happen to be read:

- `index` columns are flat scalars with the types of `rollouts.schema.COLUMNS`;
- `rollouts` nested parts (`messages`, `steps`, `final`, ...) vary in shape from record to record (a tool result is
  a checker report in one step and an error in the next), so they are declared `json`. `datasets` 5.2 JSON-encodes
  those fields line by line before Arrow reads them, which is why every record file holds its JSON on ONE line.
  A record key the card does not list would fail the whole config, so the store extends the card (as `json`) when a
  record brings a new top-level key; `record_fields` reads back what a card declares.

`traces` declares no features, on purpose: with none declared, `datasets`' JSON reader recognises the files as
agent traces (a `type` column and `message` objects of varying keys) and reads each file as one session row with
the whole trace beside it, as the Hub's viewer shows them (locally that needs the `teich` package); declared
features would make every line a row. The Hub detects trace files itself and lists such datasets under the
format tag it sets, `format:agent-traces` (Hub docs "Agent traces"); the card only adds the plain tags
`agent-traces` and `traces`, for search.

The card is pure text in, text out; the store writes it.
"""

from __future__ import annotations

from collections.abc import Iterable

import yaml

from rollouts.annotations import FLAG_COLUMNS, LABELS
from rollouts.board import figure_kinds
from rollouts.layout import ANNOTATION_GLOB, BATTLE_GLOB, BOARD_GLOB, MATCH_GLOB, TRACE_GLOB
from rollouts.matches import MATCH_COLUMNS, VOTE_CHOICES
from rollouts.ratings import BATTLE_COLUMNS
from rollouts.schema import COLUMNS

LICENSE = "cc-by-sa-4.0"
ATTRIBUTION = "Contains data from the Port de Barcelona open data portal"

_SCALAR = {str: "string", int: "int64", float: "float64", bool: "bool"}
# Arrow's JSON reader turns ISO-looking strings into timestamps before `datasets` casts to the card's types, and a
# timestamp cast back to string reads "2026-11-29 10:15:00": declaring `started` a timestamp keeps it exact.
TIMESTAMP = "timestamp[us, tz=UTC]"
INDEX_FEATURES: dict[str, str] = {name: _SCALAR[kind] for name, kind in COLUMNS.items()} | {"started": TIMESTAMP}
# A match row's columns; `votes` is a struct of one count per choice.
MATCH_FEATURES: list[dict] = [
    {"name": name, "struct": [{"name": choice, "dtype": "int64"} for choice in VOTE_CHOICES]} if kind is dict
    else {"name": name, "dtype": TIMESTAMP if name == "started" else _SCALAR[kind]}
    for name, kind in MATCH_COLUMNS.items()
]
# The snapshots (rollouts.board_files): a day, then the board's JSON keys or a battle's columns. Every figure is
# declared, so a day written before a figure existed still loads (its column null).
SNAPSHOT_DAY = {"name": "date", "dtype": "date32"}
BOARD_FEATURES: list[dict] = [SNAPSHOT_DAY, *({"name": name, "dtype": _SCALAR[kind]}
                                              for name, kind in figure_kinds().items())]
BATTLE_FEATURES: list[dict] = [SNAPSHOT_DAY, *({"name": name, "dtype": "float64" if name.startswith("mean") else
                                                "string"} for name in BATTLE_COLUMNS)]
# A flag's columns (rollouts.annotations), `time` a timestamp as the matches' `started`.
FLAG_FEATURES: list[dict] = [{"name": name, "dtype": TIMESTAMP if name == "time" else _SCALAR[kind]}
                             for name, kind in FLAG_COLUMNS.items()]

# Top-level record fields (DESIGN.md "The rollout record") -> feature spec.
RECORD_FEATURES: dict[str, dict[str, str]] = {
    "schema_version": {"dtype": "int64"},
    "episode_id": {"dtype": "string"},
    "run": {"dtype": "string"},
    "source": {"dtype": "string"},
    "model": {"dtype": "string"},
    "task_id": {"dtype": "string"},
    "task": {"dtype": "json"},
    "env_url": {"dtype": "string"},
    "limits": {"dtype": "json"},
    "started": {"dtype": TIMESTAMP},
    "seconds": {"dtype": "float64"},
    "messages": {"list": "json"},
    "steps": {"list": "json"},
    "final": {"dtype": "json"},
    "reward": {"dtype": "float64"},
    "usage": {"dtype": "json"},
    "turns": {"dtype": "int64"},
    "end_reason": {"dtype": "string"},
    "errors": {"list": "string"},
    "provider_switches": {"list": "string"},
    "app_version": {"dtype": "string"},
    "regrade": {"dtype": "json"},
    "player": {"dtype": "json"},
}

_BODY = """\
# Berth-planning agent arena: rollouts

Every episode played in the berth-planning agent arena: a language model (or a baseline player) re-plans a week of
container-ship berths at a quay of the Port of Barcelona on a PortSimEnv v1 task, testing drafts with `check_plan`
and handing in one plan with `submit_plan`. Each rollout keeps the whole conversation (reasoning and tool calls
included), every checked and submitted plan with the server's answer, the grade, token usage and timing.

## Layout

```
README.md                                   this card
rollouts/<YYYY-MM-DD>/<episode_id>.json     one full rollout record per file (date = episode start, UTC)
index/<YYYY-MM-DD>/<writer_id>.jsonl        one flat row per rollout, appended by each writer process
index/<YYYY-MM-DD>/<writer_id>.parquet      the same rows, compacted: older rows folded out of the JSONL file
traces/<YYYY-MM-DD>/<episode_id>.jsonl      the same rollout as an agent trace (Session Trace Simple Format)
matches/<YYYY-MM-DD>/<writer_id>.jsonl      one row per arena match (two models on one task), by its start day
boards/<YYYY-MM-DD>.jsonl                   the leaderboard as it stood that day, one row per model
battles/<YYYY-MM-DD>.jsonl                  the battles the board's arena ratings were fitted to that day
annotations/<YYYY-MM-DD>/<writer_id>.jsonl  one row per flag a signed-in visitor put on a step, by the day made
```

Several processes and machines write to this dataset at once; each writes only its own index files (`writer_id`).
A rollout's index row is in exactly one of its writer's two files for that day: the JSONL file holds the rows
appended since the last compaction, the Parquet file (same columns, `started` as ISO 8601 text) everything folded
before. Should a compaction be interrupted, a row may briefly sit in both: keep one row per `episode_id`.

## Configs

- `index` (default): the rows of the JSONL index files (the compacted ones are read below), one per rollout,
  with flat columns (`model`, `model_name`, `task_id`, `difficulty`, `reward`, `feasible`, `cost`, `turns`,
  `checks`, tokens, `end_reason`, `errors`, ...) and `path`, the record's file in this repository. Convergence and price figures come with each row: `checks_to_feasible`,
  `turns_to_feasible` and `tokens_to_feasible` (output tokens) until the first feasible `check_plan`,
  `first_check_cost` and `best_check_cost` of the feasible checked plans, `check_costs` (every check's cost in
  order, null where infeasible, as JSON text), `beat_naive` (the submitted plan is feasible and cheaper than the
  naive plan), `usd` (the episode's list price from its token usage, by the genai-prices library; null for
  baselines, people and models without a price), and `regrade_reward` / `regrade_feasible` once a rollout was
  graded again under a later grader (the record's `regrade`).
- `rollouts`: the full records. `task`, `limits`, `final`, `usage` and every element of `messages` and `steps`
  are JSON values, since their shape varies between records.
- `traces`: every rollout's conversation as an agent trace in the Hub's Session Trace Simple Format (harness
  `berth-arena`, session id = episode id), for the Hub's trace viewer: the system prompt, the situation, each
  model turn with its reasoning and tool calls, and each tool result beside its call. One file per rollout; the
  session header names the record it came from.
- `matches`: the arena's matches, one row each: `match_id`, `started`, `task_id`, `mode` (`named`: the visitor
  chose the models, `random`: drawn), `model_a`, `model_b`, the two rollouts (`episode_a`, `episode_b`, their
  `reward_a`, `reward_b`), `winner` (`a`, `b` or `tie`: higher reward, then lower cost, fewer checks, fewer
  output tokens) and `votes`, the visitors' votes counted per choice (`a`, `b`, `tie`, `both_bad`).
- `boards`: dated snapshots of the leaderboard (`python -m agent board --snapshot`), one row per model and day:
  `date`, `model` and every figure under the keys of the arena's `/board.json` (`n`, `mean_reward` with `ci_low`
  and `ci_high`, per tier, feasible and optimal shares, pass^k, tokens, dollars, the arena rating, ...).
- `battles`: the battles the arena ratings of that day's board come from, one row each: `date`, `task_id`,
  `model_a`, `model_b`, their mean rewards on the task (`mean_a`, `mean_b`) and `winner` (`a`, `b` or `tie`: the
  higher mean reward wins). Votes never enter them.
- `annotations`: flags on one step of a rollout, one row each: `flag_id`, `episode_id`, `step_kind` (`turn`, or
  `draft`: the k-th plan sent to `check_plan` or `submit_plan`), `step` (from 1), `label` ({labels}),
  `note` (the author's own words, at most 500 characters: untrusted text), `author` (a Hugging Face account),
  `time` and `hidden` (true once the Space's owner hid it: leave those out to read what the arena shows).

```python
from datasets import load_dataset
index = load_dataset("<this repo or a local copy>", "index", split="train")
records = load_dataset("<this repo or a local copy>", "rollouts", split="train")
traces = load_dataset("<this repo or a local copy>", "traces", split="train")  # one row per session; needs `teich`
matches = load_dataset("<this repo or a local copy>", "matches", split="train")
boards = load_dataset("<this repo or a local copy>", "boards", split="train")  # also "battles"
flags = load_dataset("<this repo or a local copy>", "annotations", split="train").filter(lambda f: not f["hidden"])
# The compacted index rows (pandas.read_parquet and DuckDB read `hf://datasets/<repo>/index/*/*.parquet` too):
compacted = load_dataset("parquet", data_files="hf://datasets/<this repo>/index/*/*.parquet", split="train")
```

To open one rollout, download `rollouts/<date>/<episode_id>.json` (the `path` column) and read it as JSON.

## Licence

The rollouts are derived from the PortSimEnv dock-v1 task pack, built from Port of Barcelona container-call
records shared under CC BY-SA 4.0; this dataset is shared under the same licence (CC BY-SA 4.0).
{attribution}.
"""


def render(extra_fields: Iterable[str] = ()) -> str:
    """The card text. `extra_fields`: record keys beyond RECORD_FEATURES, declared as `json`."""
    record_features = dict(RECORD_FEATURES)
    for name in sorted(set(extra_fields) - set(record_features)):
        record_features[name] = {"dtype": "json"}
    meta = {
        "license": LICENSE,
        "pretty_name": "Berth-planning agent arena rollouts",
        "tags": ["agents", "tool-use", "rollouts", "berth-planning", "openenv", "agent-traces", "traces"],
        "configs": [
            {"config_name": "index", "default": True,
             "data_files": [{"split": "train", "path": "index/*/*.jsonl"}]},
            {"config_name": "rollouts",
             "data_files": [{"split": "train", "path": "rollouts/*/*.json"}]},
            {"config_name": "traces",  # no dataset_info: see the module doc
             "data_files": [{"split": "train", "path": TRACE_GLOB}]},
            {"config_name": "matches",
             "data_files": [{"split": "train", "path": MATCH_GLOB}]},
            {"config_name": "annotations",
             "data_files": [{"split": "train", "path": ANNOTATION_GLOB}]},
            {"config_name": "boards",
             "data_files": [{"split": "train", "path": BOARD_GLOB}]},
            {"config_name": "battles",
             "data_files": [{"split": "train", "path": BATTLE_GLOB}]},
        ],
        "dataset_info": [
            {"config_name": "index",
             "features": [{"name": name, "dtype": dtype} for name, dtype in INDEX_FEATURES.items()]},
            {"config_name": "rollouts",
             "features": [{"name": name, **spec} for name, spec in record_features.items()]},
            {"config_name": "matches", "features": MATCH_FEATURES},
            {"config_name": "annotations", "features": FLAG_FEATURES},
            {"config_name": "boards", "features": BOARD_FEATURES},
            {"config_name": "battles", "features": BATTLE_FEATURES},
        ],
    }
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=120)
    labels = ", ".join(f"`{key}`" for key in LABELS)
    return f"---\n{front}---\n\n{_BODY.format(attribution=ATTRIBUTION, labels=labels)}"


def record_fields(card: str) -> set[str]:
    """The record keys a card's `rollouts` config declares (empty when the card has no readable front matter)."""
    meta = _front_matter(card)
    for info in meta.get("dataset_info") or []:
        if isinstance(info, dict) and info.get("config_name") == "rollouts":
            return {f["name"] for f in info.get("features") or [] if isinstance(f, dict) and "name" in f}
    return set()


def _front_matter(card: str) -> dict:
    if not card.startswith("---\n"):
        return {}
    head, sep, _ = card[4:].partition("\n---\n")
    if not sep:
        return {}
    try:
        meta = yaml.safe_load(head)
    except yaml.YAMLError:
        return {}
    return meta if isinstance(meta, dict) else {}
