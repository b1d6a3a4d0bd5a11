"""What runs on the Space's own keys may spend: tokens and US dollars per visitor in any hour and for the whole
Space per UTC day, and how many turns and tokens a turn such a run may ask for.

A run is on the Space's keys when its provider takes a key and the visitor typed none for it (`on_space_keys`):
Run with a suggested model, the arena's random pairs, a script's `/run`. A visitor's own key is theirs to spend and
meets none of this; baselines spend nothing.

Every run reserves its worst case before it starts (`reserve`, all of a match's sides or none), so runs that start
at the same moment cannot together pass a budget; when it ends, its hold is settled to what the record says it used
(`settle`), and what it did not use is free again. Dollars are the board's prices (rollouts.prices); a model the
price table does not know is held to the token budgets only.

The worst case of one episode: every turn writes `max_tokens`, and every turn reads the prompt (PROMPT_TOKENS, the
system text, the tools and the largest task) plus everything the turns before it wrote and were answered
(RESULT_TOKENS a turn). That is far above a real episode, which is the point: the hold is given back at the end.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agent.limits import DEFAULT_MAX_TOKENS, DEFAULT_MAX_TURNS
from agent.providers.registry import parse_spec, provider_class
from agent.spec import ModelSpec, SpecError
from rollouts.prices import episode_usd

HOUR_S = 3600.0
DAY_S = 86400.0
PROMPT_TOKENS = 16_000  # system text and tools (about 3k) and the largest dock-v1 task's situation (about 12k)
_SWEEP_EVERY = 256  # reservations between two sweeps of idle visitors
RESULT_TOKENS = 8_000  # a turn's tool results read back by the next turn (a 59-ship check answer is about 6k)


class BudgetExceeded(RuntimeError):
    """A run the Space's budget cannot cover now, or asks for more turns or tokens than the Space's keys allow; the
    message says which and what to do (plain text)."""


@dataclass(frozen=True)
class BudgetLimits:
    """The caps, each 0 for none (Settings reads them from ARENA_BUDGET_* and ARENA_SPACE_MAX_*)."""

    visitor_tokens_per_hour: int = 6_000_000
    visitor_usd_per_hour: float = 25.0
    space_tokens_per_day: int = 30_000_000
    space_usd_per_day: float = 100.0
    max_turns: int = DEFAULT_MAX_TURNS
    max_tokens: int = DEFAULT_MAX_TOKENS  # a turn's output


@dataclass
class Hold:
    """One run's share of the budgets: its worst case while it plays, what it used once settled."""

    visitor: str
    at: float  # when it was reserved: the hour and the day it counts in
    tokens: int
    usd: float
    settled: bool = False


@dataclass(frozen=True)
class Left:
    """What is left now: for one visitor this hour and for the Space today (None: that cap is off)."""

    visitor_tokens: int | None
    visitor_usd: float | None
    space_tokens: int | None
    space_usd: float | None


def _parsed(model: str | ModelSpec) -> ModelSpec | None:
    """`model` as a spec: a parsed one as it is (a request's, never read twice), a text read by the one check; None
    when it does not parse (it plays nothing: the run's own checks refuse it)."""
    if isinstance(model, ModelSpec):
        return model
    try:
        return parse_spec(model)
    except SpecError:
        return None


def budget_terms(request: Any) -> tuple[ModelSpec, dict[str, Any]]:
    """(its spec, its keys and limits): what the budget reads of an agent.request.EpisodeRequest."""
    return request.spec, {"keys": dict(request.keys), "max_turns": request.limits.max_turns,
                          "max_tokens": request.limits.max_tokens}


def on_space_keys(model: str | ModelSpec, keys: Mapping[str, str] | None) -> bool:
    """Whether `model` would play on a key of the Space's environment: its provider takes a key and none was typed
    for it. A spec that does not parse plays nothing (the run's own checks refuse it)."""
    spec = _parsed(model)
    if spec is None:
        return False
    if provider_class(spec.provider).key_env is None:
        return False
    return not ((keys or {}).get(spec.provider) or "").strip()


def worst_case(model: str | ModelSpec, max_turns: int, max_tokens: int, when: datetime | None = None) -> tuple[int, float]:
    """(tokens, US dollars) one episode of `model` may spend at most (module docstring); dollars 0.0 unpriced."""
    turns = [{"input_tokens": PROMPT_TOKENS + (turn - 1) * (max_tokens + RESULT_TOKENS), "output_tokens": max_tokens}
             for turn in range(1, max_turns + 1)]
    usage = {side: sum(t[side] for t in turns) for side in ("input_tokens", "output_tokens")}
    # Each turn's own usage, so a long-prompt price tier is charged where the prompt passes it.
    record = {"usage": usage, "turns": max_turns, "started": (when or datetime.now(UTC)).isoformat(),
              "messages": [{"role": "assistant", "usage": t} for t in turns]}
    # An `hf:` route list may switch to any of its providers: the dearest is the worst case.
    usd = max((episode_usd({**record, "model": one}) or 0.0) for one in _each_route(model))
    return usage["input_tokens"] + usage["output_tokens"], usd


def _each_route(model: str | ModelSpec) -> list[str]:
    """`model`, or for `hf:org/model:a|b` each of `hf:org/model:a` and `hf:org/model:b` (as the spec reads it)."""
    spec = _parsed(model)
    if spec is None:
        return [str(model)]
    if not spec.fallbacks:
        return [spec.text]
    effort = f"@{spec.effort}" if spec.effort else ""
    return [f"{spec.provider}:{route}{effort}" for route in (spec.model, *spec.fallbacks)]


def used(record: dict) -> tuple[int, float]:
    """(tokens, US dollars) an episode's record says it used; dollars 0.0 when it has no price."""
    usage = record.get("usage") if isinstance(record.get("usage"), dict) else {}
    tokens = sum(v for v in (usage.get("input_tokens"), usage.get("output_tokens"))
                 if isinstance(v, int) and not isinstance(v, bool) and v > 0)
    return tokens, episode_usd(record) or 0.0


class SpendBudget:
    """The Space's spending budget (module docstring). Thread-safe; `clock` is wall time (the day is UTC's)."""

    def __init__(self, limits: BudgetLimits | None = None, *, clock: Callable[[], float] = time.time) -> None:
        self.limits, self._clock = limits or BudgetLimits(), clock
        self._visitors: dict[str, deque[Hold]] = {}
        self._today: list[Hold] = []
        self._day = -1
        self._reserved = 0
        self._lock = threading.Lock()

    def defaults(self) -> tuple[int, int]:
        """(max turns, max tokens a turn) of a run on the Space's keys that names none: the loop's defaults, as far
        as the Space's bounds allow."""
        return (min(DEFAULT_MAX_TURNS, self.limits.max_turns or DEFAULT_MAX_TURNS),
                min(DEFAULT_MAX_TOKENS, self.limits.max_tokens or DEFAULT_MAX_TOKENS))

    def check_bounds(self, max_turns: int, max_tokens: int) -> None:
        """BudgetExceeded when a run on the Space's keys asks for more turns or tokens a turn than they allow."""
        turns, tokens = self.limits.max_turns, self.limits.max_tokens
        if (turns and max_turns > turns) or (tokens and max_tokens > tokens):
            raise BudgetExceeded(f"On the Space's keys a run takes at most {turns} turns and {tokens:,} tokens a "
                                 "turn. Lower them, or paste your own API key (then the limits are yours).")

    def charge(self, episodes: Sequence[tuple[str | ModelSpec, dict[str, Any]]]) -> list[tuple[int, float] | None]:
        """Each episode's worst case ((model, its keys and limits), as `budget_terms` gives a request's), None for
        one off the Space's keys; BudgetExceeded when one asks for more than the Space's keys allow."""
        out: list[tuple[int, float] | None] = []
        for model, options in episodes:
            if not on_space_keys(model, options.get("keys")):
                out.append(None)
                continue
            default_turns, default_tokens = self.defaults()
            max_turns = int(options.get("max_turns") or default_turns)
            max_tokens = int(options.get("max_tokens") or default_tokens)
            self.check_bounds(max_turns, max_tokens)
            out.append(worst_case(model, max_turns, max_tokens))
        return out

    def dearest(self, models: Sequence[str], count: int = 2) -> list[str]:
        """The `count` models of `models` whose runs at the default limits may cost the most (dollars, then
        tokens; those off the Space's keys cost nothing): what a random pair drawn from `models` holds."""
        def cost(model: str) -> tuple[float, int]:
            charge = self.charge([(model, {})])[0] or (0, 0.0)
            return charge[1], charge[0]

        return sorted(dict.fromkeys(models), key=cost, reverse=True)[:count]

    def reserve(self, visitor: str, episodes: Sequence[tuple[str | ModelSpec, dict[str, Any]]], *,
                hold_as: Sequence[str] | None = None) -> list[Hold | None]:
        """Hold each episode's worst case (None for one off the Space's keys), all or none: BudgetExceeded saying
        which budget, and nothing held, when they do not all fit. `hold_as`: models whose worst cases are held in
        place of the episodes' own, one each, in total (a random pair holds its pool's dearest pair, so that neither
        the hold nor what is left after it tells which models were drawn), shared among the sides on the Space's
        keys so that each settles to its own usage (`_held_as`)."""
        charges = self.charge(episodes)
        if hold_as is not None:
            charges = _held_as(charges, self.charge([(like, options) for like, (_, options)
                                                     in zip(hold_as, episodes, strict=True)]))
        tokens = sum(c[0] for c in charges if c)
        usd = sum(c[1] for c in charges if c)
        if not tokens:
            return [None] * len(charges)
        with self._lock:
            now = self._clock()
            left = self._left(visitor, now)
            problem = _over(left, self.limits, tokens, usd)
            if problem:
                raise BudgetExceeded(problem)
            holds = [Hold(visitor, now, c[0], c[1]) if c else None for c in charges]
            taken = [h for h in holds if h]
            self._visitors.setdefault(visitor, deque()).extend(taken)
            self._today.extend(taken)
            self._reserved += 1
            if self._reserved % _SWEEP_EVERY == 0:  # visitors gone for an hour leave nothing behind
                for gone in [v for v, h in self._visitors.items() if not h or h[-1].at <= now - HOUR_S]:
                    del self._visitors[gone]
        return holds

    def settle(self, hold: Hold | None, record: dict | None) -> None:
        """A run has ended: its hold becomes what its record says it used (a run that left no record keeps its
        worst case: what it spent is not known)."""
        if hold is None or record is None:
            return
        tokens, usd = used(record)
        if not usd and hold.usd and tokens:
            # Unpriced after all (an `hf:` episode whose providers charge differently): the hold's rate a token, the
            # dearest provider's, is an upper bound.
            usd = hold.usd * tokens / hold.tokens
        with self._lock:
            if not hold.settled:
                hold.tokens, hold.usd, hold.settled = tokens, usd, True

    def left(self, visitor: str) -> Left:
        """What `visitor` may still spend this hour and the Space today."""
        with self._lock:
            return self._left(visitor, self._clock())

    def notice(self, visitor: str, episodes: Sequence[tuple[str, dict[str, Any]]]) -> str | None:
        """What to tell a visitor before these episodes start ("this run may spend up to $x of the Space's budget;
        $y left today"), or None when none of them plays on the Space's keys. Never raises."""
        try:
            charges = [c for c in self.charge(episodes) if c]
        except BudgetExceeded as exc:
            return str(exc)
        if not charges:
            return None
        tokens, usd = sum(c[0] for c in charges), sum(c[1] for c in charges)
        left = self.left(visitor)
        this = "This match" if len(episodes) > 1 else "This run"
        spend = f"${usd:,.2f} ({_tokens(tokens)} tokens)" if usd else f"{_tokens(tokens)} tokens"
        text = f"{this} plays on the Space's keys and may spend up to {spend} of the Space's budget"
        lim = self.limits
        if left.space_usd is not None:
            text += f"; ${_coarse(left.space_usd, lim.space_usd_per_day):,.2f} left today"
        elif left.space_tokens is not None:
            text += f"; {_tokens(int(_coarse(left.space_tokens, lim.space_tokens_per_day)))} tokens left today"
        return text + " (what it does not use is given back when it ends)."

    def _left(self, visitor: str, now: float) -> Left:
        day = int(now // DAY_S)
        if day != self._day:
            self._day, self._today = day, []
        holds = self._visitors.get(visitor, deque())
        while holds and holds[0].at <= now - HOUR_S:
            holds.popleft()
        if not holds:
            self._visitors.pop(visitor, None)
        lim = self.limits
        return Left(_rest(lim.visitor_tokens_per_hour, sum(h.tokens for h in holds)),
                    _rest(lim.visitor_usd_per_hour, sum(h.usd for h in holds)),
                    _rest(lim.space_tokens_per_day, sum(h.tokens for h in self._today)),
                    _rest(lim.space_usd_per_day, sum(h.usd for h in self._today)))


def _held_as(own: list[tuple[int, float] | None],
             stand_in: list[tuple[int, float] | None]) -> list[tuple[int, float] | None]:
    """The stand-ins' worst cases in total, shared among the episodes that play on the Space's keys (the first one
    when none does): each of those holds a share, so each is settled to its own usage. Held by side, a side drawn
    on the Space's keys facing a stand-in that is not would hold nothing, and its spending would never count."""
    tokens, usd = sum(c[0] for c in stand_in if c), sum(c[1] for c in stand_in if c)
    if not tokens:
        return [None] * len(own)
    sides = [i for i, c in enumerate(own) if c] or [0]
    share = [(tokens // len(sides), usd / len(sides)) for _ in sides]
    share[0] = (share[0][0] + tokens % len(sides), share[0][1])
    shared = dict(zip(sides, share, strict=True))
    return [shared.get(i) for i in range(len(own))]


def _rest(cap: float, spent: float) -> Any:
    return None if not cap else max(cap - spent, 0)


def _over(left: Left, limits: BudgetLimits, tokens: int, usd: float) -> str | None:
    """Why a run of this worst case cannot start now, naming the budget it does not fit, or None."""
    own = " Paste your own API key to run it on your account."
    space = _short(left.space_tokens, limits.space_tokens_per_day, left.space_usd, limits.space_usd_per_day, tokens,
                   usd)
    if space:
        return (f"The Space's budget for today cannot cover this run: it may use up to {space} left until 00:00 "
                f"UTC.{own}")
    mine = _short(left.visitor_tokens, limits.visitor_tokens_per_hour, left.visitor_usd, limits.visitor_usd_per_hour,
                  tokens, usd)
    if mine:
        return (f"Your share of the Space's budget for this hour cannot cover this run: it may use up to {mine} left "
                "for you (every tab and API client of one address or account together; it frees up as your runs of the "
                f"last hour age).{own}")
    return None


def _short(tokens_left: int | None, tokens_cap: int, usd_left: float | None, usd_cap: float, tokens: int,
           usd: float) -> str | None:
    """"$x and $y is" for the first cap the run does not fit (dollars, then tokens), or None when both fit."""
    if usd_left is not None and usd > usd_left:
        return f"${usd:,.2f} and ${_coarse(usd_left, usd_cap):,.2f} is"
    if tokens_left is not None and tokens > tokens_left:
        return f"{_tokens(tokens)} tokens and {_tokens(int(_coarse(tokens_left, tokens_cap)))} are"
    return None


def _coarse(left: float, cap: float) -> float:
    """What is left as shown: rounded down to a hundredth of the cap. Exact figures would tell, to anyone watching
    them, what a random pair spent, and so which models it drew; a hundredth of the cap tells little."""
    step = cap / 100
    return math.floor(left / step + 1e-9) * step if step else left


def _tokens(count: int) -> str:
    return f"{count:,}"
