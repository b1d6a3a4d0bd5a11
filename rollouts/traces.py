"""Agent traces: every rollout also as one session in the Hub's Session Trace Simple Format (STS-Format), which the
Hub detects and shows in its trace viewer (Data Studio) as a conversation with reasoning, tool calls and results.

The format (Hub docs "Session Traces Format", huggingface.co/docs/hub/session-traces-format) is JSONL: a session
header, then one line per message.

    {"type": "session", "harness": "berth-arena", "id": "<episode_id>", "name": "<model> on <task>: ...", ...}
    {"type": "message", "message": {"role", "content", "reasoningContent", "toolCalls", "toolCallId", "timestamp",
                                    "model"}}

How a record maps (one file per rollout, `traces/<YYYY-MM-DD>/<episode_id>.jsonl` beside the record's day folder):

- The header: `id` is the episode id; `name` says model, task, reward and end reason. The header may carry extra
  metadata, which the Hub ignores: the record's `model`, `task_id`, `started`, `reward`, `end_reason`, and `record`
  (its path in the dataset), so a trace leads back to its record.
- Messages keep the record's order and roles. `content` is text: content blocks (upstream's records) are joined by
  their text, a block without text kept as its JSON. An assistant's `reasoning` becomes `reasoningContent`, its
  `tool_calls` `toolCalls` with `arguments` as a JSON string: the model's text when it parses, else that text as a
  JSON string literal (what the model wrote, still JSON), `{}` when empty. A tool result's `tool_call_id` becomes
  `toolCallId`. What the format has no field for (a note's `kind`, `stop`, per-turn `usage`, the tool's `name`,
  which its call carries) stays in the record only.
- `model`, the record's model spec, is on the assistant messages: the ones that model wrote.
- `timestamp` (epoch milliseconds; optional in the format): records keep no time per message, so only the opening
  user message (the situation, handed over at the reset, before the model's first turn) carries one, the record's
  `started`. Every later message has none rather than a made-up time. The system prompt, sent at that same moment,
  carries none either: its line then differs in keys from the user line, which is what `datasets`' JSON reader
  (the Hub's dataset viewer runs it) looks for to read a file as an agent trace rather than as plain rows, and the
  first file decides for the whole config, even one whose episode ended before the model's first turn.
- A message of a role the format does not know, or that is not an object, is left out.

Only these record fields are read: no environment, header or key ever is (and records hold none: DESIGN.md).
Strings go in JSON-encoded as they are; nothing here makes HTML.

A trace depends only on fields a rollout keeps from the moment it is saved (annotations such as `regrade` are not
read), so the store writes it once, right after the record (`save_trace`), and `python -m rollouts traces
--backfill` writes those of records saved before traces existed. The pusher takes them to the Hub after their
records.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rollouts.jsonio import atomic_write
from rollouts.layout import RECORD_GLOB, inside, is_record_rel, trace_rel
from rollouts.schema import RecordError, parse_record, record_problem, started_at

log = logging.getLogger(__name__)

HARNESS = "berth-arena"  # the session header's `harness`: the id of what played the episode
ROLES = ("system", "user", "assistant", "tool")  # the roles the format knows
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def trace_lines(record: Mapping[str, Any], record_rel: str) -> list[dict]:
    """The session header and one line per message of the record stored at `record_rel`."""
    reward = record.get("reward")
    reward = reward if isinstance(reward, int | float) and math.isfinite(reward) else None
    model, task_id, end_reason = record.get("model"), record.get("task_id"), record.get("end_reason")
    score = "no reward" if reward is None else f"reward {reward:.3f}"
    header = {"type": "session", "harness": HARNESS, "id": record["episode_id"],
              "name": f"{model} on {task_id}: {score} ({end_reason})",
              "model": model, "task_id": task_id, "started": record.get("started"), "reward": reward,
              "end_reason": end_reason, "record": record_rel}
    return [header, *({"type": "message", "message": message} for message in trace_messages(record))]


def trace_messages(record: Mapping[str, Any]) -> list[dict]:
    """The record's messages in the format's shape (see the module doc)."""
    started = (started_at(dict(record)) - _EPOCH) // timedelta(milliseconds=1)
    model = record.get("model")
    out, opening = [], True
    for message in record.get("messages") or []:
        if not isinstance(message, Mapping) or message.get("role") not in ROLES:
            continue
        role = message["role"]
        opening = opening and role != "assistant"
        line: dict[str, Any] = {"role": role, "content": message_text(message.get("content"))}
        if role == "assistant":
            reasoning = message_text(message.get("reasoning"))
            if reasoning:
                line["reasoningContent"] = reasoning
            calls = message.get("tool_calls") if isinstance(message.get("tool_calls"), list) else []
            calls = [_tool_call(call) for call in calls if isinstance(call, Mapping)]
            if calls:
                line["toolCalls"] = calls
        elif role == "tool" and message.get("tool_call_id") is not None:
            line["toolCallId"] = str(message["tool_call_id"])
        if opening and role == "user":
            line["timestamp"] = started
        if role == "assistant" and isinstance(model, str):
            line["model"] = model
        out.append(line)
    return out


def message_text(value: Any) -> str:
    """A message part as text (a trace's and rollouts.conversations'): content blocks joined by their text; anything
    else as its JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(block if isinstance(block, str)
                         else block["text"] if isinstance(block, Mapping) and isinstance(block.get("text"), str)
                         else json.dumps(block, ensure_ascii=False) for block in value)
    return json.dumps(value, ensure_ascii=False)


def _tool_call(call: Mapping[str, Any]) -> dict:
    return {"id": str(call.get("id", "")), "function": {"name": str(call.get("name", "")),
                                                        "arguments": _arguments(call.get("arguments"))}}


def _arguments(value: Any) -> str:
    """Tool-call arguments as the format wants them, a JSON string; the model's own text whenever it is JSON."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return "{}"
    if not isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    try:
        json.loads(value, parse_constant=_not_json)
        return value
    except (ValueError, RecursionError):
        return json.dumps(value, ensure_ascii=False)


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # Python's reader takes NaN and Infinity; JSON does not


def encode_trace(record: Mapping[str, Any], record_rel: str) -> bytes:
    """The trace file's bytes: one JSON object a line, UTF-8."""
    # A lone surrogate (only possible inside a string) is written as its JSON escape rather than failing the file.
    lines = (json.dumps(line, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
             for line in trace_lines(record, record_rel))
    return b"".join(line.encode("utf-8", "backslashreplace") + b"\n" for line in lines)


def ensure_trace(root: Path, record: Mapping[str, Any], record_rel: str) -> tuple[str, str]:
    """Write the trace of the record stored at `record_rel` unless it is there with these bytes; (its path, and
    `new`, `updated` or `same`). Written whole (rollouts.jsonio.atomic_write)."""
    rel = trace_rel(record_rel)
    path = inside(root, rel)
    if path is None:
        raise ValueError(f"{rel} would be written outside {root}")
    data = encode_trace(record, record_rel)
    try:
        state = "same" if path.read_bytes() == data else "updated"
    except FileNotFoundError:
        state = "new"
    if state != "same":
        atomic_write(path, data)
    return rel, state


def save_trace(root: Path, record: Mapping[str, Any], record_rel: str) -> str | None:
    """The store's call after it wrote a record: the trace path when one was written, else None. Never raises: the
    record is already safe, and `--backfill` writes a trace that failed here."""
    try:
        rel, state = ensure_trace(root, record, record_rel)
    except Exception as exc:  # a trace is a copy: it must never cost the rollout its index row
        log.error("no agent trace written for %s: %s", record_rel, exc)
        return None
    return None if state == "same" else rel


# -- the backfill ------------------------------------------------------------------------------------------------

@dataclass
class Backfilled:
    new: int = 0  # trace files written where none was
    updated: int = 0  # trace files that differed (an older version's) and were written again
    same: int = 0  # already there and up to date
    damaged: list[tuple[str, str]] = field(default_factory=list)  # (record path, why it was skipped)


def backfill(root: Path) -> Backfilled:
    """Write the trace of every record in the folder `root` that lacks one (or has an outdated one). A record that
    cannot be read is skipped and named. Running it again changes nothing."""
    done = Backfilled()
    for path in sorted(root.glob(RECORD_GLOB)):
        rel = path.relative_to(root).as_posix()
        if not is_record_rel(rel):  # a temp file of a writer, or a name that is no record's
            continue
        try:
            _, state = ensure_trace(root, _stored_record(root, rel), rel)
        except (OSError, ValueError) as exc:  # RecordError is a ValueError
            done.damaged.append((rel, str(exc)))
            continue
        setattr(done, state, getattr(done, state) + 1)
    return done


def _stored_record(root: Path, rel: str) -> dict:
    """The record at `rel`, checked as the store checks one; RecordError naming what is wrong."""
    path = inside(root, rel)
    if path is None:
        raise RecordError("the file is a link out of the folder")
    episode_id = rel.rsplit("/", 1)[1].removesuffix(".json")
    record = parse_record(path.read_bytes(), episode_id)
    problem = record_problem(record)
    if problem is not None:
        raise RecordError(f"the record breaks the schema: {problem}")
    if record["episode_id"] != episode_id:
        raise RecordError(f"the file holds episode {record['episode_id']!r}, not {episode_id!r}")
    return record
