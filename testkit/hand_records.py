"""Small rollout records written out by hand, so each figure of rollouts.metrics can be worked out on paper.

`hand_record(...)` gives a schema-valid record with one assistant message per turn and the steps described:
`checks` are (turn, answer) pairs where the answer is the server's check_plan JSON (`feasible(cost)`,
`infeasible()` or `plan_error()`), `submit` is (turn, feasible, cost) or None. `per_turn` lists each turn's
output tokens (kept on the assistant messages, as the loop records them since per-turn usage exists; turn k's
prompt is k x 1,000 tokens); without it the record is one of the older ones that keep only the episode's totals.
`turns` defaults to one per `per_turn` entry, else 3. `age(folder)` rewrites a folder's index rows as a version
before the convergence and price columns wrote them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rollouts.jsonio import json_line
from rollouts.metrics import METRIC_COLUMNS

# The index columns an older version did not write.
NEW = [*METRIC_COLUMNS, "regrade_reward", "regrade_feasible"]


def feasible(cost: int, checks_left: int = 9) -> dict:
    return {"feasible": True, "violations": [], "cost": cost, "delay_cost": cost, "moves": 0, "ships": [],
            "checks_left": checks_left}


def infeasible(checks_left: int = 9) -> dict:
    return {"feasible": False, "violations": [{"ship": 1, "problem": "overlaps ship 2"}], "cost": None,
            "delay_cost": None, "moves": None, "ships": [], "checks_left": checks_left}


def plan_error() -> dict:
    return {"error": "the plan must be a JSON list of {ship, berth_hour, section, cranes} objects", "checks_left": 8}


def hand_record(episode_id: str = "hand-1", *, model: str = "anthropic:claude-sonnet-5-5", turns: int | None = None,
                checks: list[tuple[int, dict]] = (), submit: tuple[int, bool, int | None] | None = None,
                per_turn: list[int] | None = None, usage: dict | None = None, optimal: int | None = 100,
                naive: int | None = 500, started: str = "2026-11-25T10:00:00Z", task_id: str = "dock-36A-w35x1-x",
                reward: float | None = None, **extra: Any) -> dict:
    turns = turns or (len(per_turn) if per_turn else 3)
    steps = [{"turn": turn, "tool": "check_plan", "plan": [{"ship": 1, "berth_hour": 4, "section": 2}],
              "result": answer} for turn, answer in checks]
    final: dict[str, Any] = {"submitted": False, "plan": None, "grade": None, "rubric": None}
    if submit is not None:
        turn, ok, cost = submit
        grade = {"reward": 0.9 if ok else 0.1, "feasible": ok, "clean_fraction": 1.0 if ok else 0.5,
                 "quality": 0.8 if ok else 0.0, "cost": cost if ok else None, "delay_cost": cost if ok else None,
                 "moves": 0 if ok else None, "naive_cost": naive, "optimal_cost": optimal, "violations": [],
                 "parse_problems": []}
        steps.append({"turn": turn, "tool": "submit_plan", "plan": [],
                      "result": {"submitted": True, "feasible": ok}})
        final = {"submitted": True, "plan": [], "grade": grade, "rubric": None}
    messages: list[dict] = [{"role": "system", "content": "rules"}, {"role": "user", "content": "situation"}]
    for turn in range(1, turns + 1):
        message = {"role": "assistant", "content": "", "reasoning": None, "stop": "tool_use", "tool_calls": []}
        if per_turn is not None:
            message["usage"] = {"input_tokens": 1000 * turn, "output_tokens": per_turn[turn - 1]}
        messages.append(message)
    if usage is None:
        usage = {"input_tokens": sum(1000 * t for t in range(1, turns + 1)),
                 "output_tokens": sum(per_turn) if per_turn is not None else 100 * turns}
    record = {
        "schema_version": 1, "episode_id": episode_id, "run": None, "source": "cli", "model": model,
        "task_id": task_id,
        "task": {"split": "eval", "difficulty": "standard", "quay": "36A", "ships": 9, "optimal_cost": optimal,
                 "naive_cost": naive},
        "env_url": "embedded", "limits": {"max_turns": 12, "max_tokens": 24000, "wall_clock_s": 1800},
        "started": started, "seconds": 12.5, "messages": messages, "steps": steps, "final": final,
        "reward": reward if reward is not None else (final["grade"]["reward"] if final["grade"] else 0.0),
        "usage": usage, "turns": turns, "end_reason": "submitted" if submit else "turn_limit", "errors": [],
        "app_version": "0.1.0",
    }
    record.update(extra)
    return record


def age(root: Path, *, mutate=None) -> list[dict]:
    """Rewrite the folder's index rows as an older version wrote them: without the new columns."""
    old_rows = []
    for file in sorted(root.glob("index/*/*.jsonl")):
        rows = [json.loads(line) for line in file.read_bytes().splitlines()]
        rows = [{k: v for k, v in row.items() if k not in NEW} for row in rows]
        if mutate:
            rows = [mutate(row) for row in rows]
        file.write_bytes(b"".join(json_line(row) for row in rows))
        old_rows += rows
    return old_rows
