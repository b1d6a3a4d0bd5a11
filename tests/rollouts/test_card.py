"""The dataset card: its YAML as huggingface_hub and datasets read it, and `load_dataset` on a folder holding records
of many different shapes (the reason the nested fields are declared `json` and records are written on one line)."""

from __future__ import annotations

import importlib.util
import json
from datetime import datetime

import datasets
import pytest
import yaml
from datasets.info import DatasetInfosDict
from datasets.utils.metadata import MetadataConfigs
from huggingface_hub import DatasetCard

from rollouts import card as dataset_card
from rollouts.layout import record_rel as record_path
from rollouts.layout import trace_rel
from rollouts.schema import COLUMNS
from rollouts.store import RolloutStore
from testkit.records import make_record, make_records


def front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card[4:].partition("\n---\n")[0])


def test_the_card_declares_licence_attribution_and_its_configs():
    card = dataset_card.render()
    meta = front_matter(card)
    assert meta["license"] == "cc-by-sa-4.0"
    assert "Contains data from the Port de Barcelona open data portal" in card and "CC BY-SA 4.0" in card
    configs = {c["config_name"]: c for c in meta["configs"]}
    assert configs["index"]["default"] is True and "default" not in configs["rollouts"]
    assert configs["index"]["data_files"] == [{"split": "train", "path": "index/*/*.jsonl"}]
    assert configs["rollouts"]["data_files"] == [{"split": "train", "path": "rollouts/*/*.json"}]
    assert configs["traces"]["data_files"] == [{"split": "train", "path": "traces/*/*.jsonl"}]
    assert {"agent-traces", "traces"} <= set(meta["tags"])
    # No features for `traces`: declared ones would make datasets (and the Hub's viewer) read lines, not sessions.
    assert [info["config_name"] for info in meta["dataset_info"]] == ["index", "rollouts", "matches", "annotations",
                                                                        "boards", "battles"]
    assert configs["boards"]["data_files"] == [{"split": "train", "path": "boards/*.jsonl"}]
    assert configs["battles"]["data_files"] == [{"split": "train", "path": "battles/*.jsonl"}]


def test_huggingface_hub_and_datasets_read_the_yaml_as_meant():
    data = DatasetCard(dataset_card.render(["judge"])).data
    configs = MetadataConfigs.from_dataset_card_data(data)
    assert set(configs) == {"index", "rollouts", "traces", "matches", "annotations", "boards", "battles"}
    assert configs["index"]["default"] is True
    assert configs["matches"]["data_files"] == [{"split": "train", "path": "matches/*/*.jsonl"}]
    infos = DatasetInfosDict.from_dataset_card_data(data)
    assert "traces" not in infos
    index = infos["index"].features
    assert list(index) == list(COLUMNS)
    assert index["num_ships"] == datasets.Value("int64") and index["reward"] == datasets.Value("float64")
    assert index["feasible"] == datasets.Value("bool") and index["model"] == datasets.Value("string")
    assert index["started"] == datasets.Value("timestamp[us, tz=UTC]")
    records = infos["rollouts"].features
    assert records["messages"] == datasets.List(datasets.Json()) and records["final"] == datasets.Json()
    assert records["judge"] == datasets.Json() and records["errors"] == datasets.List(datasets.Value("string"))
    matches = infos["matches"].features
    assert matches["votes"] == {choice: datasets.Value("int64") for choice in ("a", "b", "tie", "both_bad")}
    assert matches["reward_a"] == datasets.Value("float64") and matches["winner"] == datasets.Value("string")
    boards = infos["boards"].features  # every figure typed, so a day written before a figure existed still loads
    assert boards["date"] == datasets.Value("date32") and boards["n"] == datasets.Value("int64")
    assert boards["pass4_feasible_pct"] == datasets.Value("float64") and boards["arena_note"] == datasets.Value("string")
    assert list(infos["battles"].features) == ["date", "task_id", "model_a", "model_b", "mean_a", "mean_b", "winner"]


def test_record_fields_reads_back_what_a_card_declares():
    assert dataset_card.record_fields(dataset_card.render()) == set(dataset_card.RECORD_FEATURES)
    assert "judge" in dataset_card.record_fields(dataset_card.render(["judge", "messages"]))
    assert dataset_card.record_fields("# no front matter") == set()
    assert dataset_card.record_fields("---\n: [unbalanced\n---\nbody") == set()


def varied_records() -> list[dict]:
    """Records whose nested parts disagree in type from file to file."""
    records = make_records(8, seed=40)
    a, b, c, d, e, f, g, h = records
    a["messages"][1]["content"] = [{"type": "text", "text": "blocks, not a string"}]
    b["messages"][2]["content"] = None
    b["messages"][2]["tool_calls"] = []
    c["steps"] = [{"turn": 1, "tool": "check_plan", "plan": "ship 0 at 3", "result": {"error": "not a list"}},
                  {"turn": 2, "tool": "check_plan", "plan": {"ship": 0}, "result": {"text": "plain text"}}]
    d["steps"] = []
    d["final"] = {"submitted": False, "plan": None, "grade": None, "rubric": None}
    e["task"] = {}
    e["usage"] = {"input_tokens": 10, "output_tokens": 2, "cache_read_tokens": 7}
    f.pop("app_version")
    f["provider_switches"] = ["together -> fireworks after HTTP 503"]
    g["started"] = "2026-11-28T23:30:00.250-02:00"  # a fraction and an offset: 2026-11-29 01:30:00.25 UTC
    h["judge"] = {"label": "good", "scores": [1, 0.5, None]}
    h["limits"] = {"max_turns": 12, "max_tokens": None, "wall_clock_s": 1800.5, "notes": ["a", {"b": 1}]}
    return records


def test_a_folder_of_records_with_different_shapes_loads_with_both_configs(tmp_path):
    store = RolloutStore(tmp_path)
    records = varied_records()
    for record in records:
        store.save(record)
    assert (tmp_path / "rollouts" / "2026-11-29" / f"{records[6]['episode_id']}.json").is_file()
    assert len(list(tmp_path.glob("traces/*/*.jsonl"))) == len(records)  # the configs load beside the traces
    cache = str(tmp_path / ".cache")

    full = datasets.load_dataset(str(tmp_path), "rollouts", split="train", cache_dir=cache)
    by_id = {item["episode_id"]: item for item in full}
    assert len(by_id) == len(records)
    for record in records:
        item = by_id[record["episode_id"]]
        for name in ("steps", "final", "task", "usage", "errors", "provider_switches", "app_version", "judge"):
            assert json.dumps(item[name], sort_keys=True) == json.dumps(record.get(name), sort_keys=True), name
        assert [m["content"] for m in item["messages"]] == [m["content"] for m in record["messages"]]
        assert item["started"] == datetime.fromisoformat(record["started"])

    index = datasets.load_dataset(str(tmp_path), "index", split="train", cache_dir=cache)
    rows = {row["episode_id"]: row for row in index}
    assert rows[records[4]["episode_id"]]["num_ships"] is None
    assert rows[records[6]["episode_id"]]["started"] == datetime.fromisoformat("2026-11-29T01:30:00+00:00")


def test_index_files_of_different_writers_share_one_schema(tmp_path):
    """A writer whose rows are all unsubmitted (cost null everywhere) next to one with costs."""
    quiet = RolloutStore(tmp_path, writer_id="quiet")
    busy = RolloutStore(tmp_path, writer_id="busy")
    for record in make_records(4, seed=41, end_reason="stopped", started="2026-11-29T01:00:00Z"):
        quiet.save(record)
    for record in make_records(4, seed=42, end_reason="submitted", started="2026-11-29T02:00:00Z"):
        busy.save(record)
    assert all(row["cost"] is None for row in quiet.rows() if row["end_reason"] == "stopped")
    index = datasets.load_dataset(str(tmp_path), "index", split="train", cache_dir=str(tmp_path / ".cache"))
    assert index.features["cost"] == datasets.Value("int64") and len(index) == 8
    assert sorted(index["cost"], key=lambda v: (v is not None, v)) == \
        sorted((r["cost"] for r in busy.rows()), key=lambda v: (v is not None, v))


def test_pretty_printed_records_would_not_load(tmp_path):
    """Why records are written on one line: datasets 5.2 JSON-encodes `json` features line by line, so the same
    records with indent=1 fail. If this starts passing, records could be pretty-printed again."""
    store = RolloutStore(tmp_path)
    records = varied_records()
    for record in records:
        store.save(record)
    one_line = datasets.load_dataset(str(tmp_path), "rollouts", split="train", cache_dir=str(tmp_path / ".c1"))
    assert len(one_line) == len(records)
    for record in records:
        (tmp_path / record_path(record)).write_text(json.dumps(record, indent=1, ensure_ascii=False))
    with pytest.raises(datasets.exceptions.DatasetGenerationError):
        datasets.load_dataset(str(tmp_path), "rollouts", split="train", cache_dir=str(tmp_path / ".c2"))


def test_a_record_with_an_unlisted_field_extends_the_card_before_it_is_written(tmp_path):
    store = RolloutStore(tmp_path)
    store.save(make_record(seed=43, verdicts=[{"by": "judge", "ok": True}]))
    fields = dataset_card.record_fields((tmp_path / "README.md").read_text())
    assert "verdicts" in fields
    full = datasets.load_dataset(str(tmp_path), "rollouts", split="train", cache_dir=str(tmp_path / ".cache"))
    assert full[0]["verdicts"] == [{"by": "judge", "ok": True}]


def test_datasets_reads_the_traces_config_as_agent_trace_sessions(tmp_path):
    """Without declared features, datasets' JSON reader recognises the trace files as agent traces, as the Hub's
    viewer does, and reads one row per session (its `teich` package turns each into messages). Where `teich` is not
    installed that recognition shows as datasets asking for it; read as plain JSON lines it would not."""
    store = RolloutStore(tmp_path)
    records = make_records(4, seed=44)
    records[0]["messages"] = records[0]["messages"][:2]  # ended before the model's first turn: still a trace
    records[0]["started"] = "2026-11-01T00:00:00Z"  # ... and the first file datasets reads
    for record in records:
        store.save(record)
    cache = str(tmp_path / ".cache")
    if importlib.util.find_spec("teich") is None:
        with pytest.raises(datasets.exceptions.DatasetGenerationError) as caught:
            datasets.load_dataset(str(tmp_path), "traces", split="train", cache_dir=cache)
        assert isinstance(caught.value.__cause__, ImportError) and "teich" in str(caught.value.__cause__)
    else:
        sessions = datasets.load_dataset(str(tmp_path), "traces", split="train", cache_dir=cache)
        assert sorted(sessions["session_id"]) == sorted(r["episode_id"] for r in records)
        assert sorted(sessions["file_path"]) == sorted(trace_rel(record_path(r)) for r in records)
    assert len(datasets.load_dataset(str(tmp_path), "index", split="train", cache_dir=cache)) == len(records)
