"""Episodes that outlive the page: each runs in a background worker keyed by its episode id.

A page subscribes to an episode's events; closing or reloading the tab only ends the subscription. Anyone holding the
id can re-attach and watch it live from the start; only its starter (owner or stop token) can stop it. Finished
rollouts go to the store's save function, which refuses an episode that ended before its first turn (no rollout:
`save_error` tells the visitor, the log says why, the slot and the journal entry go).

Caps: `max_total` episodes at once, and `max_per_visitor` for one visitor (the caller's IP address or signed-in
account, as the viewer names it: a new browser session or API client is still the same visitor). A start beyond
either is refused at once with a CapacityError saying which; nothing waits for a free slot. With a SaveQuota
(live/quota.py, shared with the hand-played episodes) each start also counts toward the visitor's rollouts per
hour, and is refused the same way past it. With a SpendBudget (live/budget.py) a start on the Space's keys
holds its worst case there, refused the same way when it does not fit, and is settled to its usage when it ends.
With a journal (rollouts.journal), a running episode's record is journalled from its start, so a crash of the
process still leaves it, as `interrupted`, for the next start to save.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.loop import stream_episode
from agent.request import EpisodeRequest
from live.budget import BudgetExceeded, Hold, SpendBudget, budget_terms
from live.quota import QuotaExceeded, SaveQuota
from rollouts.journal import NoRoom
from rollouts.schema import new_episode_id
from rollouts.store import NotStarted

log = logging.getLogger(__name__)

KEEP_FINISHED = 64  # finished episodes kept in memory for re-attach; older ones are read from the store


class CapacityError(RuntimeError):
    """Too many episodes running: in total, or for one visitor."""


@dataclass
class EpisodeRun:
    episode_id: str
    model: str
    task_id: str
    owner: str
    visitor: str = ""
    events: list[dict] = field(default_factory=list)
    record: dict | None = None
    saved: Any = None  # what the store's save returned, or the error that kept it from saving
    hold: Hold | None = None  # its share of the Space's spending budget (live.budget), when on the Space's keys
    save_error: str | None = None
    stop_event: threading.Event = field(default_factory=threading.Event)
    _changed: threading.Condition = field(default_factory=threading.Condition)

    @property
    def finished(self) -> bool:
        return self.record is not None

    def publish(self, event: dict) -> None:
        with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    def finish(self, record: dict) -> None:
        with self._changed:
            self.record = record
            self._changed.notify_all()

    def wait_finished(self, timeout: float | None = None) -> bool:
        """Wait until the episode is over (its rollout saved or refused); whether it is."""
        with self._changed:
            return self._changed.wait_for(lambda: self.finished, timeout=timeout)

    def wait(self, position: int, timeout: float) -> tuple[list[dict], bool]:
        """Events after `position` (waiting up to `timeout` for the first), and whether the episode is over."""
        with self._changed:
            if len(self.events) <= position and not self.finished:
                self._changed.wait(timeout=timeout)
            return self.events[position:], self.finished and len(self.events) >= position


class RunRegistry:
    """Starts episodes in worker threads, caps how many run at once, and keeps them findable by id."""

    def __init__(self, save: Callable[[dict], Any], *, max_total: int = 16, max_per_visitor: int = 2,
                 journal: Any = None, quota: SaveQuota | None = None, budget: SpendBudget | None = None):
        self._save = save
        self.budget = budget
        self.max_total, self.max_per_visitor = max_total, max_per_visitor
        self._quota = quota
        self._journal = journal  # rollouts.journal.RunningJournal, or None
        self._runs: OrderedDict[str, EpisodeRun] = OrderedDict()
        self._lock = threading.Lock()

    def start(self, request: EpisodeRequest, *, owner: str, visitor: str | None = None) -> EpisodeRun:
        """Start an episode of `request` (agent.request: checked by the door, played by `stream_episode` as it
        is; its keys stay in the worker) in the background. `owner` may stop it; `visitor` (default: the owner) is
        whom the per-visitor cap counts."""
        return self.start_group([request], owner=owner, visitor=visitor)[0]

    def start_group(self, requests: list[EpisodeRequest], *, owner: str, visitor: str | None = None,
                    hold_as: list[str] | None = None) -> list[EpisodeRun]:
        """Start several episodes at once, all or none: they count together against the caps and the visitor's
        rollouts per hour (an arena match is two runs), so a refusal starts nothing. `hold_as`: the models whose
        worst cases the spending budget holds for them (SpendBudget.reserve)."""
        if not all(isinstance(request, EpisodeRequest) for request in requests):
            raise TypeError("RunRegistry starts EpisodeRequests (agent.request), made by the door's one check")
        visitor = visitor or owner
        count = len(requests)
        with self._lock:
            live = [r for r in self._runs.values() if not r.finished]
            if self._journal is not None:  # the store's reading of its disk: a run it could not keep never starts
                try:  # the episodes still running write their records to the same disk
                    self._journal.check_room(count, running=len(live))
                except NoRoom as exc:
                    raise CapacityError(str(exc)) from None
            mine = sum(1 for r in live if r.visitor == visitor)
            if mine + count > self.max_per_visitor:
                asked = "" if count == 1 else f"This starts {count} episodes at once, and y"
                raise CapacityError(f"{asked or 'Y'}ou already have {mine} episode{'s' * (mine != 1)} running "
                                    f"(the limit is {self.max_per_visitor} per visitor). Stop one or wait for it "
                                    "to finish.")
            if len(live) + count > self.max_total:
                raise CapacityError(f"The arena is full: {len(live)} episodes are running. Try again in a few "
                                    "minutes.")
            if self._quota is not None:
                try:
                    self._quota.take(visitor, count=count)
                except QuotaExceeded as exc:
                    raise CapacityError(str(exc)) from None
            holds = self._reserve(visitor, requests, hold_as)
            runs = [EpisodeRun(new_episode_id(), request.model, request.task_id, owner, visitor, hold=hold)
                    for request, hold in zip(requests, holds, strict=True)]
            for run in runs:
                self._runs[run.episode_id] = run
            self._forget_old()
        for run, request in zip(runs, requests, strict=True):
            threading.Thread(target=self._play, args=(run, request), name=f"episode-{run.episode_id}",
                             daemon=True).start()
        return runs

    def _reserve(self, visitor: str, requests: list[EpisodeRequest],
                 hold_as: list[str] | None) -> list[Hold | None]:
        """Each episode's worst case held on the Space's budget; a refusal gives the quota's slots back."""
        if self.budget is None:
            return [None] * len(requests)
        try:
            return self.budget.reserve(visitor, [budget_terms(request) for request in requests], hold_as=hold_as)
        except BudgetExceeded as exc:
            if self._quota is not None:
                self._quota.give_back(visitor, count=len(requests))
            raise CapacityError(str(exc)) from None

    def running_for(self, owner: str) -> bool:
        """Whether `owner` (a page's session) has an episode still running."""
        with self._lock:
            return any(r.owner == owner and not r.finished for r in self._runs.values())

    def get(self, episode_id: str) -> EpisodeRun | None:
        with self._lock:
            return self._runs.get(episode_id)

    def stop(self, episode_id: str, *, owner: str | None = None, token: str | None = None) -> bool:
        """Stop a running episode for the owner that started it, or for whoever holds its stop token
        (`stop_token`): the episode id alone is a watch link, never a right to stop. False when nothing was stopped.
        """
        run = self.get(episode_id)
        if run is None or run.finished:
            return False
        by_owner = owner is not None and run.owner == owner
        by_token = isinstance(token, str) and hmac.compare_digest(stop_token(episode_id).encode(), token.encode())
        if not (by_owner or by_token):
            return False
        run.stop_event.set()
        return True

    def _play(self, run: EpisodeRun, request: EpisodeRequest) -> None:
        record = None
        progress = self._journal.write if self._journal is not None else None
        try:
            for event in stream_episode(request, episode_id=run.episode_id, stop=run.stop_event,
                                        progress=progress):
                if event["type"] == "episode_finished":
                    record = event["record"]
                else:
                    run.publish(event)
        except Exception as exc:  # the loop records its own failures; this is a bug guard, never silent
            log.exception("the worker of episode %s failed", run.episode_id)
            run.save_error = f"the episode worker failed: {exc}"
        if self.budget is not None:
            self.budget.settle(run.hold, record)
        if record is not None:
            try:
                run.saved = self._save(record)
                self._end_journal(run.episode_id)
            except ValueError as exc:
                # Not a rollout (the episode ended before its first turn: its error is in its events) or refused by
                # the schema (the store set it aside, with the reason): nothing public was added, so the visitor's
                # slot comes back, and the journal entry goes too, so the next start does not save it either.
                self._end_journal(run.episode_id)
                self._give_back(run)
                if isinstance(exc, NotStarted):
                    log.info("episode %s (%s on %s) did not start, not saved: %s", run.episode_id, run.model,
                             run.task_id, "; ".join(record.get("errors") or []) or record.get("end_reason"))
                # Shown to the visitor: what happened, in words (a NotStarted says it whole), no exception's class.
                run.save_error = str(exc) if isinstance(exc, NotStarted) else f"could not save the rollout: {exc}"
            except Exception as exc:  # a disk error: the journal entry stays for the next start to save
                log.warning("episode %s not saved: %s: %s", run.episode_id, type(exc).__name__, exc)
                run.save_error = f"could not save the rollout: {exc}"
            run.publish({"type": "episode_finished", "record": record, "seq": len(run.events),
                         "t": record.get("seconds", 0.0)})
            run.finish(record)
        else:
            self._give_back(run)
            run.finish({"episode_id": run.episode_id, "errors": [run.save_error or "no record"],
                        "end_reason": "error"})

    def _give_back(self, run: EpisodeRun) -> None:
        if self._quota is not None:
            self._quota.give_back(run.visitor)

    def _end_journal(self, episode_id: str) -> None:
        if self._journal is not None:
            self._journal.end(episode_id)

    def _forget_old(self) -> None:
        finished = [eid for eid, r in self._runs.items() if r.finished]
        for episode_id in finished[: max(0, len(finished) - KEEP_FINISHED)]:
            del self._runs[episode_id]


# Stop tokens are derived, not stored: a key per process signs the episode id (episodes do not outlive the process).
_STOP_KEY = secrets.token_bytes(32)


def stop_token(episode_id: str) -> str:
    """The token that stops `episode_id`: given only to whoever started it (the page's state, the `/run` caller)."""
    return hmac.new(_STOP_KEY, episode_id.encode(), hashlib.sha256).hexdigest()[:32]
