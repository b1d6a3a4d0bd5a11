"""The events an episode emits, from the loop to whoever watches it (the live chat, the CLI, a test).

Every event is a plain dict that `json.dumps` can write, tagged by `type`; the TypedDicts below give each type its
fields and `validate_event` checks one against them. The constructors build an event without its stamps; the loop
stamps two more fields on each one as it leaves:

- `seq`: 0, 1, 2, ... within the episode. Every emitted event has one, replayed ones too (viewer/replay.py).
- `t`: seconds since the episode started, three decimals, so a renderer can show durations and a benchmark can
  measure latency. A stored record keeps no timestamps, so events replayed from a record have no `t`: an absent
  `t` means "not known", never zero.

Note kinds: `nudge` (a turn without a tool call), `cutoff` (the turn ran out of output tokens; the notes and the
nudge that follow), `last_turn` (submit now), `retry` (a provider asked us to wait and try again),
`provider_switch` (an `hf:` fallback), `stopped` (a user's Stop), `wall_clock` (the time limit was reached).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, NotRequired

import pydantic
from typing_extensions import TypedDict

from rollouts.problems import first_problem

NoteKind = Literal["nudge", "cutoff", "last_turn", "retry", "provider_switch", "stopped", "wall_clock"]
NOTE_KINDS: tuple[str, ...] = NoteKind.__args__  # type: ignore[attr-defined]


class _Stamped(TypedDict):
    # Strict and closed: an event that says "3" for a turn, or carries a misspelt field, is refused.
    __pydantic_config__ = pydantic.ConfigDict(strict=True, extra="forbid")  # type: ignore[misc]

    # Not required by the type only because constructors build events before the loop stamps them;
    # `validate_event` requires `seq` on every event.
    seq: NotRequired[int]
    t: NotRequired[float]  # absent on events replayed from a record


class EpisodeStarted(_Stamped):
    type: Literal["episode_started"]
    episode_id: str
    task_id: str
    model: str
    env_url: str | None  # `embedded` or the server URL; None when a replayed record does not say
    instructions: str  # the system prompt (the server's rules text)
    situation: str
    tools: list[dict]  # empty when replayed: a record does not keep the tool list
    limits: dict
    task: dict  # the record's task summary


class TurnStarted(_Stamped):
    type: Literal["turn_started"]
    turn: int  # 1-based
    max_turns: int | None  # None when a replayed record does not say


class TextDelta(_Stamped):
    type: Literal["text_delta"]
    turn: int
    text: str


class ReasoningDelta(_Stamped):
    type: Literal["reasoning_delta"]
    turn: int
    text: str


class ToolArgsDelta(_Stamped):
    type: Literal["tool_args_delta"]
    turn: int
    index: int  # the position of the call in its turn
    call_id: str
    name: str
    text: str  # a piece of the streamed arguments


class ToolCallEvent(_Stamped):
    type: Literal["tool_call"]
    turn: int
    call_id: str
    name: str
    arguments: str  # the raw JSON text the model wrote
    error: str | None  # why the call will not reach the server, or None


class ToolResult(_Stamped):
    type: Literal["tool_result"]
    turn: int
    call_id: str
    name: str
    text: str  # what the server (or the loop) answered
    data: Any  # that text parsed as JSON, or None
    done: bool
    reward: float | None
    metadata: dict
    step: dict | None  # the record's step for check_plan / submit_plan, else None
    local: bool  # answered by the loop, not the server


class TurnFinished(_Stamped):
    type: Literal["turn_finished"]
    turn: int
    stop: str  # the provider's stop reason, as it said it ("" when it said none)
    usage: dict  # this turn's input_tokens, output_tokens (empty when replayed)
    usage_total: dict


class Note(_Stamped):
    type: Literal["note"]
    turn: int
    kind: NoteKind
    text: str


class Error(_Stamped):
    type: Literal["error"]
    turn: int
    message: str  # a provider or transport failure; the episode ends and its record is kept


class EpisodeFinished(_Stamped):
    type: Literal["episode_finished"]
    record: dict  # the whole rollout record (rollouts.schema validates it on its own)


Event = (EpisodeStarted | TurnStarted | TextDelta | ReasoningDelta | ToolArgsDelta | ToolCallEvent | ToolResult
         | TurnFinished | Note | Error | EpisodeFinished)
_EVENT: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(Annotated[Event, pydantic.Field(discriminator="type")])


class EventError(ValueError):
    """An event that does not follow its type; the message names the field."""


def validate_event(event: Any) -> None:
    """Raise EventError naming the field (`tool_result.reward: ...`) unless `event` is a sound, stamped event."""
    if not isinstance(event, dict):
        raise EventError(f"an event is a dict, not {type(event).__name__}")
    try:
        _EVENT.validate_python(event)
    except pydantic.ValidationError as exc:
        raise EventError(first_problem(exc, "event")) from None
    if "seq" not in event:
        raise EventError(f"{event['type']}.seq: every emitted event carries its sequence number")


# Why a call sent after the call that ended the episode (in the same turn) never reaches the server.
EPISODE_OVER = "the episode is over"


def local_answer(problem: str) -> str:
    """The loop's own answer to a call that never reaches the server (what the model and the record read)."""
    return json.dumps({"error": problem}, ensure_ascii=False)


def parse_arguments(arguments: str) -> tuple[dict | None, str | None]:
    """A tool call's arguments as a dict, or why they cannot reach the server (a `tool_call` event's `error`).

    The one rule and its one wording: the loop decides with it as a call arrives (agent.providers.base.ToolCall)
    and a replayed record decides again with it (rollouts.replay), so a replay shows the error the live run did.
    """
    try:
        value = json.loads(arguments or "{}")
    except (json.JSONDecodeError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        return None, f"the tool-call arguments are not valid JSON ({reason}); send one JSON object"
    if not isinstance(value, dict):
        return None, "the tool-call arguments must be a JSON object, e.g. {\"plan\": [...]}"
    return value, None


# -- constructors (the loop and the replay build every event through these) --------------------------------------

def episode_started(*, episode_id: str, task_id: str, model: str, env_url: str | None, instructions: str,
                    situation: str, tools: list[dict], limits: dict, task: dict) -> EpisodeStarted:
    return {"type": "episode_started", "episode_id": episode_id, "task_id": task_id, "model": model,
            "env_url": env_url, "instructions": instructions, "situation": situation, "tools": tools,
            "limits": limits, "task": task}


def turn_started(turn: int, max_turns: int | None) -> TurnStarted:
    return {"type": "turn_started", "turn": turn, "max_turns": max_turns}


def text_delta(turn: int, text: str) -> TextDelta:
    return {"type": "text_delta", "turn": turn, "text": text}


def reasoning_delta(turn: int, text: str) -> ReasoningDelta:
    return {"type": "reasoning_delta", "turn": turn, "text": text}


def tool_args_delta(turn: int, index: int, call_id: str, name: str, text: str) -> ToolArgsDelta:
    return {"type": "tool_args_delta", "turn": turn, "index": index, "call_id": call_id, "name": name,
            "text": text}


def tool_call(turn: int, call_id: str, name: str, arguments: str, error: str | None = None) -> ToolCallEvent:
    return {"type": "tool_call", "turn": turn, "call_id": call_id, "name": name, "arguments": arguments,
            "error": error}


def tool_result(turn: int, call_id: str, name: str, text: str, *, data: Any = None, done: bool = False,
                reward: float | None = None, metadata: dict | None = None, step: dict | None = None,
                local: bool = False) -> ToolResult:
    return {"type": "tool_result", "turn": turn, "call_id": call_id, "name": name, "text": text, "data": data,
            "done": done, "reward": reward, "metadata": metadata or {}, "step": step, "local": local}


def turn_finished(turn: int, stop: str, usage: dict, usage_total: dict) -> TurnFinished:
    return {"type": "turn_finished", "turn": turn, "stop": stop, "usage": dict(usage),
            "usage_total": dict(usage_total)}


def note(turn: int, kind: NoteKind, text: str) -> Note:
    if kind not in NOTE_KINDS:
        raise ValueError(f"unknown note kind {kind!r}: one of {', '.join(NOTE_KINDS)}")
    return {"type": "note", "turn": turn, "kind": kind, "text": text}


def error(turn: int, message: str) -> Error:
    return {"type": "error", "turn": turn, "message": message}


def episode_finished(record: dict) -> EpisodeFinished:
    return {"type": "episode_finished", "record": record}
