"""Realistic rollout records for tests and benchmarks (DESIGN.md "The rollout record").

`make_record(**overrides)` builds one episode on a real task of the dock-v1 eval pack: a system prompt, the
situation, model turns with reasoning, tool calls and per-turn usage, `check_plan` results (feasible reports,
violation lists, plan errors), a submit with its grade, usage and timing. Records vary in model, task, tier, turns,
reward, end reason, errors and provider switches, and in shape (a step's plan may be an unparsable string, a result an
error).

`make_records(n, seed)` gives n distinct records, the same ones for the same seed. Building one takes about a
millisecond. Overrides that shape the episode (`task_id`, `model`, `end_reason`, `started`, `episode_id`, `run`,
`source`) are used while building; any other key simply replaces that field at the end.
"""

from __future__ import annotations

import json
import math
import random
import uuid
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

TASKS_FILE = Path(__file__).resolve().parent.parent / "berth_env" / "data" / "dock-v1-eval" / "tasks.jsonl"

MODELS = (
    "anthropic:claude-sonnet-5-5@high",
    "anthropic:claude-haiku-5@low",
    "openai:gpt-5.5@medium",
    "openai:gpt-5.5-mini",
    "hf:Qwen/Qwen3.8-27B:cerebras|ovhcloud",
    "hf:deepseek-ai/DeepSeek-V4:together",
    "vllm:llama-4-scout",
    "baseline:greedy",
    "baseline:naive",
)
END_REASONS = ("submitted",) * 12 + ("no_tool_call", "turn_limit", "wall_clock", "tool_call_limit", "stopped",
                                      "error", "server_ended")
ERRORS = ("APIConnectionError: Connection error.", "RateLimitError: Error code: 429 - rate limited",
          "InternalServerError: Error code: 529 - overloaded", "ConnectionClosedError: no close frame received")
TOOLS = ("get_situation", "check_plan", "submit_plan")


@cache
def tasks() -> tuple[dict, ...]:
    """The pack's tasks, trimmed to what records need (read straight from the JSONL)."""
    out = []
    for line in TASKS_FILE.read_text(encoding="utf-8").splitlines():
        task = json.loads(line)
        ref = task["reference"]
        out.append({
            "task_id": task["task_id"], "split": task["split"], "difficulty": task["difficulty"],
            "quay": task["quay"], "ships": task["ships"], "notices": task.get("notices", []),
            "optimal_cost": ref["optimal_cost"], "naive_cost": ref["naive_cost"],
            "optimal_plan": ref["optimal_plan"], "naive_plan": ref["naive_plan"],
            "first_section": task["first_section"], "last_section": task["last_section"],
        })
    return tuple(out)


@cache
def _task(task_id: str) -> dict:
    for task in tasks():
        if task["task_id"] == task_id:
            return task
    raise KeyError(f"unknown task {task_id!r}")


def make_record(*, seed: int | None = None, rng: random.Random | None = None, **overrides: Any) -> dict:
    """One record; `seed` makes it reproducible (without one, ids are random uuids)."""
    unseeded = seed is None and rng is None
    rng = rng or random.Random(seed)
    shape = {k: overrides.pop(k) for k in ("task_id", "model", "end_reason", "started", "episode_id", "run",
                                           "source") if k in overrides}
    if "episode_id" not in shape:
        shape["episode_id"] = uuid.uuid4().hex[:12] if unseeded else f"{rng.getrandbits(48):012x}"
    record = _Episode(rng, **shape).record()
    record.update(overrides)
    return record


def make_records(n: int, seed: int = 0, **overrides: Any) -> list[dict]:
    """n records with distinct episode ids, reproducible from `seed`."""
    rng = random.Random(seed)
    records, seen = [], set()
    while len(records) < n:
        episode_id = f"{rng.getrandbits(48):012x}"
        if episode_id in seen:
            continue
        seen.add(episode_id)
        records.append(make_record(rng=rng, episode_id=episode_id, **overrides))
    return records


class _Episode:
    def __init__(self, rng: random.Random, *, episode_id: str, task_id: str | None = None, model: str | None = None,
                 end_reason: str | None = None, started: str | None = None, run: Any = "?",
                 source: str | None = None) -> None:
        self.rng = rng
        self.task = _task(task_id) if task_id else rng.choice(tasks())
        self.model = model or rng.choice(MODELS)
        self.end_reason = end_reason or rng.choice(END_REASONS)
        self.episode_id = episode_id
        start = datetime(2026, 11, 20, tzinfo=UTC) + timedelta(seconds=rng.randrange(10 * 86400))
        self.started = started or start.strftime("%Y-%m-%dT%H:%M:%SZ")
        self.run = run if run != "?" else rng.choice((None, None, "run-a", "run-b"))
        self.source = source or ("cli" if self.run else "space")
        self.max_turns = 12
        self.checks_left = 10

    def record(self) -> dict:
        rng, task = self.rng, self.task
        messages = [{"role": "system", "content": _instructions(task["quay"])},
                    {"role": "user", "content": _situation(task) + "\n\nMake the new berth plan; test drafts with "
                     "check_plan; submit with submit_plan."}]
        steps: list[dict] = []
        submits = self.end_reason == "submitted"
        turns = self.max_turns if self.end_reason == "turn_limit" else rng.randint(1, 6)
        final: dict[str, Any] = {"submitted": False, "plan": None, "grade": None, "rubric": None}
        reward = 0.0
        usage = {"input_tokens": 0, "output_tokens": 0}
        for turn in range(1, turns + 1):
            spent = {"input_tokens": sum(len(str(m.get("content") or "")) for m in messages) // 4,
                     "output_tokens": rng.randint(80, 4000)}
            for side, tokens in spent.items():
                usage[side] += tokens
            last = turn == turns
            if last and self.end_reason in ("no_tool_call", "wall_clock", "stopped", "error"):
                messages.append(self._assistant(turn, [], spent, stop="end_turn" if self.end_reason == "no_tool_call"
                                                else "max_tokens"))
                break
            tool = "submit_plan" if last and submits else rng.choice(("check_plan",) * 5 + ("get_situation",))
            call_id = f"call_{self.episode_id[:6]}_{turn}"
            plan = self._plan(tool == "submit_plan")
            arguments = json.dumps({"plan": plan}) if tool != "get_situation" else "{}"
            messages.append(self._assistant(turn, [{"id": call_id, "name": tool, "arguments": arguments}], spent))
            if tool == "get_situation":
                result_text = _situation(task)
            elif tool == "check_plan":
                result = self._check_result(plan)
                steps.append({"turn": turn, "tool": tool, "plan": plan, "result": result})
                result_text = json.dumps(result, separators=(",", ":"))
            else:
                grade = self._grade(plan)
                result = {"submitted": True, "feasible": grade["feasible"], "reward": grade["reward"]}
                if grade["feasible"]:
                    result.update(cost=grade["cost"], delay_cost=grade["delay_cost"], moves=grade["moves"])
                else:
                    result.update(violations=grade["violations"][:20], entry_problems=grade["parse_problems"])
                steps.append({"turn": turn, "tool": tool, "plan": plan, "result": result})
                result_text = json.dumps(result, separators=(",", ":"))
                final = {"submitted": True, "plan": plan, "grade": grade,
                         "rubric": {"ships_clean": grade["clean_fraction"], "cost_quality": grade["quality"]}}
                reward = grade["reward"]
            messages.append({"role": "tool", "tool_call_id": call_id, "name": tool, "content": result_text})
            if not last and rng.random() < 0.15:
                messages.append({"role": "user", "content": "Your last turn had no tool call. Test a plan with "
                                 "check_plan or submit with submit_plan."})
        errors = [rng.choice(ERRORS)] if self.end_reason == "error" or rng.random() < 0.05 else []
        record: dict[str, Any] = {
            "schema_version": 1, "episode_id": self.episode_id, "run": self.run, "source": self.source,
            "model": self.model, "task_id": task["task_id"],
            "task": {"split": task["split"], "difficulty": task["difficulty"], "quay": task["quay"],
                     "ships": len(task["ships"]), "optimal_cost": task["optimal_cost"],
                     "naive_cost": task["naive_cost"]},
            "env_url": rng.choice(("embedded", "embedded", "https://fineenvs-portsimenv.hf.space")),
            "limits": {"max_turns": self.max_turns, "max_tokens": 32000, "wall_clock_s": 1800},
            "started": self.started, "seconds": round(rng.uniform(4, 1800), 1), "messages": messages,
            "steps": steps, "final": final, "reward": reward, "usage": usage, "turns": turns,
            "end_reason": self.end_reason, "errors": errors, "app_version": "0.1.0",
        }
        if self.model.startswith("hf:") and "|" in self.model and rng.random() < 0.4:
            record["provider_switches"] = ["cerebras -> ovhcloud after HTTP 503 on turn 2"]
        return record

    def _assistant(self, turn: int, calls: list[dict], usage: dict, stop: str = "tool_use") -> dict:
        rng = self.rng
        thinks = not self.model.startswith("baseline:") and rng.random() < 0.85
        reasoning = " ".join(rng.choice(_THOUGHTS) for _ in range(rng.randint(2, 9))) if thinks else None
        content = rng.choice(("", "", "Let me test this draft.", "Ship 5 now clears the closure; checking again.",
                              "Submitting the best plan so far."))
        return {"role": "assistant", "content": content, "reasoning": reasoning, "stop": stop, "tool_calls": calls,
                "usage": dict(usage)}

    def _plan(self, final: bool) -> Any:
        rng, task = self.rng, self.task
        roll = rng.random()
        if not final and roll < 0.06:
            return "ship 0 at hour 3 section 4, ship 1 after it"  # prose: the server answers with a plan error
        base = task["optimal_plan"] if roll < 0.45 else task["naive_plan"]
        plan = [dict(entry) for entry in base]
        for entry in rng.sample(plan, k=min(len(plan), rng.randint(0, 3))):
            entry["berth_hour"] += rng.randint(0, 6)
            entry["section"] = max(task["first_section"], entry["section"] + rng.randint(-2, 2))
        return plan

    def _check_result(self, plan: Any) -> dict:
        rng = self.rng
        self.checks_left = max(0, self.checks_left - 1)
        if isinstance(plan, str):
            return {"error": "the plan must be a JSON list of {ship, berth_hour, section, cranes} objects",
                    "checks_left": self.checks_left}
        feasible = rng.random() < 0.5
        violations = [] if feasible else _violations(rng, plan)
        cost = self.task["optimal_cost"] + rng.randint(0, 400) if feasible else None
        ships = [{"ship": e["ship"], "departure": e["berth_hour"] + rng.randint(5, 40), "delay_h": rng.randint(0, 6),
                  "moved": rng.random() < 0.3, "cost": rng.randint(0, 60), "cranes": e.get("cranes"),
                  "hours_alongside": rng.randint(5, 40)} for e in plan]
        return {"feasible": feasible, "violations": violations, "cost": cost,
                "delay_cost": None if cost is None else cost - 10, "moves": None if cost is None else 10,
                "ships": ships, "checks_left": self.checks_left}

    def _grade(self, plan: Any) -> dict:
        rng, task = self.rng, self.task
        n = len(task["ships"])
        feasible = rng.random() < 0.7
        if feasible:
            cost = task["optimal_cost"] + rng.choice((0, 0, rng.randint(1, 600)))
            gap = max(0, cost - task["optimal_cost"]) / (max(0, task["optimal_cost"] - task["optimal_cost"] // 3) + 100)
            quality = round(math.exp(-gap / 0.5), 6)
            reward, clean = round(0.2 + 0.8 * quality, 6), 1.0
            violations: list[dict] = []
            delay, moves = cost - 10 * (cost > 10), 1 if cost > 10 else 0
        else:
            clean_ships = rng.randint(0, n - 1)
            quality, clean, cost, delay, moves = 0.0, round(clean_ships / n, 4), None, None, None
            reward = round(0.2 * (clean_ships / n), 6)
            violations = _violations(rng, plan)
        return {"reward": reward, "feasible": feasible, "clean_fraction": clean, "quality": quality, "cost": cost,
                "delay_cost": delay, "moves": moves, "naive_cost": task["naive_cost"],
                "optimal_cost": task["optimal_cost"], "violations": violations, "parse_problems": []}


def _violations(rng: random.Random, plan: list[dict]) -> list[dict]:
    picks = rng.sample(plan, k=min(len(plan), rng.randint(1, 4)))
    texts = ("overlaps ship {o} at sections 7-9 during hours 40-46", "cannot arrive before hour {h}",
             "needs 2-5 cranes, got 7", "berths at hour {h} inside the wind window 30-36")
    return [{"ship": e["ship"], "problem": rng.choice(texts).format(o=(e["ship"] + 1) % 9, h=e["berth_hour"] + 3)}
            for e in sorted(picks, key=lambda e: e["ship"])]


@cache
def _instructions(quay: str) -> str:
    return (f"You are the berth planner of quay {quay} at the Port of Barcelona. Re-plan the week's container-ship "
            "calls after the disruptions listed in the situation. A plan is a list of {ship, berth_hour, section, "
            "cranes}: every ship berths once, at or after its arrival, inside the quay, clear of blocked sections "
            "and of the other ships, with a crane count inside its range and the crane pool respected hour by hour. "
            "Cost: each section-hour of delay past a ship's due hour times its weight, plus a penalty per ship moved "
            "from its planned slot. You have 10 checks (check_plan) and one submission (submit_plan).")


def _situation(task: dict) -> str:
    lines = [f"# Quay {task['quay']} ({task['difficulty']})", "", "| id | ship | m | arrival | due | cranes |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {s['id']} | {s['name']} | {s['length_m']} | {s['arrival']} | {s['due']} | "
              f"{s['min_cranes']}-{s['max_cranes']} |" for s in task["ships"]]
    return "\n".join([*lines, "", *task["notices"]])


_THOUGHTS = (
    "The closure on sections 9-14 overlaps the planned slot of ship 6, so it has to move.",
    "Ship 2 arrives at hour 24; putting it at section 7 keeps it clear of the alongside block.",
    "With only seven cranes during the outage, ship 4 should take the minimum.",
    "The gale window pushes the 300 m ships past hour 36.",
    "Delay cost is sections times hours late, so the long ships matter most.",
    "Moving ship 11 two sections left avoids the overlap with ship 12 at hours 90-96.",
    "That draft was feasible at a cost well above the naive plan; try keeping planned slots.",
    "Checks left are running low, so the next feasible plan should be submitted.",
    "Los barcos de más de 300 m esperan al final del temporal; ship 8 can berth at hour 51.",
)
