"""The verdict of a match: which of two rollouts of one task wins, and on what.

The higher reward wins; equal rewards (within REWARD_TOLERANCE) go to the lower cost, then to fewer checks, then
to fewer output tokens; equal on all four is a tie. A side without a cost (no submission, or an infeasible plan:
the grade then has none) is worse than any cost, and so is a side whose checks or output tokens are unknown.

Either side may be a full record or its index row: both give the same standing, so a match judged when it ends
(from records) and judged again later from the index agree. That is why checks are counted as the index's
`checks` column counts them (rollouts.schema.index_row, and rollouts.metrics after it): every `check_plan` call,
an unreadable plan or a refused call included. A call with an unreadable plan uses up one of the episode's checks
on the server all the same, so it is a check the side spent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from rollouts.record import Record

Side = Literal["a", "b", "tie"]
CRITERIA = ("reward", "cost", "checks", "output_tokens")
REWARD_TOLERANCE = 1e-9  # rewards that differ only in their last bits are equal
_PLURAL = {"reward": "rewards", "cost": "costs", "checks": "checks", "output_tokens": "output tokens"}
_LABEL = {"reward": "reward", "cost": "cost", "checks": "checks", "output_tokens": "output tokens"}


@dataclass(frozen=True)
class Standing:
    """What a verdict compares of one side; None where the rollout has no such figure."""

    reward: float
    cost: float | None
    checks: int | None
    output_tokens: int | None


def standing(rollout: Record | Mapping[str, Any]) -> Standing:
    """A side's figures, from a record (a Record, or JSON with `steps` or `final`) or from an index row."""
    if isinstance(rollout, Record) or "steps" in rollout or "final" in rollout:
        view = Record.of(rollout)
        cost = view.grade.get("cost") if view.submitted and view.feasible else None
        # The checks the server accepted, as the index's `checks` counts them (rollouts.record.accepted).
        checks = len(view.checks)
        tokens = _mapping(view.data.get("usage")).get("output_tokens")
        reward = view.data.get("reward")
    else:
        cost = rollout.get("cost") if rollout.get("feasible") is not False else None
        checks, tokens, reward = rollout.get("checks"), rollout.get("output_tokens"), rollout.get("reward")
    return Standing(reward=_number(reward) or 0.0, cost=_number(cost), checks=_count(checks),
                    output_tokens=_count(tokens))


@dataclass(frozen=True)
class Verdict:
    winner: Side
    by: str | None  # the deciding criterion (one of CRITERIA); None for a tie
    a: Standing
    b: Standing

    def sentence(self, names: tuple[str, str] = ("A", "B")) -> str:
        """One line for `#arena-verdict`: "B wins on cost (1,820 vs 2,040) after equal rewards"."""
        if self.by is None:
            return f"A tie: equal {_listed([_PLURAL[c] for c in CRITERIA])}."
        ours, theirs = (self.a, self.b) if self.winner == "a" else (self.b, self.a)
        mine, other = _shown(self.by, getattr(ours, self.by), getattr(theirs, self.by))
        line = f"{names[0] if self.winner == 'a' else names[1]} wins on {_LABEL[self.by]} ({mine} vs {other})"
        before = CRITERIA[:CRITERIA.index(self.by)]
        return f"{line} after equal {_listed([_PLURAL[c] for c in before])}." if before else f"{line}."


def verdict(a: Record | Mapping[str, Any], b: Record | Mapping[str, Any]) -> Verdict:
    """The verdict of a match between rollouts `a` and `b` (records or index rows) of one task."""
    first, second = standing(a), standing(b)
    for criterion in CRITERIA:
        better = _better(criterion, getattr(first, criterion), getattr(second, criterion))
        if better != "tie":
            return Verdict(better, criterion, first, second)
    return Verdict("tie", None, first, second)


def _better(criterion: str, a: float | None, b: float | None) -> Side:
    if criterion == "reward":
        assert a is not None and b is not None
        return "tie" if abs(a - b) <= REWARD_TOLERANCE else "a" if a > b else "b"
    # Lower is better; unknown is worse than any value.
    if a is None or b is None:
        return "tie" if a is None and b is None else "b" if a is None else "a"
    return "tie" if a == b else "a" if a < b else "b"


def _shown(criterion: str, mine: float | None, other: float | None) -> tuple[str, str]:
    """Both values as the sentence prints them; rewards with as many decimals as it takes to tell them apart."""
    if criterion != "reward":
        return _amount(mine), _amount(other)
    for digits in range(3, 10):
        left, right = f"{mine:.{digits}f}", f"{other:.{digits}f}"
        if left != right:
            break
    return left, right


def _amount(value: float | None) -> str:
    if value is None:
        return "none"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def _listed(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return value


def _count(value: Any) -> int | None:
    number = _number(value)
    return int(number) if number is not None and float(number).is_integer() and number >= 0 else None
