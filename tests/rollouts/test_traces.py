"""Agent traces (rollouts.traces): every saved rollout gets `traces/<day>/<episode_id>.jsonl`, read back here line
by line against the Hub's Session Trace Simple Format and compared with its record; the backfill command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from rollouts import cli as rollouts_cli
from rollouts import store as store_module
from rollouts import traces
from rollouts.layout import record_rel, trace_rel
from rollouts.store import RolloutStore
from testkit.records import make_record, make_records

ROOT = Path(__file__).resolve().parents[2]
# The format's fields (Hub docs "Session Traces Format"): the header's required ones, and a message's.
HEADER_REQUIRED = {"type", "harness", "id"}
MESSAGE_FIELDS = {"role", "content", "reasoningContent", "toolCalls", "toolCallId", "timestamp", "model"}
ROLES = {"system", "user", "assistant", "tool"}
# What our header adds (the format allows extra metadata): nothing read from anywhere but the record.
OUR_HEADER = {"type", "harness", "id", "name", "model", "task_id", "started", "reward", "end_reason", "record"}


def _strict_json(text: str | bytes):
    def refuse(name):
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=refuse)


def sts_problems(data: bytes) -> list[str]:
    """What in a trace file breaks the Session Trace Simple Format, line by line (empty when it follows it)."""
    if not data.endswith(b"\n"):
        return ["the file does not end with a newline"]
    problems, call_ids = [], set()
    for number, raw in enumerate(data[:-1].split(b"\n"), 1):
        try:
            line = _strict_json(raw.decode("utf-8"))
        except ValueError as exc:
            problems.append(f"line {number}: not one JSON value in UTF-8 ({exc})")
            continue
        if not isinstance(line, dict):
            problems.append(f"line {number}: not an object")
        elif number == 1:
            problems += [f"line 1: {p}" for p in _header_problems(line)]
        else:
            problems += [f"line {number}: {p}" for p in _message_problems(line, call_ids)]
    return problems


def _header_problems(line: dict) -> list[str]:
    problems = [f"header lacks {key}" for key in sorted(HEADER_REQUIRED - set(line))]
    if line.get("type") != "session":
        problems.append(f"header type is {line.get('type')!r}")
    problems += [f"header {key} is not a non-empty string" for key in ("harness", "id")
                 if not (isinstance(line.get(key), str) and line.get(key))]
    if "name" in line and not isinstance(line["name"], str):
        problems.append("header name is not a string")
    return problems


def _message_problems(line: dict, call_ids: set[str]) -> list[str]:
    if set(line) != {"type", "message"} or line["type"] != "message" or not isinstance(line["message"], dict):
        return [f"not a message envelope: {sorted(line)}"]
    message = line["message"]
    role = message.get("role")
    problems = [f"unknown field {key}" for key in sorted(set(message) - MESSAGE_FIELDS)]
    if role not in ROLES:
        problems.append(f"role {role!r}")
    if not isinstance(message.get("content"), str):
        problems.append("content is not text")
    if "reasoningContent" in message and (role != "assistant" or not isinstance(message["reasoningContent"], str)):
        problems.append("reasoningContent off an assistant message or not text")
    for call in message.get("toolCalls", []) if role == "assistant" else [None] * ("toolCalls" in message):
        if not (isinstance(call, dict) and set(call) == {"id", "function"} and isinstance(call["id"], str)
                and isinstance(call["function"], dict) and set(call["function"]) == {"name", "arguments"}
                and isinstance(call["function"]["name"], str) and isinstance(call["function"]["arguments"], str)):
            problems.append(f"tool call not {{id, function: {{name, arguments}}}}: {call!r}"[:200])
            continue
        try:
            _strict_json(call["function"]["arguments"])
        except ValueError:
            problems.append(f"tool-call arguments are not a JSON string: {call['function']['arguments']!r}"[:200])
        call_ids.add(call["id"])
    if "toolCallId" in message and (role != "tool" or message["toolCallId"] not in call_ids):
        problems.append(f"toolCallId {message['toolCallId']!r} answers no earlier tool call (or is off a tool)")
    stamp = message.get("timestamp")
    if "timestamp" in message and not (type(stamp) is int and 946684800000 <= stamp < 4102444800000):
        problems.append(f"timestamp {stamp!r} is not epoch milliseconds")
    if "model" in message and not isinstance(message["model"], str):
        problems.append("model is not a string")
    return problems


def read_trace(root: Path, record: dict) -> tuple[dict, list[dict]]:
    """The header and the messages of a record's trace file, after checking the file against the format."""
    data = (root / trace_rel(record_rel(record))).read_bytes()
    assert sts_problems(data) == []
    header, *lines = [json.loads(line) for line in data.splitlines()]
    return header, [line["message"] for line in lines]


def started_ms(record: dict) -> int:
    return round(datetime.fromisoformat(record["started"].replace("Z", "+00:00")).timestamp() * 1000)


def test_the_format_checker_catches_what_breaks_the_format():
    good = (b'{"type":"session","harness":"h","id":"a"}\n'
            b'{"type":"message","message":{"role":"assistant","content":"","toolCalls":[{"id":"t1","function":'
            b'{"name":"f","arguments":"{}"}}]}}\n'
            b'{"type":"message","message":{"role":"tool","toolCallId":"t1","content":"x",'
            b'"timestamp":1764411300000}}\n')
    assert sts_problems(good) == []
    for bad in (good.replace(b'"harness":"h",', b""), good.replace(b'"content":"x"', b'"content":["x"]'),
                good.replace(b'"t1","content"', b'"t9","content"'), good.replace(b'"{}"', b'"{plan"'),
                good.replace(b"1764411300000", b"1764411300"), good.replace(b'"role":"tool"', b'"role":"bot"'),
                good.replace(b'"content":"x"', b'"content":"x","kind":"nudge"'), good[:-1]):
        assert sts_problems(bad), bad


def test_every_saved_rollout_gets_a_trace_of_its_conversation(tmp_path):
    store = RolloutStore(tmp_path, writer_id="w")
    records = make_records(40, seed=70)
    for record in records:
        store.save(record)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("traces/*/*.jsonl")) == sorted(
        trace_rel(record_rel(r)) for r in records)
    for record in records:
        header, lines = read_trace(tmp_path, record)
        assert header["harness"] == "berth-arena" and header["id"] == record["episode_id"]
        assert header["name"] == f"{record['model']} on {record['task_id']}: reward {record['reward']:.3f} " \
                                 f"({record['end_reason']})"
        assert set(header) == OUR_HEADER and header["record"] == record_rel(record)
        assert [m["role"] for m in lines] == [m["role"] for m in record["messages"]]
        first_turn = next(i for i, m in enumerate(record["messages"] + [{"role": "assistant"}])
                          if m["role"] == "assistant")
        for i, (line, message) in enumerate(zip(lines, record["messages"], strict=True)):
            assert line["content"] == message["content"]
            assert line.get("timestamp") == (started_ms(record) if message["role"] == "user" and i < first_turn
                                             else None)
            if message["role"] == "assistant":
                assert line["model"] == record["model"]
                assert line.get("reasoningContent") == (message["reasoning"] or None)
                assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in
                        line.get("toolCalls", [])] == [(c["id"], c["name"], c["arguments"]) for c in
                                                       message["tool_calls"]]
            else:
                assert "model" not in line and "toolCalls" not in line
            assert line.get("toolCallId") == message.get("tool_call_id")


def test_odd_message_shapes_still_follow_the_format(tmp_path):
    store = RolloutStore(tmp_path)
    record = make_record(seed=71, model="openai:gpt-5.5@medium", end_reason="submitted", reward=float("nan"))
    odd = [
        {"role": "user", "content": [{"type": "text", "text": "blocks"}, {"type": "image", "data": "AAAA"}]},
        {"role": "assistant", "content": None, "reasoning": "", "stop": "tool_use", "tool_calls": [
            {"id": "c1", "name": "check_plan", "arguments": "{plan: [1,"},
            {"id": "c2", "name": "get_situation", "arguments": ""},
            {"id": "c3", "name": "check_plan", "arguments": "NaN"},
            {"id": "c4", "name": "check_plan", "arguments": {"plan": []}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "check_plan",
         "content": "<b>bad</b> & \"quoted\" ünïcode"},
        {"role": "developer", "content": "a role the format does not know"},
    ]
    record["messages"] += odd
    store.save(record)
    header, lines = read_trace(tmp_path, record)
    assert header["reward"] is None and header["name"].endswith(": no reward (submitted)")
    blocks, turn, result = lines[-3:]
    assert blocks["content"] == 'blocks\n{"type": "image", "data": "AAAA"}'
    assert turn["content"] == "" and "reasoningContent" not in turn
    arguments = [json.loads(call["function"]["arguments"]) for call in turn["toolCalls"]]
    assert arguments == ["{plan: [1,", {}, "NaN", {"plan": []}]  # broken text kept, as a JSON string
    assert result["content"] == "<b>bad</b> & \"quoted\" ünïcode" and result["toolCallId"] == "c1"
    assert len(lines) == len(record["messages"]) - 1  # the unknown role is left out
    # A lone surrogate (JSON can carry one as an escape; UTF-8 cannot) is written as that escape.
    lone = traces.encode_trace({**record, "messages": [{"role": "user", "content": "half \ud800"}]}, "x")
    assert sts_problems(lone) == [] and json.loads(lone.splitlines()[1])["message"]["content"] == "half \ud800"


def test_saving_again_or_annotating_leaves_the_trace_alone(tmp_path):
    store = RolloutStore(tmp_path)
    record = make_record(seed=72, episode_id="late", started="2026-11-29T23:30:00-02:00")
    store.save(record)
    trace = tmp_path / "traces" / "2026-11-30" / "late.jsonl"  # the record's day folder: the UTC date
    assert (tmp_path / "rollouts" / "2026-11-30" / "late.json").is_file()
    before = trace.stat().st_mtime_ns, trace.read_bytes()
    store.save(record)
    store.annotate("regrade", {"late": {"reward": 0.5, "grade": {"feasible": True}}})
    assert (trace.stat().st_mtime_ns, trace.read_bytes()) == before


def test_a_rollout_whose_row_and_trace_were_lost_gets_both_back(tmp_path, monkeypatch):
    store = RolloutStore(tmp_path, writer_id="w")
    record = make_record(seed=73)
    store.save(record)
    trace = tmp_path / trace_rel(record_rel(record))
    data = trace.read_bytes()
    trace.unlink()
    for index in tmp_path.glob("index/*/*.jsonl"):
        index.unlink()
    monkeypatch.setattr(store_module, "RECOVER_GRACE_S", 0.0)
    reopened = RolloutStore(tmp_path, writer_id="w2")
    assert reopened.rows()[0]["episode_id"] == record["episode_id"] and trace.read_bytes() == data


def test_no_key_or_token_reaches_a_trace(tmp_path, monkeypatch):
    secrets = {"HF_TOKEN": "hf_traceSecret0123456789abcdef", "ANTHROPIC_API_KEY": "sk-ant-traceSecret-0123456789",
               "OPENAI_API_KEY": "sk-traceSecret0123456789", "VLLM_API_KEY": "vllm-traceSecret-0123"}
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    store = RolloutStore(tmp_path)
    for record in make_records(5, seed=74):
        store.save(record)
        header, _ = read_trace(tmp_path, record)
        assert set(header) == OUR_HEADER
    data = b"".join(p.read_bytes() for p in tmp_path.glob("traces/*/*.jsonl"))
    assert data and not any(value.encode() in data for value in secrets.values())


def test_backfill_writes_the_missing_traces_names_damaged_records_and_changes_nothing_twice(tmp_path, capsys):
    store = RolloutStore(tmp_path, writer_id="w")
    records = make_records(6, seed=75)
    for record in records:
        store.save(record)
    paths = {r["episode_id"]: tmp_path / trace_rel(record_rel(r)) for r in records}
    written = {episode_id: path.read_bytes() for episode_id, path in paths.items()}
    old, outdated, damaged, kept = records[:3], records[3], records[4], records[5]
    for record in [*old, damaged]:  # saved before traces existed
        paths[record["episode_id"]].unlink()
    paths[outdated["episode_id"]].write_bytes(b'{"type":"session"}\n')  # an older version's trace
    record_file = tmp_path / record_rel(damaged)
    record_file.write_bytes(record_file.read_bytes()[:200])
    kept_mtime = paths[kept["episode_id"]].stat().st_mtime_ns

    done = subprocess.run([sys.executable, "-m", "rollouts", "traces", "--backfill", "--dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "wrote 3 missing trace file(s) and 1 outdated one(s); 1 already up to date; 1 damaged record(s) skipped",
        f"skipped {record_rel(damaged)}: The record of {damaged['episode_id']} cannot be read: the file is damaged "
        "or truncated."]
    for record in [*old, outdated, kept]:  # what the store itself writes, byte for byte
        assert paths[record["episode_id"]].read_bytes() == written[record["episode_id"]]
    assert not paths[damaged["episode_id"]].exists()
    assert paths[kept["episode_id"]].stat().st_mtime_ns == kept_mtime

    mtimes = {path: path.stat().st_mtime_ns for path in tmp_path.glob("traces/*/*.jsonl")}
    assert rollouts_cli.main(["traces", "--backfill", "--dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("wrote 0 missing trace file(s) and 0 outdated one(s); 5 already")
    assert {path: path.stat().st_mtime_ns for path in tmp_path.glob("traces/*/*.jsonl")} == mtimes


def test_backfill_skips_a_record_that_names_another_episode(tmp_path):
    store = RolloutStore(tmp_path)
    record = make_record(seed=76, episode_id="right")
    store.save(record)
    impostor = tmp_path / record_rel(record).replace("right", "wrong")
    impostor.write_bytes((tmp_path / record_rel(record)).read_bytes())
    done = traces.backfill(tmp_path)
    assert (done.new, done.same) == (0, 1)
    assert done.damaged == [(impostor.relative_to(tmp_path).as_posix(),
                             "the file holds episode 'right', not 'wrong'")]
