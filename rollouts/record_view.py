"""A read-only view of one rollout record: what every reader of a record asks of it, answered in one place.

A record is plain JSON (DESIGN.md "The rollout record"), and not every record has every field in its place: an
upstream row turned into a record has no limits or per-turn usage, an episode that never submitted has no grade, an
older version wrote fewer fields. `RecordView` answers each question once, with the same guard everywhere, never
raising on an odd value: the final plan and grade, the plans to step through (every check and the submit, or the
submitted plan alone when steps were not kept), the checks the server accepted, the usage, the cost, who played.
The index row (rollouts.schema), the metrics, re-grading, the replay, the summaries and the pages all read records
through it. It imports nothing else of the project, so every module can; checking a record against the schema is
rollouts.schema's (`validate_record`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

PLAN_TOOLS = ("check_plan", "submit_plan")
# The one rule of what is a rollout: an episode whose player took at least one turn (`turns` >= 1: a model's answered
# turn, a hand-played tool call). One that ended before (a server out of reach, a task it refused, a request that
# failed or a Stop before the first answer) played nothing: the store never saves it, the journal never recovers
# it, and the rows an older version saved of such episodes are left out of every list, board and rating (the index
# engine's view). A record or row that does not say how many turns it took counts as started.
STARTED_SQL = "(turns IS NULL OR turns > 0)"


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def accepted(step: Any) -> bool:
    """Whether the server took this `check_plan` (it used one of the episode's checks): its answer says how many
    are left, or (older answers) whether the plan was feasible. A check refused for want of checks left, or for
    arguments that failed the tool's schema, used none."""
    result = step.get("result") if isinstance(step, Mapping) else None
    return isinstance(result, Mapping) and ("checks_left" in result or "feasible" in result)


@dataclass(frozen=True, eq=False)
class RecordView:
    """A record, read; the record itself is `record` (never changed here)."""

    record: Mapping[str, Any]

    def get(self, key: str, default: Any = None) -> Any:
        return self.record.get(key, default)

    @property
    def episode_id(self) -> str:
        return str(self.record.get("episode_id") or "")

    @property
    def model(self) -> str:
        return str(self.record.get("model") or "")

    @property
    def task_id(self) -> str:
        return str(self.record.get("task_id") or "")

    @property
    def task(self) -> dict:
        """The task's summary the record keeps (split, difficulty, quay, ships, optimal and naive costs)."""
        return _dict(self.record.get("task"))

    @property
    def reward(self) -> float:
        reward = self.record.get("reward")
        return float(reward) if isinstance(reward, int | float) and not isinstance(reward, bool) else 0.0

    @property
    def end_reason(self) -> str:
        return str(self.record.get("end_reason") or "")

    @property
    def baseline(self) -> bool:
        """A heuristic player (no tokens, no price)."""
        return self.model.startswith("baseline:")

    @property
    def human(self) -> bool:
        """Played by a person: `human`, `human:<user>`, or `human+<model>` (a person improving a model's plan)."""
        return self.model == "human" or self.model.startswith(("human:", "human+"))

    # -- the outcome -------------------------------------------------------------------------------------------

    @property
    def final(self) -> dict:
        return _dict(self.record.get("final"))

    @property
    def submitted(self) -> bool:
        return bool(self.final.get("submitted"))

    @property
    def grade(self) -> dict:
        """The submitted plan's grade ({} without one)."""
        return _dict(self.final.get("grade"))

    @property
    def rubric(self) -> dict:
        return _dict(self.final.get("rubric"))

    @property
    def feasible(self) -> bool:
        return self.grade.get("feasible") is True

    @property
    def cost(self) -> int | None:
        """The submitted plan's cost, when it was graded with one."""
        return _int(self.grade.get("cost"))

    @property
    def final_plan(self) -> Any:
        """The submitted plan, else the last plan sent to a tool (None without either)."""
        if self.final.get("plan") is not None:
            return self.final["plan"]
        steps = self.plan_steps
        return steps[-1].get("plan") if steps else None

    # -- the steps -------------------------------------------------------------------------------------------

    @cached_property
    def steps(self) -> list[dict]:
        """Every `check_plan` and `submit_plan` call with its plan and the server's answer, in order."""
        steps = self.record.get("steps")
        return [s for s in steps if isinstance(s, dict)] if isinstance(steps, list) else []

    @cached_property
    def plan_steps(self) -> list[dict]:
        """The plans to step through: every check and submit; the submitted plan alone when steps were not kept."""
        if self.steps or self.final.get("plan") is None:
            return self.steps
        return [{"turn": self.record.get("turns"), "tool": "submit_plan", "plan": self.final["plan"], "result": {}}]

    @cached_property
    def checks(self) -> list[dict]:
        """The `check_plan` calls the server accepted (rollouts.record_view.accepted), in order."""
        return [s for s in self.steps if s.get("tool") == "check_plan" and accepted(s)]

    @property
    def last_plan(self) -> Any:
        """The last plan the player sent (what the optimum is shown beside)."""
        steps = self.plan_steps
        return steps[-1].get("plan") if steps else None

    # -- what it took ----------------------------------------------------------------------------------------

    @property
    def usage(self) -> dict[str, int]:
        usage = _dict(self.record.get("usage"))
        return {"input_tokens": _int(usage.get("input_tokens")) or 0,
                "output_tokens": _int(usage.get("output_tokens")) or 0}

    @property
    def turns(self) -> int | None:
        return _int(self.record.get("turns"))

    @property
    def started(self) -> bool:
        """Whether this is a rollout at all: its player took a turn (STARTED_SQL is the same rule over index rows)."""
        turns = self.turns
        return turns is None or turns > 0

    @property
    def seconds(self) -> float | None:
        seconds = self.record.get("seconds")
        return float(seconds) if isinstance(seconds, int | float) and not isinstance(seconds, bool) else None

    @property
    def messages(self) -> list[dict]:
        messages = self.record.get("messages")
        return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []

    @property
    def errors(self) -> list[str]:
        errors = self.record.get("errors")
        return [e for e in errors if isinstance(e, str)] if isinstance(errors, list) else []


__all__ = ["PLAN_TOOLS", "STARTED_SQL", "RecordView", "accepted"]
