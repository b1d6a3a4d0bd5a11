"""Arena matches while they run: two models on one task, two ordinary episodes started together (live.runs), kept
in memory by match id with their mode, whoever started them and who has voted.

A match counts as two runs: both episodes start at once or neither does (RunRegistry.start_group), within the same
caps per visitor and in total and the same rollouts per hour as any run. Once both have ended and both rollouts are
saved, a worker thread writes the match's row (rollouts.matches: the verdict from the two records), whether or not
any page is still watching; a side whose rollout was not kept leaves the match without a row, saying why.

Votes: only once the row is written (so never before both ended), one per visitor per match, and at most
`votes_per_hour` per visitor. In random mode the names stay hidden from a visitor until they vote or skip; a
visitor who skipped has seen the names, so the match takes no vote from them. Who voted is kept in memory only (it
is not the dataset's business), for every match of the last BALLOT_S: the newest KEEP_MATCHES are held whole (their
episodes streamed to any page), an older one only as its ballot, shown from its row but still taking votes.

Whether an episode is public yet is decided here (`withheld_episodes`), and every door that shows a rollout asks:
the two episodes of a random match are not public until someone has voted or skipped on it (or its ballot has
closed), so no page, card, record or list names a hidden side before the vote; the store's pusher asks too
(RolloutStore.hold_back), so the Hub dataset gets their files and rows only then.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agent.request import EpisodeRequest
from live.quota import QuotaExceeded, SaveQuota
from live.runs import EpisodeRun, RunRegistry, stop_token
from rollouts.matches import MODES, VOTE_CHOICES, MatchBook, MatchError, match_row
from rollouts.schema import new_episode_id

log = logging.getLogger(__name__)

KEEP_MATCHES = 256
BALLOT_S = 24 * 3600.0  # how long a match takes votes
SKIP = "skip"  # see the names without voting (random mode)


class VoteRefused(ValueError):
    """A vote that is not counted; the message says why, for the visitor."""


@dataclass
class LiveMatch:
    match_id: str
    mode: str  # rollouts.matches.MODES: `named` (the visitor chose) or `random` (names hidden until the vote)
    task_id: str
    a: EpisodeRun
    b: EpisodeRun
    owner: str  # the page session (or API client) that started it: it may stop it
    visitor: str
    row: dict | None = None  # the match's row once written (votes as counted so far)
    problem: str | None = None  # why there is no row, when a side's rollout was not kept
    voters: set[str] = field(default_factory=set)
    skipped: set[str] = field(default_factory=set)
    concluded: threading.Event = field(default_factory=threading.Event)  # the row written, or known not to be
    opened: float = field(default_factory=time.time)

    @property
    def undecided(self) -> bool:
        """A random pair nobody has voted or skipped on yet, while it may still take votes: its names are
        everyone's secret, so its episodes are not public."""
        unsaved = self.concluded.is_set() and self.row is None
        return (self.mode == "random" and not self.voters and not self.skipped and not unsaved
                and time.time() - self.opened < BALLOT_S)

    @property
    def runs(self) -> tuple[EpisodeRun, EpisodeRun]:
        return self.a, self.b

    @property
    def finished(self) -> bool:
        return self.a.finished and self.b.finished

    def names_shown_to(self, visitor: str | None) -> bool:
        """Whether `visitor` may see which model plays which side."""
        return self.mode == "named" or (visitor is not None and (visitor in self.voters or visitor in self.skipped))

    def ballot(self, visitor: str | None) -> str:
        """Where `visitor` stands on the vote: `wait` (not both saved and judged yet), `unsaved` (no row: no
        vote), `voted`, `skipped` (saw the random pair's names first: no vote), or `open`."""
        if not self.concluded.is_set():
            return "wait"
        if self.row is None:
            return "unsaved"
        if visitor in self.voters:
            return "voted"
        if self.mode == "random" and visitor in self.skipped:
            return "skipped"
        return "open"


def _ballot_side(run: EpisodeRun) -> EpisodeRun:
    """A side of a match kept only as its ballot: who played, not what (its events and record go)."""
    return EpisodeRun(run.episode_id, run.model, run.task_id, run.owner, run.visitor, saved=run.saved)


def match_stop_token(match_id: str) -> str:
    """The token that stops both episodes of a match: given only to whoever started it (as live.runs.stop_token;
    the prefix keeps it apart from any episode's)."""
    return stop_token(f"match:{match_id}")


def draw_pair(pool: Sequence[str], rng: Any = None) -> tuple[str, str]:
    """Two different models of `pool`, each side drawn at random; ValueError when there are not two."""
    models = list(dict.fromkeys(pool))
    if len(models) < 2:
        raise ValueError("a random pair needs at least two models this Space can run")
    first, second = (rng or secrets.SystemRandom()).sample(models, 2)
    return first, second


class MatchRegistry:
    """Starts matches on a RunRegistry, writes their rows to a MatchBook, counts votes. Thread-safe."""

    def __init__(self, runs: RunRegistry, book: MatchBook, *, votes_per_hour: int = 0,
                 keep: int = KEEP_MATCHES) -> None:
        self.runs, self.book, self.keep = runs, book, keep
        self._votes = SaveQuota(votes_per_hour)
        self._matches: OrderedDict[str, LiveMatch] = OrderedDict()
        # Matches past the newest `keep`, younger than BALLOT_S: their ballots, their episodes dropped.
        self._ballots: OrderedDict[str, LiveMatch] = OrderedDict()
        self._lock = threading.Lock()

    def start(self, side_a: EpisodeRequest, side_b: EpisodeRequest, *, mode: str, owner: str,
              visitor: str | None = None, hold_as: list[str] | None = None) -> LiveMatch:
        """Start both sides (agent.request, one task, as the door's check made them); CapacityError when the caps
        refuse the pair, and then neither starts. `hold_as`: as for RunRegistry.start_group."""
        if mode not in MODES:
            raise ValueError(f"a match's mode is one of {', '.join(MODES)}, not {mode!r}")
        if side_a.task_id != side_b.task_id:
            raise ValueError("both sides of a match play one task")
        task_id = side_a.task_id
        # Under the lock: a side that ends at once is saved while `withheld_episodes` waits for the match to be
        # known, so neither the pusher nor a door sees its record before it counts as withheld.
        with self._lock:
            a, b = self.runs.start_group([side_a, side_b], owner=owner, visitor=visitor, hold_as=hold_as)
            match = LiveMatch(new_episode_id(), mode, task_id, a, b, owner, visitor or owner)
            self._matches[match.match_id] = match
            self._forget_old()
        try:  # a restart before the row is written leaves the note, and the next start writes the row
            self.book.begin(match.match_id, mode, a.episode_id, b.episode_id)
        except OSError as exc:
            log.warning("match %s not noted as in play: %s", match.match_id, exc)
        threading.Thread(target=self._conclude, args=(match,), name=f"match-{match.match_id}", daemon=True).start()
        return match

    def get(self, match_id: str) -> LiveMatch | None:
        """A match held whole (its episodes streamable), or None."""
        with self._lock:
            return self._matches.get(match_id)

    def ballot_of(self, match_id: str) -> LiveMatch | None:
        """A match no longer held whole whose ballot is still open (its row shows it), or None."""
        with self._lock:
            self._forget_old()
            return self._ballots.get(match_id)

    def withheld_episodes(self) -> frozenset[str]:
        """The episodes that are not public yet: both sides of every undecided random match (LiveMatch.undecided).
        Every door that shows a rollout asks this, and answers as it would for an unknown id."""
        with self._lock:
            return frozenset(run.episode_id for m in (*self._matches.values(), *self._ballots.values())
                             if m.undecided for run in m.runs)

    def public_rows(self) -> list[dict]:
        """The book's match rows a page may show or count: not an undecided random match's (`withheld_episodes`),
        whose row names both models before the vote."""
        hidden = self.withheld_episodes()
        return [row for row in self.book.rows() if row["episode_a"] not in hidden and row["episode_b"] not in hidden]

    def _forget_old(self) -> None:
        """Past the newest `keep`, a concluded match keeps only its ballot (its episodes' events go), for BALLOT_S."""
        concluded = [k for k, m in self._matches.items() if m.concluded.is_set()]
        for match_id in concluded[: max(0, len(self._matches) - self.keep)]:
            match = self._matches.pop(match_id)
            if match.row is not None:
                self._ballots[match_id] = replace(match, a=_ballot_side(match.a), b=_ballot_side(match.b))
        cutoff = time.time() - BALLOT_S
        for match_id in [k for k, m in self._ballots.items() if m.opened < cutoff]:
            del self._ballots[match_id]

    def stop(self, match_id: str, *, owner: str | None = None, token: str | None = None) -> bool:
        """Stop both episodes, for the owner that started the match or the holder of its stop token; False when
        nothing was stopped (both already over, or not theirs to stop)."""
        match = self.get(match_id)
        if match is None:
            return False
        by_owner = owner is not None and match.owner == owner
        by_token = isinstance(token, str) and hmac.compare_digest(match_stop_token(match_id).encode(), token.encode())
        if not (by_owner or by_token):
            return False
        stopped = [self.runs.stop(run.episode_id, token=stop_token(run.episode_id)) for run in match.runs]
        return any(stopped)

    def vote(self, match_id: str, choice: str, *, visitor: str) -> LiveMatch:
        """Count `visitor`'s vote (one of rollouts.matches.VOTE_CHOICES, or SKIP to see the names without voting);
        the match with its row as it now stands (one no longer held whole: its ballot, its sides without their
        records). VoteRefused saying why when it is not counted."""
        with self._lock:
            self._forget_old()
            match = self._matches.get(match_id) or self._ballots.get(match_id)
        if match is None:
            raise VoteRefused("Voting on this match is closed: votes are taken while a match is fresh on this "
                              "Space.")
        if choice != SKIP and choice not in VOTE_CHOICES:
            raise VoteRefused(f"A vote is one of {', '.join(VOTE_CHOICES)} (or {SKIP}).")
        with self._lock:
            ballot = match.ballot(visitor)
            if ballot == "wait":
                raise VoteRefused("The match is still being played: the vote opens once both agents have ended.")
            if ballot == "unsaved":
                raise VoteRefused(f"This match was not saved ({match.problem}), so it takes no votes.")
            if choice == SKIP:
                match.skipped.add(visitor)
                return match
            if ballot == "voted":
                raise VoteRefused("You have already voted on this match: one vote per visitor.")
            if ballot == "skipped":
                raise VoteRefused("You asked to see the names first, so this match takes no vote from you: votes "
                                  "in random mode are blind.")
            try:
                self._votes.take(visitor)
            except QuotaExceeded:
                raise VoteRefused(f"You have voted {self._votes.per_hour} times in the last hour (the limit per "
                                  "visitor). Try again later.") from None
            match.voters.add(visitor)
        try:
            match.row = self.book.vote(match_id, choice)
        except (KeyError, OSError, ValueError) as exc:
            with self._lock:
                match.voters.discard(visitor)
            self._votes.give_back(visitor)
            raise VoteRefused(f"The vote could not be counted: {exc}") from None
        return match

    def _conclude(self, match: LiveMatch) -> None:
        """Wait for both episodes, then write the match's row from their saved records (or say why not)."""
        try:
            for run in match.runs:
                run.wait_finished()
            unsaved = [(side, run) for side, run in zip("AB", match.runs, strict=True) if run.saved is None]
            if unsaved:
                side, run = unsaved[0]
                match.problem = f"side {side}'s rollout was not kept: {run.save_error or 'the episode failed'}"
                return
            try:
                match.row = self.book.add(match_row(match.a.record or {}, match.b.record or {}, mode=match.mode,
                                                    match_id=match.match_id))
            except (MatchError, OSError, ValueError) as exc:
                match.problem = f"its row could not be written: {exc}"
        finally:
            self.book.end(match.match_id)
            match.concluded.set()
