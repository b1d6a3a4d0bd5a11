"""Per-rollout figures beyond the reward: how soon a valid plan was found, how good, at what price.

Every figure is computed from what the record already holds (its `steps`, `messages`, `usage`, `final` and `task`),
and is null where it does not apply or the record cannot say, never a guess:

- `checks_to_feasible`: how many checks the server accepted up to and including the first feasible one (the checks
  the index's `checks` counts: rollouts.record.Record.checks). A check is feasible when the server's answer
  says `feasible: true` with a cost. Null when no check was feasible.
- `turns_to_feasible`: the model turn of that check (1-based, as steps record it).
- `tokens_to_feasible`: output tokens of turns 1 to `turns_to_feasible`, from each assistant message's `usage`
  (recorded since per-turn usage exists); for older records only when the feasible check came in the last turn,
  where it is the episode's total. Null otherwise.
- `first_check_cost`, `best_check_cost`: the cost of the first feasible checked plan and of the cheapest one.
- `beat_naive`: the submitted plan was graded feasible and costs less than the task's naive plan. False without a
  submission; null when the naive cost is unknown.
- `usd`: the episode's price (rollouts.prices).
- `check_costs`: every check's cost in call order as JSON text, null for a check that was not feasible:
  `"[null,1820,1544]"`; `"[]"` without checks. It is what the convergence plot reads (rollouts.convergence), kept in
  the index so the plot needs no record.
"""

from __future__ import annotations

import json
import math
from typing import Any

from rollouts.prices import episode_usd
from rollouts.record import Record

METRIC_COLUMNS: dict[str, type] = {
    "checks_to_feasible": int,
    "turns_to_feasible": int,
    "tokens_to_feasible": int,
    "first_check_cost": int,
    "best_check_cost": int,
    "beat_naive": bool,
    "usd": float,
    "check_costs": str,
}


def check_cost(step: Any) -> int | None:
    """The cost of a `check_plan` step's plan when the server found it feasible, else None."""
    result = step.get("result") if isinstance(step, dict) else None
    if not isinstance(result, dict) or result.get("feasible") is not True:
        return None
    cost = result.get("cost")
    if isinstance(cost, bool) or not isinstance(cost, int | float) or not math.isfinite(cost):
        return None
    return int(cost) if float(cost).is_integer() else None


def episode_metrics(record: dict) -> dict[str, Any]:
    """The figures above for one record (keys of METRIC_COLUMNS). Never raises on odd values: they become null."""
    view = Record(record)
    checks = view.checks
    costs = [check_cost(step) for step in checks]
    first = next((i for i, cost in enumerate(costs) if cost is not None), None)
    turn = checks[first].get("turn") if first is not None else None
    if isinstance(turn, bool) or not isinstance(turn, int) or turn < 1:
        turn = None
    feasible_costs = [cost for cost in costs if cost is not None]
    return {
        "checks_to_feasible": None if first is None else first + 1,
        "turns_to_feasible": turn,
        "tokens_to_feasible": None if turn is None else output_tokens_until(record, turn),
        "first_check_cost": None if first is None else costs[first],
        "best_check_cost": min(feasible_costs) if feasible_costs else None,
        "beat_naive": beat_naive(view),
        "usd": _safe_usd(record),
        "check_costs": json.dumps(costs, separators=(",", ":")),
    }


def output_tokens_until(record: dict, turn: int) -> int | None:
    """Output tokens spent in turns 1..`turn`: from per-turn usage, or the total when `turn` was the last turn."""
    assistants = [m for m in record.get("messages") or [] if isinstance(m, dict) and m.get("role") == "assistant"]
    # The loop writes one assistant message per turn, in order, so the k-th one is turn k.
    spent = [_tokens(m.get("usage")) for m in assistants[:turn]]
    if len(spent) == turn and all(tokens is not None for tokens in spent):
        return sum(spent)  # type: ignore[arg-type]
    usage = record.get("usage") if isinstance(record.get("usage"), dict) else {}
    if record.get("turns") == turn:
        return _tokens(usage)
    return None


def beat_naive(view: Record) -> bool | None:
    """The submitted plan was graded feasible and costs less than the task's naive plan (null when the naive cost
    is unknown)."""
    naive = view.task.get("naive_cost") if view.task.get("naive_cost") is not None else view.grade.get("naive_cost")
    if isinstance(naive, bool) or not isinstance(naive, int | float):
        return None
    cost = view.grade.get("cost")
    if not view.submitted or not view.feasible or isinstance(cost, bool) or not isinstance(cost, int | float):
        return False
    return bool(cost < naive)


def _tokens(usage: Any) -> int | None:
    value = usage.get("output_tokens") if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _safe_usd(record: dict) -> float | None:
    try:
        return episode_usd(record)
    except Exception:  # a price library bug must never cost a rollout its index row
        return None
