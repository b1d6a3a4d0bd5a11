"""The events an episode emits, from the loop to whoever watches it (the live chat, the CLI, a test).

Every event is a plain dict that `json.dumps` can write, with a `type` and the fields below. The loop stamps two
more fields on each one as it leaves: `seq` (0, 1, 2, ... within the episode) and `t` (seconds since the episode
started, three decimals), so a renderer can show durations and a benchmark can measure latency.

| type | fields |
|---|---|
| `episode_started` | `episode_id, task_id, model, env_url, instructions, situation, tools, limits, task` |
| `turn_started` | `turn` (1-based), `max_turns` |
| `text_delta` | `turn, text` |
| `reasoning_delta` | `turn, text` |
| `tool_args_delta` | `turn, index` (position of the call in the turn), `call_id, name, text` |
| `tool_call` | `turn, call_id, name, arguments` (raw JSON text), `error` (why it will not reach the server, or null) |
| `tool_result` | `turn, call_id, name, text` (what the server said), `data` (that text parsed as JSON, or null), `done, reward, metadata`, `step` (the record's step for `check_plan`/`submit_plan`, else null), `local` (true when answered by the loop, not the server) |
| `turn_finished` | `turn, stop, usage` (this turn: `input_tokens, output_tokens`), `usage_total` |
| `note` | `turn, kind, text`: a message the loop sends the model or the watcher (`kind` below) |
| `error` | `turn, message`: a provider or transport failure (the episode ends, the record is kept) |
| `episode_finished` | `record`: the whole rollout record |

Note kinds: `nudge` (a turn without a tool call), `cutoff` (the turn ran out of output tokens; the notes and the
nudge that follow), `last_turn` (submit now), `retry` (a provider asked us to wait and try again),
`provider_switch` (an `hf:` fallback), `stopped` (a user's Stop), `wall_clock` (the time limit was reached).
"""

from __future__ import annotations

from typing import Any

Event = dict[str, Any]

NOTE_KINDS = ("nudge", "cutoff", "last_turn", "retry", "provider_switch", "stopped", "wall_clock")


def episode_started(*, episode_id: str, task_id: str, model: str, env_url: str, instructions: str,
                    situation: str, tools: list[dict], limits: dict, task: dict) -> Event:
    return {"type": "episode_started", "episode_id": episode_id, "task_id": task_id, "model": model,
            "env_url": env_url, "instructions": instructions, "situation": situation, "tools": tools,
            "limits": limits, "task": task}


def turn_started(turn: int, max_turns: int) -> Event:
    return {"type": "turn_started", "turn": turn, "max_turns": max_turns}


def text_delta(turn: int, text: str) -> Event:
    return {"type": "text_delta", "turn": turn, "text": text}


def reasoning_delta(turn: int, text: str) -> Event:
    return {"type": "reasoning_delta", "turn": turn, "text": text}


def tool_args_delta(turn: int, index: int, call_id: str, name: str, text: str) -> Event:
    return {"type": "tool_args_delta", "turn": turn, "index": index, "call_id": call_id, "name": name,
            "text": text}


def tool_call(turn: int, call_id: str, name: str, arguments: str, error: str | None = None) -> Event:
    return {"type": "tool_call", "turn": turn, "call_id": call_id, "name": name, "arguments": arguments,
            "error": error}


def tool_result(turn: int, call_id: str, name: str, text: str, *, data: Any = None, done: bool = False,
                reward: float | None = None, metadata: dict | None = None, step: dict | None = None,
                local: bool = False) -> Event:
    return {"type": "tool_result", "turn": turn, "call_id": call_id, "name": name, "text": text, "data": data,
            "done": done, "reward": reward, "metadata": metadata or {}, "step": step, "local": local}


def turn_finished(turn: int, stop: str, usage: dict, usage_total: dict) -> Event:
    return {"type": "turn_finished", "turn": turn, "stop": stop, "usage": dict(usage),
            "usage_total": dict(usage_total)}


def note(turn: int, kind: str, text: str) -> Event:
    assert kind in NOTE_KINDS, kind
    return {"type": "note", "turn": turn, "kind": kind, "text": text}


def error(turn: int, message: str) -> Event:
    return {"type": "error", "turn": turn, "message": message}


def episode_finished(record: dict) -> Event:
    return {"type": "episode_finished", "record": record}
