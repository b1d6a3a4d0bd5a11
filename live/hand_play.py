"""Episodes a person plays by hand: the same server, tools and rollout record as a model's, with no model.

A `HandEpisode` is one OpenEnv session (agent.session.EnvSession) held in this process between the person's clicks
or API calls, keyed by its episode id. Each `check_plan` and `submit_plan` goes to the server and into the record
as a tool call of its own turn, so Browse's transcript shows every draft, and the record is saved when the episode
ends: on a submit (or the server's tool-call limit), when the person moves on to another task (`stopped`), or when
it has been left alone for `idle_s` (`interrupted`). An episode ended before any tool call is closed unsaved:
looking at a task is not a rollout.

Only the owner who started an episode (a browser session or an API client) may play it. The caps count visitors
(an account or an address, as the viewer names them: many sessions of one person are one visitor): episodes open
in all and per visitor, and, with a SaveQuota (live/quota.py, shared with model runs), rollouts per visitor and
hour. A plan goes through `check_input` (agent/limits.py) before anything: one over the limit is refused with a
message and leaves no trace; the record holds a call only once the server has answered it.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.limits import InputTooLarge, check_input, valid_task_id
from agent.notes import OPENING
from agent.record import new_record, parse_json, task_summary
from agent.session import EnvError, EnvSession
from catalog.tasks import task_for
from live.quota import QuotaExceeded, SaveQuota
from rollouts.record import Record, apply_tool_outcome, finish
from rollouts.schema import new_episode_id

log = logging.getLogger(__name__)

HUMAN = "human"
DEFAULT_IDLE_S = 1800.0
MAX_OPEN = 32
MAX_PER_VISITOR = 3
FINISHED_KEPT = 256  # ended episodes remembered, so a late call hears "over" rather than "unknown"
_USERNAME = re.compile(r"[^A-Za-z0-9._-]")
_MODEL = re.compile(r"[^A-Za-z0-9._:/@+-]")  # a model spec's alphabet (provider:name@route)


class PlayError(RuntimeError):
    """A play request that cannot be done; the message is for the person (plain text)."""


def human_model(username: str | None = None, improving: str | None = None) -> str:
    """`human`, or `human:<Hub username>` for a signed-in person (the name cut to a safe alphabet); a person who
    started from a model's plan is `human+<model>` (the centaur row: people improving that model), and one who
    started from another person's plan is a person still (`human`, not `human+human`)."""
    name = _USERNAME.sub("", username or "")[:64]
    person = f"{HUMAN}:{name}" if name else HUMAN
    base = _MODEL.sub("", improving or "")[:120]
    if not base or base == HUMAN or base.startswith((f"{HUMAN}:", f"{HUMAN}+")):
        return person
    return f"{HUMAN}+{base}"


@dataclass
class HandEpisode:
    """One episode being played by hand, and its record as it stands."""

    record: dict
    owner: str  # who may play it: the browser session or API client that started it
    session: EnvSession
    max_checks: int
    checks_left: int
    started: float = field(default_factory=time.monotonic)
    last_seen: float = field(default_factory=time.monotonic)
    visitor: str = ""  # whom the caps count (viewer.visitors): the owner's account or address
    saved: Any = None
    save_error: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def episode_id(self) -> str:
        return self.record["episode_id"]

    @property
    def task_id(self) -> str:
        return self.record["task_id"]

    @property
    def done(self) -> bool:
        return self.record["end_reason"] is not None


class PlayRegistry:
    """The open hand-played episodes of this process: start, check, submit, and closing the abandoned ones.

    `save` takes a finished record (the rollout store's save). `env_url` None plays on the embedded server.
    """

    def __init__(self, save: Callable[[dict], Any], *, env_url: str | None = None, max_open: int = MAX_OPEN,
                 max_per_visitor: int = MAX_PER_VISITOR, idle_s: float = DEFAULT_IDLE_S, source: str = "space",
                 quota: SaveQuota | None = None):
        self._save = save
        self.env_url, self.source = env_url, source
        self.max_open, self.max_per_visitor, self.idle_s = max_open, max_per_visitor, idle_s
        self._quota = quota
        self._open: dict[str, HandEpisode] = {}
        self._starting: dict[str, int] = {}  # visitor -> episodes being started (not yet open)
        self._ended: OrderedDict[str, tuple[str, str]] = OrderedDict()  # id -> (owner, end reason)
        self._lock = threading.Lock()
        self._reaper: threading.Thread | None = None
        self._closed = threading.Event()

    # -- playing ---------------------------------------------------------------------------------------------

    def start(self, task_id: str, *, owner: str, visitor: str | None = None, model: str = HUMAN,
              player: dict | None = None) -> HandEpisode:
        """Open an episode on `task_id` for `owner` (who may play it), counted for `visitor` (default: the owner);
        PlayError when the task is unknown or a cap is reached. `player` goes into the record as is: what the
        person had to plan with (`aids`) and the plan they started from (`start`)."""
        task_id = task_id.strip() if isinstance(task_id, str) else ""
        if not valid_task_id(task_id):
            raise PlayError("Pick a task first." if not task_id else "That task id is malformed.")
        visitor = visitor or owner
        self.reap()
        self._reserve(visitor)
        try:
            episode = self._open_episode(task_id, owner, model)
            episode.visitor = visitor
            if player:
                episode.record["player"] = dict(player)
        except BaseException:
            self._give_back(visitor)
            raise
        finally:
            with self._lock:
                self._starting[visitor] -= 1
                if not self._starting[visitor]:  # one entry per visitor ever seen would only grow
                    del self._starting[visitor]
        with self._lock:
            self._open[episode.episode_id] = episode
        self._start_reaper()
        return episode

    def check(self, episode_id: str, owner: str, plan: Any) -> dict:
        """Send `plan` to check_plan; the server's answer (with `checks_left`)."""
        return self._call(self.get(episode_id, owner), "check_plan", plan)

    def submit(self, episode_id: str, owner: str, plan: Any) -> dict:
        """Send `plan` to submit_plan; the server's answer (with `reward`). The rollout is saved when this ends it."""
        return self._call(self.get(episode_id, owner), "submit_plan", plan)

    def get(self, episode_id: str, owner: str) -> HandEpisode:
        """The open episode, if `owner` started it; PlayError naming why not."""
        episode_id = episode_id.strip() if isinstance(episode_id, str) else ""
        with self._lock:
            episode = self._open.get(episode_id)
            ended = self._ended.get(episode_id)
        if episode is None:
            if ended is not None and ended[0] == owner:
                raise PlayError(f"Episode {episode_id} is over ({ended[1]}).")
            raise PlayError(f"No open episode {str(episode_id)[:64]!r} here.")
        if episode.owner != owner:
            raise PlayError(f"Episode {episode_id} belongs to another session.")
        return episode

    def abandon(self, owner: str, reason: str = "stopped") -> list[HandEpisode]:
        """End every open episode of `owner` (a person who moved on to another task); returns them."""
        with self._lock:
            mine = [e for e in self._open.values() if e.owner == owner]
        for episode in mine:
            self._end(episode, reason)
        return mine

    def reap(self) -> list[HandEpisode]:
        """End the episodes left alone for `idle_s` as `interrupted`; returns them."""
        now = time.monotonic()
        with self._lock:
            idle = [e for e in self._open.values() if now - e.last_seen >= self.idle_s]
        for episode in idle:
            self._end(episode, "interrupted")
        return idle

    def open_count(self, visitor: str | None = None) -> int:
        with self._lock:
            return sum(1 for e in self._open.values() if visitor is None or e.visitor == visitor)

    def close(self) -> None:
        """End every open episode (the app is stopping) and the reaper."""
        self._closed.set()
        with self._lock:
            episodes = list(self._open.values())
        for episode in episodes:
            self._end(episode, "interrupted")

    # -- inside ----------------------------------------------------------------------------------------------

    def _reserve(self, visitor: str) -> None:
        with self._lock:
            mine = sum(1 for e in self._open.values() if e.visitor == visitor) + self._starting.get(visitor, 0)
            if mine >= self.max_per_visitor:
                raise PlayError(f"You already have {mine} episodes open (the limit is {self.max_per_visitor} per "
                                "visitor, every tab and API client together): submit one, or wait for it to close.")
            starting = sum(self._starting.values())
            if len(self._open) + starting >= self.max_open:
                raise PlayError(f"The arena is full: {len(self._open) + starting} episodes are being played by hand. "
                                "Try again in a few minutes.")
            if self._quota is not None:
                try:
                    self._quota.take(visitor)
                except QuotaExceeded as exc:
                    raise PlayError(str(exc)) from None
            self._starting[visitor] = self._starting.get(visitor, 0) + 1

    def _give_back(self, visitor: str) -> None:
        """An episode that saved no rollout frees its place in the visitor's hourly count."""
        if self._quota is not None:
            self._quota.give_back(visitor)

    def _open_episode(self, task_id: str, owner: str, model: str) -> HandEpisode:
        url = self.env_url or _embedded_url()
        episode_id = new_episode_id()
        try:
            session = EnvSession(url)
        except Exception as exc:
            raise PlayError(f"The berth server cannot be reached: {str(exc)[:200]}") from None
        try:
            metadata = session.reset(task_id, episode_id)
        except EnvError as exc:
            session.close(wait=False)
            unknown = "unknown task" in str(exc)
            raise PlayError(f"Task {task_id} is not served here." if unknown else str(exc)) from None
        max_checks = int(metadata.get("max_checks") or 10)
        limits = {"max_turns": int(metadata.get("max_tool_calls") or 24), "max_tokens": 0, "wall_clock_s": self.idle_s}
        record = new_record(episode_id=episode_id, model=model, task_id=task_id,
                            env_url=self.env_url or "embedded", limits=limits, started=time.time(), run=None,
                            source=self.source)
        record["task"] = task_summary(task_id, metadata, task_for(task_id))
        record["messages"] += [{"role": "system", "content": metadata["instructions"]},
                               {"role": "user", "content": OPENING.format(situation=metadata["situation"])}]
        return HandEpisode(record, owner, session, max_checks, max_checks)

    def _call(self, episode: HandEpisode, tool: str, plan: Any) -> dict:
        try:
            check_input(plan, "the plan")
        except InputTooLarge as exc:
            raise PlayError(str(exc)) from None
        with episode.lock:
            if episode.done:
                raise PlayError(f"Episode {episode.episode_id} is over ({episode.record['end_reason']}).")
            record = episode.record
            turn = record["turns"] + 1
            arguments = {"plan": plan}
            call_id = f"call_{turn}"
            episode.last_seen = time.monotonic()
            try:
                outcome = episode.session.call(tool, arguments)
            except EnvError as exc:
                # The call is not recorded (the server never answered it); the failure is, and the rollout keeps
                # the calls that were answered (none: nothing is saved).
                record["errors"].append(f"{tool}: {str(exc)[:800]}")
                self._end(episode, "error", locked=True)
                raise PlayError(f"The berth server failed: {str(exc)[:300]}. "
                                + ("The episode is saved as it stands." if record["turns"] else
                                   "Nothing was saved.")) from None
            record["turns"] = turn
            record["messages"] += [
                {"role": "assistant", "content": "", "reasoning": "", "stop": "tool_use",
                 "tool_calls": [{"id": call_id, "name": tool, "arguments": json.dumps(arguments, ensure_ascii=False)}]},
                {"role": "tool", "tool_call_id": call_id, "name": tool, "content": outcome.text}]
            step, ended = apply_tool_outcome(record, turn=turn, tool=tool, plan=plan, text=outcome.text,
                                             data=parse_json(outcome.text), done=outcome.done, reward=outcome.reward,
                                             metadata=outcome.metadata, is_error=outcome.is_error)
            assert step is not None  # hand play sends plan tools only
            result = step["result"]
            if tool == "check_plan" and isinstance(result.get("checks_left"), int):
                episode.checks_left = result["checks_left"]
            if ended is not None:
                self._end(episode, ended, locked=True)
            return result

    def _end(self, episode: HandEpisode, reason: str, *, locked: bool = False) -> None:
        """Close the episode's session and save its record (unless nothing was played); once only."""
        if not locked:
            with episode.lock:
                return self._end(episode, reason, locked=True)
        if episode.done:  # ended already (a submit racing the reaper, say)
            return
        with self._lock:
            self._open.pop(episode.episode_id, None)
            self._ended[episode.episode_id] = (episode.owner, reason)
            while len(self._ended) > FINISHED_KEPT:
                self._ended.popitem(last=False)
        record = episode.record
        ended = time.monotonic() if reason in ("submitted", "error", "tool_call_limit", "server_ended") \
            else episode.last_seen
        finish(record, reason, ended - episode.started)
        episode.session.close(wait=False)
        if not Record(record).started:  # looking at a task is not a rollout
            self._give_back(episode.visitor)
            return
        try:
            episode.saved = self._save(record)
        except Exception as exc:
            episode.save_error = f"could not save the rollout: {type(exc).__name__}: {str(exc)[:300]}"
            log.warning("hand-played episode %s: %s", episode.episode_id, episode.save_error)
            self._give_back(episode.visitor)

    def _start_reaper(self) -> None:
        with self._lock:
            if self._reaper is not None:
                return
            self._reaper = threading.Thread(target=self._reap_forever, name="hand-play-reaper", daemon=True)
        self._reaper.start()

    def _reap_forever(self) -> None:
        interval = max(0.05, min(60.0, self.idle_s / 4))
        while not self._closed.wait(interval):
            try:
                self.reap()
            except Exception:  # a bug guard: the reaper must outlive one bad episode
                log.exception("closing idle hand-played episodes failed")


def _embedded_url() -> str:
    from berth_env.embedded import embedded_url

    return embedded_url()
