"""A task with known reference plans, and those plans as `submit_plan` / `check_plan` arguments."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from testkit.peers import Turn

TASK_ID = "dock-24B-w06x1-busy-0"  # 17 ships; optimal 87, naive 658 (PORTSIM_SPEC §8.4)


def task(task_id: str = TASK_ID) -> dict:
    from berth_env import load_pack

    return load_pack().get(task_id)


def optimal_args(task_id: str = TASK_ID) -> str:
    """The reference optimum as a tool call's JSON arguments."""
    return json.dumps({"plan": task(task_id)["reference"]["optimal_plan"]})


def naive_args(task_id: str = TASK_ID) -> str:
    """The naive reference plan (feasible, far from optimal) as a tool call's JSON arguments."""
    return json.dumps({"plan": task(task_id)["reference"]["naive_plan"]})


def slow_then_optimal(request: dict, *, words: int = 30) -> Turn:
    """A chat-peer script (testkit.peers): the first turn streams `words` repeats of reasoning for a few seconds
    and reads the situation; once it has a tool result it submits the optimum."""
    from testkit.peers import Text, Thinking, ToolCall, Turn

    if any(m.get("role") == "tool" for m in request["messages"]):
        return Turn(ToolCall("submit_plan", optimal_args()))
    return Turn(Thinking("placing the ships " * words), Text("Checking now."), ToolCall("get_situation"),
                chunk=6, delay=0.03)
