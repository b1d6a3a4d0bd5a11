"""`python -m agent export`: real rollouts (baselines, and a model over the chat-completions SDK against its peer,
all played on the embedded server) exported, loaded back by `datasets.load_dataset` in all three configs, rendered
by a real chat template (transformers' `apply_chat_template` with tools, a tokenizer built here: nothing
downloaded, no torch), eval tasks left out unless asked, secrets scrubbed, pushed to a Hub peer and read from one.
"""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import pytest
from datasets import load_dataset

from agent.loop import run_episode
from agent.request import EpisodeRequest
from batch.cli import main
from berth_env.pack import base_pack, set_runtime_packs, write_pack
from rollouts.store import RolloutStore
from testkit.fakehub import running_fakehub
from testkit.peers import ChatPeer, Text, Thinking, ToolCall, Turn
from testkit.published import folder_files, publish
from testkit.servers import free_port
from testkit.task_dataset import as_train
from testkit.tasks import optimal_args

SECRET = "hf_exportsecret0123456789abcdefXYZ"
HUB_TOKEN = "hf_hub_writer_0123456789"
EVAL_TASK = "dock-24B-w06x1-busy-0"
# Train copies of eval tasks where greedy beats naive by more than 0.2 (about 0.70, 0.51 and 0.55 against 0.20).
TRAIN = [as_train(base_pack().tasks[i], 100 + i) for i in (0, 2, 3)]
MIN_REWARD = "0.45"  # below greedy's rewards on these tasks, above naive's

TEMPLATE = """\
{%- if tools %}<tools>{% for tool in tools %}{{ tool.function.name }}: {{ tool | tojson }}
{% endfor %}</tools>
{% endif %}
{%- for message in messages %}<|{{ message.role }}|>
{%- if message.reasoning_content %}<think>{{ message.reasoning_content }}</think>{% endif %}
{%- if message.content %}{{ message.content }}{% endif %}
{%- for call in message.tool_calls or [] %}<call id={{ call.id }}>{{ call.function.name }} {{ call.function.arguments | tojson }}</call>
{%- endfor %}
{%- if message.role == 'tool' %}<for {{ message.tool_call_id }}>{% endif %}<|end|>
{% endfor %}
{%- if add_generation_prompt %}<|assistant|>{% endif %}"""


@pytest.fixture(scope="module")
def played(tmp_path_factory, env_url) -> tuple[Path, list[dict]]:
    """A rollout folder: greedy and naive on three train tasks (greedy twice on the first), a model that submits
    the optimum after a nudge and a cut-off turn (and writes a secret), and greedy and naive on an eval task."""
    here = tmp_path_factory.mktemp("export")
    set_runtime_packs([write_pack(here / "pack", TRAIN)])
    monkey = pytest.MonkeyPatch()
    try:
        records = [run_episode(EpisodeRequest.of(model, task["task_id"], env_url=env_url))
                   for task in TRAIN for model in ("baseline:greedy", "baseline:naive")]
        records.append(run_episode(EpisodeRequest.of("baseline:greedy", TRAIN[0]["task_id"], env_url=env_url)))
        records += [run_episode(EpisodeRequest.of(model, EVAL_TASK, env_url=env_url)) for model in ("baseline:greedy", "baseline:naive")]
        script = [Turn(Text(f"Let me think about ship 5. My key is {SECRET}.")), Turn(ToolCall("get_situation")),
                  Turn(Thinking("Ship 9 waits for the closure to end " * 8), stop="max_tokens"),
                  Turn(Text("Submitting the plan."), ToolCall("submit_plan", optimal_args()))]
        with ChatPeer(script) as peer:
            monkey.setenv("HF_ROUTER_URL", peer.url + "/v1")
            monkey.setenv("HF_TOKEN", "hf_test")
            records.append(run_episode(EpisodeRequest.of("hf:org/planner", TRAIN[0]["task_id"], env_url=env_url, max_turns=4)))
        root = here / "rollouts"
        with RolloutStore(root) as store:
            for record in records:
                store.save(record)
        assert all(r["end_reason"] == "submitted" for r in records) and records[-1]["reward"] == 1.0
        yield root, records
    finally:
        monkey.undo()
        set_runtime_packs([])


@pytest.fixture
def shell(monkeypatch):
    """This shell: the bundled tasks only (plus the train pack above), and a token whose value must never leave."""
    monkeypatch.setenv("TASKS_DATASET", "")
    monkeypatch.setenv("HF_TOKEN", SECRET)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    return monkeypatch


def export(*args: str) -> int:
    return main(["export", *args])


def load(folder: Path, config: str, cache: Path) -> list[dict]:
    return list(load_dataset(str(folder), config, split="train", cache_dir=str(cache)))


def chat_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = Tokenizer(models.WordLevel({"[UNK]": 0, "<|end|>": 1}, unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=words, unk_token="[UNK]", eos_token="<|end|>",
                                   chat_template=TEMPLATE)


def train_ids(records: list[dict], *, at_least: float) -> set[str]:
    train = {t["task_id"] for t in TRAIN}
    return {r["episode_id"] for r in records if r["task_id"] in train and r["reward"] >= at_least}


def test_an_export_loads_back_in_all_three_configs_without_eval_tasks_and_renders_through_a_chat_template(
        played, shell, tmp_path, capsys):
    root, records = played
    out = tmp_path / "set"
    assert export("--dir", str(root), "--out", str(out), "--min-reward", MIN_REWARD) == 0
    sft, dpo, tasks = (load(out, config, tmp_path / "cache") for config in ("sft", "dpo", "tasks"))

    assert {row["episode_id"] for row in sft} == train_ids(records, at_least=float(MIN_REWARD))
    assert len(sft) == 5 and {row["model"] for row in sft} == {"baseline:greedy", "hf:org/planner"}
    assert {row["task_id"] for row in tasks} == {t["task_id"] for t in TRAIN}
    every = [*sft, *dpo, *tasks]
    assert EVAL_TASK not in {row["task_id"] for row in every}
    assert {row.get("task_split") or row.get("split") for row in every} == {"train"}

    # TRL's layouts: messages and tools; prompt, chosen and rejected; a prompt-only manifest.
    tools = sft[0]["tools"]
    assert [t["function"]["name"] for t in tools] == ["get_situation", "check_plan", "submit_plan"]
    assert tools[1]["function"]["parameters"]["properties"]["plan"]
    planner = next(row for row in sft if row["model"] == "hf:org/planner")
    roles = [m["role"] for m in planner["messages"]]
    assert roles[:3] == ["system", "user", "assistant"] and "tool" in roles
    assert ("user", "user") not in set(itertools.pairwise(roles))  # the notes that follow one another are joined
    submit = [c for m in planner["messages"] for c in m.get("tool_calls") or []][-1]
    assert submit["type"] == "function" and submit["function"]["name"] == "submit_plan"
    assert submit["function"]["arguments"] == json.loads(optimal_args())
    assert any("closure" in (m.get("reasoning_content") or "") for m in planner["messages"])
    calls = {c["id"] for m in planner["messages"] for c in m.get("tool_calls") or []}
    assert {m["tool_call_id"] for m in planner["messages"] if m["role"] == "tool"} <= calls
    # The first task's four rollouts (naive, greedy twice, the optimum) make two pairs, the other tasks one each.
    assert len(dpo) == 4
    sides = [pair[f"{side}_episode_id"] for pair in dpo for side in ("chosen", "rejected")]
    assert len(sides) == len(set(sides))  # each rollout in one pair at most
    for pair in dpo:
        assert [m["role"] for m in pair["prompt"]] == ["system", "user"]
        assert pair["chosen"][0]["role"] == pair["rejected"][0]["role"] == "assistant"
        assert pair["chosen_reward"] - pair["rejected_reward"] >= 0.2
        assert pair["chosen_episode_id"] != pair["rejected_episode_id"]
    for task in tasks:
        assert [m["role"] for m in task["prompt"]] == ["system", "user"]
        assert task["env_name"] == "berth_planning" and task["reward_version"] >= 1 and task["rollouts"] >= 2

    tokenizer = chat_tokenizer()
    for row in sft:
        text = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
        assert text.count("<|assistant|>") == sum(m["role"] == "assistant" for m in row["messages"])
        assert "submit_plan: " in text and '<call id=' in text and "<|tool|>" in text
        assert tokenizer.apply_chat_template(row["messages"], tools=row["tools"])  # token ids, too
    for pair in dpo:  # TRL's check: the prompt's rendering starts prompt + completion's
        prompt = tokenizer.apply_chat_template(pair["prompt"], tools=pair["tools"], tokenize=False,
                                               add_generation_prompt=True)
        for side in ("chosen", "rejected"):
            whole = tokenizer.apply_chat_template(pair["prompt"] + pair[side], tools=pair["tools"], tokenize=False)
            assert whole.startswith(prompt.removesuffix("<|assistant|>"))
    for task in tasks:
        assert tokenizer.apply_chat_template(task["prompt"], tools=task["tools"], tokenize=False,
                                             add_generation_prompt=True).endswith("<|assistant|>")

    # The secret the model wrote is scrubbed from every file; the card states sources, filters and counts.
    assert not [p for p in out.rglob(".*")]  # no file half-written left behind
    written = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    assert SECRET.encode() not in written and b"[redacted]" in written
    card = (out / "README.md").read_text()
    assert f"a local rollout folder, `{root.name}`" in card and str(root.parent) not in card
    assert "reward >= 0.45" in card and "gap >= 0.2" in card
    assert "| eval tasks, left out | 2 |" in card and "contains-eval-tasks" not in card
    assert "sft: 5 conversations, dpo: 4 pairs, tasks: 3" in capsys.readouterr().err


def test_include_eval_keeps_eval_tasks_says_it_contaminates_the_board_and_marks_the_card(played, shell, tmp_path,
                                                                                          capsys):
    root, _ = played
    out = tmp_path / "set"
    assert export("--dir", str(root), "--out", str(out), "--min-reward", MIN_REWARD, "--include-eval") == 0
    err = capsys.readouterr().err
    assert "contaminates" in err or "has seen the board's tasks" in err
    sft = load(out, "sft", tmp_path / "cache")
    tasks = load(out, "tasks", tmp_path / "cache")
    eval_rows = [row for row in sft if row["task_id"] == EVAL_TASK]
    assert len(eval_rows) == 1 and eval_rows[0]["task_split"] == "eval" and eval_rows[0]["model"] == "baseline:greedy"
    assert {"eval", "train"} == {row["split"] for row in tasks}
    card = (out / "README.md").read_text()
    assert "contains-eval-tasks" in card and "Contaminated: this export includes eval tasks** (2 rollouts)" in card


def test_the_default_reward_keeps_only_the_optimum_and_an_empty_config_is_left_out(played, shell, tmp_path,
                                                                                     capsys):
    root, _ = played
    out = tmp_path / "set"
    assert export("--dir", str(root), "--out", str(out), "--min-gap", "0.9") == 0
    [row] = load(out, "sft", tmp_path / "cache")
    assert row["model"] == "hf:org/planner" and row["reward"] == 1.0
    assert not (out / "dpo").exists() and "config_name: dpo" not in (out / "README.md").read_text()
    assert "no rows for dpo" in capsys.readouterr().err
    with pytest.raises(ValueError):
        load(out, "dpo", tmp_path / "cache")


def test_a_push_goes_to_the_hub_and_a_hub_dataset_is_a_source(played, shell, tmp_path):
    root, _ = played
    with running_fakehub(token=HUB_TOKEN) as hub:
        shell.setenv("HF_ENDPOINT", hub.url)
        shell.setenv("HF_TOKEN", HUB_TOKEN)
        publish(hub.url, "arena/rollouts", folder_files(root), token=HUB_TOKEN)
        assert export("--dataset", "arena/rollouts", "--to", "arena/train", "--min-reward", MIN_REWARD) == 0
        files = hub.files("arena/train")
        assert {"README.md", "sft/train.jsonl", "dpo/train.jsonl", "tasks/train.jsonl"} <= set(files)
        assert "Hub dataset `arena/rollouts`" in files["README.md"].decode()
        local = tmp_path / "local"
        assert export("--dir", str(root), "--out", str(local), "--min-reward", MIN_REWARD) == 0
        for config in ("sft", "dpo", "tasks"):  # the same rows, whichever way the rollouts were read
            assert files[f"{config}/train.jsonl"] == (local / config / "train.jsonl").read_bytes()
        pulled = tmp_path / "pulled"
        pulled.mkdir()
        for path, data in files.items():
            (pulled / path).parent.mkdir(parents=True, exist_ok=True)
            (pulled / path).write_bytes(data)
        assert len(load(pulled, "sft", tmp_path / "cache")) == 5

        # Pushed again with no pair keeping the gap: the repo's dpo config goes with it, as from a folder.
        assert export("--dir", str(root), "--to", "arena/train", "--min-reward", MIN_REWARD, "--min-gap", "1") == 0
        again = hub.files("arena/train")
        assert "dpo/train.jsonl" not in again and again["sft/train.jsonl"] == files["sft/train.jsonl"]
        assert "config_name: dpo" not in again["README.md"].decode()

        before = dict(hub.files("arena/rollouts"))  # a repo of rollouts is never written over
        assert export("--dir", str(root), "--to", "arena/rollouts") == 2
        assert export("--dataset", "arena/rollouts", "--to", "arena/rollouts") == 2
        assert hub.files("arena/rollouts") == before


def test_mistakes_are_said_before_anything_is_read_or_written(played, shell, tmp_path, capsys):
    root, _ = played
    assert export("--dir", str(root)) == 2
    assert "--out DIR" in capsys.readouterr().err
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    assert export("--dir", str(root), "--out", str(busy)) == 2
    assert "notes.txt" in capsys.readouterr().err and [p.name for p in busy.iterdir()] == ["notes.txt"]
    assert export("--dir", str(tmp_path / "none"), "--out", str(tmp_path / "x")) == 2
    assert "no rollouts in" in capsys.readouterr().err
    port = free_port()
    assert export("--dir", str(root), "--out", str(tmp_path / "z"), "--env-url", f"http://127.0.0.1:{port}") == 1
    assert f"cannot list the tools of http://127.0.0.1:{port}" in capsys.readouterr().err
    shell.delenv("HF_TOKEN")
    assert export("--dir", str(root), "--to", "arena/train") == 2
    assert "needs HF_TOKEN" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        export("--dir", str(root), "--out", str(tmp_path / "y"), "--min-reward", "2")


def test_a_damaged_record_is_counted_and_left_out_and_the_rest_is_exported(played, shell, tmp_path):
    root, records = played
    copy = tmp_path / "rollouts"
    shutil.copytree(root, copy)
    damaged = next(p for p in copy.glob("rollouts/*/*.json") if p.stem == records[0]["episode_id"])
    damaged.write_text('{"episode_id": "')
    out = tmp_path / "set"
    assert export("--dir", str(copy), "--out", str(out), "--min-reward", MIN_REWARD) == 0
    sft = load(out, "sft", tmp_path / "cache")
    assert records[0]["episode_id"] not in {row["episode_id"] for row in sft} and len(sft) == 4
    assert "| unreadable, left out | 1 |" in (out / "README.md").read_text()
    assert damaged.read_text() == '{"episode_id": "'  # the source is never changed
