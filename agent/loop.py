"""One episode: a model plays a berth-planning task through the server's tools, turn by turn.

`stream_episode` is a generator of events (rollouts/events.py), token by token; `run_episode` drains it and returns
the rollout record. The semantics follow the upstream harness (DESIGN.md "One episode"): the rules are the system
prompt, the situation opens the chat, each tool result says how many turns are left, the last turn asks for a
submission, two turns in a row without a tool call end the episode, and every failure is recorded with the
rollout kept as it stands.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any

from agent.interrupt import Interrupt, Interrupted
from agent.limits import valid_task_id
from agent.netguard import http_url
from agent.notes import CUTOFF_NOTES, CUTOFF_NUDGE, LAST_TURN, NUDGE, OPENING
from agent.providers.base import NOTES_CHARS, ModelAPI, ModelTurn, ToolCall, scrub
from agent.providers.registry import check_endpoint, make_provider, resolve_key
from agent.record import new_record, parse_json, task_summary
from agent.request import EpisodeRequest
from agent.session import EnvSession
from berth_env import load_pack
from rollouts import events as ev
from rollouts.record import apply_tool_outcome, finish
from rollouts.schema import new_episode_id, valid_episode_id


def turns_left_suffix(left: int) -> str:
    return f"\n\n[{left} turn{'' if left == 1 else 's'} left]"


class _Emitter:
    """Stamps each event with its sequence number and its time since the episode started; hands the record as it
    stands to `progress` (if any) as each event goes out."""

    def __init__(self, started: float, record: dict, progress: Callable[[dict], None] | None = None):
        self.started = started
        self.seq = 0
        self.record, self.progress = record, progress

    def __call__(self, event: ev.Event) -> ev.Event:
        event["seq"] = self.seq
        event["t"] = round(time.monotonic() - self.started, 3)
        self.seq += 1
        if self.progress is not None and event["type"] != "episode_finished":
            self.progress(self.record)
        return event


@dataclass
class _Episode:
    """One episode as the loop plays it: its record, where its events go, and what may end it."""

    record: dict
    emit: _Emitter
    interrupt: Interrupt
    secrets: list[str]  # keys to scrub from every error text
    max_turns: int
    session: EnvSession | None = None
    provider: ModelAPI | None = None
    turn: int = 0  # the turn being played; 0 before the first


def stream_episode(request: EpisodeRequest, *, episode_id: str | None = None, stop: threading.Event | None = None,
                   progress: Callable[[dict], None] | None = None) -> Iterator[ev.Event]:
    """Play one episode of `request` (agent/request.py: its spec parsed once, by the door that checked it) and yield
    its events; the last one carries the record. TypeError for anything but an EpisodeRequest.

    Its keys are for this run only and never reach the record. Setting `stop` ends the episode as `stopped`.
    `progress` gets the record as it stands at the start and with each event (rollouts.journal keeps it, so a
    crash still leaves the episode's record); it must not keep a reference past the call.
    """
    if not isinstance(request, EpisodeRequest):  # a spec's text would have to be read again here
        raise TypeError(f"stream_episode takes an EpisodeRequest, not {type(request).__name__}")
    return _stream(request, episode_id or new_episode_id(), stop, progress)


def _stream(request: EpisodeRequest, episode_id: str, stop: threading.Event | None,
            progress: Callable[[dict], None] | None) -> Iterator[ev.Event]:
    started_wall, started = time.time(), time.monotonic()
    limits = request.limits
    record = new_record(episode_id=episode_id, model=request.model, task_id=request.task_id,
                        env_url=_public_url(request.env_url), limits=limits.as_record(), started=started_wall,
                        run=request.run, source=request.source)
    record["task"] = task_summary(request.task_id, {}, pack_task(request.task_id))
    if progress is not None:
        progress(record)
    episode = _Episode(record, _Emitter(started, record, progress), Interrupt(stop, limits.wall_clock_s),
                       request.secrets, limits.max_turns)
    try:
        provider = yield from _set_up(episode, request)
        yield from _play_turns(episode, provider)
    except Interrupted as stopped:
        record["end_reason"] = stopped.reason
        text = ("Stopped by the user." if stopped.reason == "stopped"
                else f"The episode reached its wall-clock limit of {limits.wall_clock_s:.0f} s.")
        yield episode.emit(ev.note(episode.turn, stopped.reason, text))
    except Exception as exc:  # provider, transport or set-up failure: recorded, the rollout kept as it stands
        # Scrubbed before it is cut: a cut through a key would leave its first characters unrecognised.
        message = scrub(f"{type(exc).__name__}: {str(exc)[:20_000]}", episode.secrets)[:800]
        record["errors"].append(message)
        record["end_reason"] = record["end_reason"] or "error"
        yield episode.emit(ev.error(episode.turn, message))
    finally:
        episode.interrupt.finish()
        if episode.session is not None:
            episode.session.close(wait=False)
    yield episode.emit(ev.episode_finished(_finish_record(episode, started)))


def pack_task(task_id: str) -> dict | None:
    """The embedded pack's full task (its references give the record the optimum and the naive cost); None for a
    task only a remote server has, whose record then keeps what the server's reset says of it."""
    try:
        return load_pack().get(task_id)
    except KeyError:
        return None


def _public_url(env_url: str | None) -> str:
    """The server as the public record names it: without userinfo, which would be a credential."""
    if not env_url:
        return "embedded"
    try:
        return http_url(env_url)
    except ValueError:  # the session will fail on it and say so; the record keeps no part of it
        return "invalid URL"


def _set_up(episode: _Episode, request: EpisodeRequest) -> Generator[ev.Event, None, ModelAPI]:
    """Check the ids and the spec's key and endpoint, reset the server, open the chat; returns the provider."""
    record = episode.record
    episode_id, task_id = record["episode_id"], record["task_id"]
    if not valid_episode_id(episode_id):
        raise ValueError(f"episode id {str(episode_id)[:80]!r} must be 1-64 letters, digits, '-' or '_'")
    if not valid_task_id(task_id):
        raise ValueError(f"task id {str(task_id)[:80]!r} must be 1-128 letters, digits, '.', '-' or '_'")
    spec, env_url = request.spec, request.env_url
    key = resolve_key(spec, dict(request.keys))
    if key and key not in episode.secrets:
        episode.secrets.append(key)
    check_endpoint(spec)
    episode.session = (EnvSession(env_url, policy=request.server_policy) if env_url
                       else EnvSession(_embedded_url()))
    metadata = episode.session.reset(task_id, episode_id)
    tools = episode.session.tools()
    record["task"] = task_summary(task_id, metadata, pack_task(task_id))
    system = metadata["instructions"]
    opening = OPENING.format(situation=metadata["situation"])
    record["messages"] += [{"role": "system", "content": system}, {"role": "user", "content": opening}]
    yield episode.emit(ev.episode_started(episode_id=episode_id, task_id=task_id, model=record["model"],
                                          env_url=record["env_url"], instructions=system,
                                          situation=metadata["situation"], tools=tools, limits=record["limits"],
                                          task=record["task"]))
    provider = make_provider(spec, key=key, system=system, tools=tools, max_tokens=record["limits"]["max_tokens"],
                             task_id=task_id, max_turns=episode.max_turns, retry_base_s=request.retry_base_s,
                             baseline_pace_s=request.baseline_pace_s)
    episode.provider = provider
    provider.add_user(opening)
    return provider


def _play_turns(episode: _Episode, provider: ModelAPI) -> Iterator[ev.Event]:
    """Turn after turn until the episode is done, the turns run out or the model twice calls no tool."""
    empty_turns = 0
    for turn in range(1, episode.max_turns + 1):
        episode.turn = turn
        result = yield from _take_turn(episode, provider)
        if not result.calls:
            empty_turns += 1
            if empty_turns >= 2 or turn == episode.max_turns:
                episode.record["end_reason"] = "no_tool_call"
                return
            yield from _nudge(provider, episode.record, result, turn, episode.emit)
            continue
        empty_turns = 0
        done = yield from _play_calls(episode, provider, result.calls)
        if done:
            return
    episode.record["end_reason"] = "turn_limit"


def _take_turn(episode: _Episode, provider: ModelAPI) -> Generator[ev.Event, None, ModelTurn]:
    """One model turn: the last-turn reminder when it is due, the streamed turn, and its place in the record."""
    record, emit, turn = episode.record, episode.emit, episode.turn
    episode.interrupt.check()
    yield emit(ev.turn_started(turn, episode.max_turns))
    if turn == episode.max_turns:
        provider.add_user(LAST_TURN)
        record["messages"].append({"role": "user", "content": LAST_TURN, "kind": "last_turn"})
        yield emit(ev.note(turn, "last_turn", LAST_TURN))
    result = yield from _model_turn(provider, turn, episode.interrupt, emit)
    record["turns"] = turn
    # Each turn's own usage goes on its message (how many tokens a model spent before its first valid plan, a
    # long-prompt price tier); the record's `usage` keeps the episode's totals.
    spent = {side: int(result.usage.get(side, 0) or 0) for side in ("input_tokens", "output_tokens")}
    for side, tokens in spent.items():
        record["usage"][side] += tokens
    record["messages"].append({"role": "assistant", "content": result.text, "reasoning": result.reasoning,
                               "stop": result.stop,
                               "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments}
                                              for c in result.calls],
                               "usage": spent})
    yield emit(ev.turn_finished(turn, result.stop, result.usage, record["usage"]))
    return result


def _finish_record(episode: _Episode, started: float) -> dict:
    """The record as the episode leaves it: provider switches (scrubbed), the end reason, the wall time."""
    record, provider = episode.record, episode.provider
    if provider is not None and provider.provider_switches:
        record["provider_switches"] = [scrub(s, episode.secrets) for s in provider.provider_switches]
    return finish(record, "turn_limit", time.monotonic() - started)


def run_episode(request: EpisodeRequest, **options: Any) -> dict:
    """Play one episode to the end and return its rollout record (`options` as `stream_episode`'s)."""
    record: dict | None = None
    for event in stream_episode(request, **options):
        if event["type"] == "episode_finished":
            record = event["record"]
    assert record is not None
    return record


def _model_turn(provider: ModelAPI, turn: int, interrupt: Interrupt,
                emit: _Emitter) -> Generator[ev.Event, None, ModelTurn]:
    stream = provider.stream_turn(turn, interrupt)
    while True:
        try:
            event = next(stream)
        except StopIteration as finished:
            result: ModelTurn = finished.value
            return result
        yield emit(event)


def _nudge(provider: ModelAPI, record: dict, result: ModelTurn, turn: int, emit: _Emitter) -> Iterator[ev.Event]:
    """A turn without a tool call: hand back a cut-off turn's notes, then ask for a tool call."""
    if result.cut_off and result.reasoning:
        # A turn cut off mid-thought loses its reasoning; its tail lets the next turn continue, not start over.
        notes = result.reasoning[-NOTES_CHARS:]
        provider.add_notes(notes)
        record["messages"].append({"role": "user", "content": CUTOFF_NOTES.format(notes=notes), "kind": "cutoff"})
        text, kind = CUTOFF_NUDGE, "cutoff"
    else:
        text, kind = NUDGE, "nudge"
    provider.add_user(text)
    record["messages"].append({"role": "user", "content": text, "kind": kind})
    yield emit(ev.note(turn, kind, text))


def _play_calls(episode: _Episode, provider: ModelAPI, calls: list[ToolCall]) -> Generator[ev.Event, None, bool]:
    """Send a turn's tool calls to the server in order; returns whether the episode is done."""
    record, emit, turn = episode.record, episode.emit, episode.turn
    answered: list[tuple[ToolCall, str]] = []
    done = False
    try:
        for call in calls:
            arguments, problem = call.parsed()
            if done:
                problem = ev.EPISODE_OVER
            yield emit(ev.tool_call(turn, call.id, call.name, call.arguments, problem))
            if problem is not None:
                # Answered here, not by the server: an unreadable call never costs a check or a tool call.
                text = ev.local_answer(problem)
                yield emit(ev.tool_result(turn, call.id, call.name, text, data=parse_json(text), local=True))
            else:
                text, done = yield from _server_call(episode, call, arguments or {})
            record["messages"].append({"role": "tool", "tool_call_id": call.id, "name": call.name,
                                       "content": text})
            shown = text if done else text + turns_left_suffix(episode.max_turns - turn)
            answered.append((call, shown))
    finally:
        # Whatever happened, the calls that were answered go back to the model's history in order.
        if answered:
            provider.add_tool_results(answered)
    return done


def _server_call(episode: _Episode, call: ToolCall, arguments: dict) -> Generator[ev.Event, None, tuple[str, bool]]:
    """One tool call the server answers, kept in the record; returns (the answer, whether the episode is done)."""
    record, turn = episode.record, episode.turn
    episode.interrupt.check()
    outcome = episode.session.call(call.name, arguments)
    text, data = outcome.text, parse_json(outcome.text)
    step, ended = apply_tool_outcome(record, turn=turn, tool=call.name, plan=arguments.get("plan"), text=text,
                                     data=data, done=outcome.done, reward=outcome.reward, metadata=outcome.metadata,
                                     is_error=outcome.is_error)
    if ended is not None:
        record["end_reason"] = ended
    yield episode.emit(ev.tool_result(turn, call.id, call.name, text, data=data, done=outcome.done,
                                      reward=outcome.reward, metadata=outcome.metadata, step=step))
    return text, outcome.done


def _embedded_url() -> str:
    from berth_env.embedded import embedded_url

    return embedded_url()
