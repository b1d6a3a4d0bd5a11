"""The README.md of a training-set export (rollouts.training_sets): what it holds, where it came from, which filters
made it, how many rollouts each step kept, and the YAML that tells `datasets` how to read its three configs.

The conversation columns (`messages`, `prompt`, `chosen`, `rejected`, `tools`) are declared lists of `json`
values, as the rollout card declares a record's nested parts (rollouts.card): a message's keys vary (a tool call
here, a tool result's id there) and a tool's JSON schema nests as deep as it likes, and with `json` features
`datasets` gives each one back as the dict that was written instead of a struct padded with nulls. An export that
includes eval tasks says so at the top, in a tag and in its filters: it must never be mistaken for a clean one.

Pure text in, text out.
"""

from __future__ import annotations

from collections.abc import Sequence

import yaml

from rollouts.card import ATTRIBUTION, LICENSE
from rollouts.training_sets import CONFIGS, EVAL_SPLIT, Counts, Environment, ExportSettings, data_rel

_CHAT = {"list": "json"}
FEATURES: dict[str, dict[str, dict[str, str]]] = {
    "sft": {"messages": _CHAT, "tools": _CHAT, "episode_id": {"dtype": "string"}, "task_id": {"dtype": "string"},
            "task_split": {"dtype": "string"}, "model": {"dtype": "string"}, "reward": {"dtype": "float64"},
            "feasible": {"dtype": "bool"}, "end_reason": {"dtype": "string"}},
    "dpo": {"prompt": _CHAT, "chosen": _CHAT, "rejected": _CHAT, "tools": _CHAT, "task_id": {"dtype": "string"},
            "task_split": {"dtype": "string"}, "chosen_episode_id": {"dtype": "string"},
            "rejected_episode_id": {"dtype": "string"}, "chosen_model": {"dtype": "string"},
            "rejected_model": {"dtype": "string"}, "chosen_reward": {"dtype": "float64"},
            "rejected_reward": {"dtype": "float64"}},
    "tasks": {"task_id": {"dtype": "string"}, "split": {"dtype": "string"}, "prompt": _CHAT, "tools": _CHAT,
              "env_name": {"dtype": "string"}, "env_url": {"dtype": "string"}, "played_on": {"dtype": "string"},
              "reward_version": {"dtype": "int64"}, "prompt_version": {"dtype": "int64"},
              "difficulty": {"dtype": "string"}, "quay": {"dtype": "string"}, "optimal_cost": {"dtype": "int64"},
              "naive_cost": {"dtype": "int64"}, "rollouts": {"dtype": "int64"}, "best_reward": {"dtype": "float64"},
              "mean_reward": {"dtype": "float64"}},
}
CONTAMINATED_TAG = "contains-eval-tasks"

_CONTAMINATED = """\
> **Contaminated: this export includes eval tasks** ({eval_included} rollouts). A model trained on it has seen the
> benchmark's tasks, so its scores on the arena's board (which ranks on the eval split) do not measure it. Use it for
> analysis, not for training a model you will evaluate here.

"""

_BODY = """\
# Berth-planning agent arena: training sets

{contaminated}Graded rollouts of the berth-planning agent arena (a model re-plans a week of container-ship berths on
a PortSimEnv v1 task, testing drafts with `check_plan` and handing in one plan with `submit_plan`), turned into
training data in the layouts TRL documents (huggingface.co/docs/trl/dataset_formats).

## Configs

- `sft`: one conversation per rollout with reward >= {min_reward}: `messages` (system, user, assistant with
  `reasoning_content` and `tool_calls`, tool results) and `tools` (the environment's tools as JSON-schema
  functions), for `SFTTrainer`. Tool results are the server's answers as recorded; the harness's "[N turns left]"
  line after each is not in the records.
- `dpo`: preference pairs for `DPOTrainer`: `prompt` (system prompt and situation), `chosen` and `rejected` (the
  rest of two rollouts of the same task that opened with the same prompt), `tools`: as many pairs per task and
  prompt as keep a reward gap of at least {min_gap}, each rollout in one pair at most.
- `tasks`: the prompt-only manifest for GRPO and other online methods: each task the rollouts played, its `prompt`,
  `tools`, the OpenEnv environment (`env_name` {env_name}, server `env_url` {env_url}), `reward_version` and
  `prompt_version`, and what the rollouts scored on it. Reset the environment with `task_id` and score an episode
  by the reward its `submit_plan` returns.

Every row names its task's split (`task_split`, `split`) and the rollouts it came from.

```python
from datasets import load_dataset
sft = load_dataset("<this repo or folder>", "sft", split="train")
dpo = load_dataset("<this repo or folder>", "dpo", split="train")
tasks = load_dataset("<this repo or folder>", "tasks", split="train")
```

## Sources and filters

{sources}
- eval tasks: {eval_rule}
- rollouts whose task split is unknown: left out (they may be eval tasks)
- `sft`: reward >= {min_reward}; `dpo`: reward gap >= {min_gap}

## Counts

| step | rollouts |
|---|---|
| read | {read} |
| unreadable, left out | {unreadable} |
| eval tasks, left out | {eval_left_out} |
| unknown split, left out | {unknown_split_left_out} |
| no model turn, left out | {no_conversation} |
| kept | {kept} |
| below the `sft` reward, not in `sft` | {below_min_reward} |

Rows: `sft` {sft}, `dpo` {dpo} pairs, `tasks` {tasks}{empty}. Kept by split: {splits}. Kept by model: {models}.

## Licence

The rollouts are derived from the PortSimEnv dock-v1 task pack, built from Port of Barcelona container-call
records shared under CC BY-SA 4.0; this dataset is shared under the same licence (CC BY-SA 4.0).
{attribution}.
"""


def render(counts: Counts, settings: ExportSettings, environment: Environment, sources: Sequence[str]) -> str:
    """The card text of one export."""
    contaminated = settings.include_eval and counts.eval_included > 0
    present = [config for config in CONFIGS if getattr(counts, config)]  # `datasets` cannot load an empty one
    tags = ["trl", "sft", "dpo", "grpo", "tool-use", "agents", "berth-planning", "openenv"]
    meta = {
        "license": LICENSE,
        "pretty_name": "Berth-planning agent arena training sets",
        "tags": [*tags, CONTAMINATED_TAG] if contaminated else tags,
        "configs": [{"config_name": config, **({"default": True} if config == present[0] else {}),
                     "data_files": [{"split": "train", "path": data_rel(config)}]} for config in present],
        "dataset_info": [{"config_name": config, "features": [{"name": name, **spec}
                                                               for name, spec in FEATURES[config].items()]}
                         for config in present],
    }
    kept = sum(counts.splits.values())
    body = _BODY.format(
        contaminated=_CONTAMINATED.format(eval_included=counts.eval_included) if contaminated else "",
        min_reward=settings.min_reward, min_gap=settings.min_gap, env_name=environment.env_name,
        env_url=environment.env_url, sources="\n".join(f"- source: {source}" for source in sources),
        eval_rule=(f"included (`--include-eval`): {counts.eval_included} rollouts of `{EVAL_SPLIT}` tasks"
                   if settings.include_eval else f"left out (`{EVAL_SPLIT}` split, the board's)"),
        empty=f" (no rows, so no config: {', '.join(f'`{c}`' for c in CONFIGS if c not in present)})"
        if len(present) < len(CONFIGS) else "",
        kept=kept, splits=_counted(counts.splits), models=_counted(counts.models), attribution=ATTRIBUTION,
        **{name: getattr(counts, name) for name in ("read", "unreadable", "eval_left_out", "unknown_split_left_out",
                                                    "no_conversation", "below_min_reward", "sft", "dpo", "tasks")})
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=120)
    return f"---\n{front}---\n\n{body}"


def _counted(values: dict[str, int]) -> str:
    return ", ".join(f"`{name}` {count}" for name, count in sorted(values.items(), key=lambda kv: -kv[1])) or "none"
