"""One rollout record: the typed object every reader and writer of a record goes through.

A record is plain JSON on disk (DESIGN.md "The rollout record"), and not every record has every field in its place:
an upstream row turned into a record has no limits or per-turn usage, an episode that never submitted has no grade,
an older version wrote fewer fields. `Record` answers each question once, with the same guard everywhere, never
raising on an odd value: the final plan and grade, the plans to step through (every check and the submit, or the
submitted plan alone when steps were not kept), the checks the server accepted, the usage, the cost, who played.
Its steps have an identity: `record.turn(n)` is the n-th turn the player took, `record.draft(k)` the k-th plan it
sent to `check_plan` or `submit_plan`, each with what the server answered.

A record and its events (rollouts.events) are one thing seen two ways: `Record.from_events` makes the record of a
live or running episode from the events it emitted (and gives those back), `Record(json).events()` replays a stored
one as the events a live run would have produced (rollouts.replay). The live view, the replay, the share page, the
arena and hand play all read an episode that way.

The write side's rules live here too, so the loop and hand play apply them alike: what a tool call's answer does
to the record (`apply_tool_outcome`), how an episode is finished (`finish`), and what is a rollout at all
(`started`, with `STARTED_SQL` the same rule over index rows). Checking a record against the schema is
rollouts.schema's (`validate_record`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from rollouts.events import Event
from rollouts.replay import record_events

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


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def accepted(step: Any) -> bool:
    """Whether the server took this `check_plan` (it used one of the episode's checks): its answer says how many
    are left, or (older answers) whether the plan was feasible. A check refused for want of checks left, or for
    arguments that failed the tool's schema, used none."""
    result = step.get("result") if isinstance(step, Mapping) else None
    return isinstance(result, Mapping) and ("checks_left" in result or "feasible" in result)


def plan_value(plan: Any) -> Any:
    """A plan as the player sent it -> a list where it parses (a JSON string is decoded, `{"plan": [...]}` unwrapped):
    the form a step keeps."""
    if isinstance(plan, str):
        try:
            plan = json.loads(plan)
        except (json.JSONDecodeError, RecursionError):
            return plan
    if isinstance(plan, dict) and isinstance(plan.get("plan"), list):
        plan = plan["plan"]
    return plan


@dataclass(frozen=True)
class Draft:
    """The k-th plan a player sent (`index` k, from 1), to `check_plan` or `submit_plan`, and the server's answer."""

    index: int
    turn: int | None  # the turn it was sent in (None when the record does not say)
    tool: str
    plan: Any
    answer: dict  # the server's answer as the record keeps it ({} when it kept none)

    @property
    def accepted(self) -> bool:
        """A check the server took (it used one of the episode's checks); see `accepted`."""
        return self.tool == "check_plan" and accepted({"result": self.answer})

    @property
    def feasible(self) -> bool | None:
        value = self.answer.get("feasible")
        return value if isinstance(value, bool) else None

    @property
    def violations(self) -> list:
        value = self.answer.get("violations")
        return value if isinstance(value, list) else []

    @property
    def violation_count(self) -> int:
        """How many rules it breaks: the answer's list of violations, or the count an older answer kept."""
        value = self.answer.get("violations")
        return len(value) if isinstance(value, list) else (_int(value) or 0)

    @property
    def cost(self) -> int | None:
        return _int(self.answer.get("cost"))

    @property
    def reward(self) -> float | None:
        return _number(self.answer.get("reward"))


@dataclass(frozen=True)
class Turn:
    """The n-th turn the player took (`number` n, from 1): what it said and called, and the drafts it sent."""

    number: int
    text: str
    reasoning: str
    stop: str
    calls: list[dict]  # the tool calls as the record keeps them: id, name, arguments
    usage: dict  # this turn's tokens, when the record kept them ({} otherwise)
    drafts: list[Draft]


@dataclass(frozen=True, eq=False)
class Record:
    """A record, read; its JSON is `data` (never changed here). A reading of one moment: a running episode's record
    grows, so read it again through a new Record."""

    data: Mapping[str, Any]
    kept_events: tuple[Event, ...] | None = field(default=None, repr=False)  # from_events': what it was made from

    @property
    def episode_id(self) -> str:
        return str(self.data.get("episode_id") or "")

    @property
    def model(self) -> str:
        return str(self.data.get("model") or "")

    @property
    def env_url(self) -> str:
        """The server it was played on, as the public record names it ("embedded" for the app's own)."""
        return str(self.data.get("env_url") or "")

    @property
    def task_id(self) -> str:
        return str(self.data.get("task_id") or "")

    @property
    def task(self) -> dict:
        """The task's summary the record keeps (split, difficulty, quay, ships, optimal and naive costs)."""
        return _dict(self.data.get("task"))

    @property
    def reward(self) -> float:
        reward = self.data.get("reward")
        return float(reward) if isinstance(reward, int | float) and not isinstance(reward, bool) else 0.0

    @property
    def run(self) -> str:
        """The batch run it belongs to ("" for one played on its own)."""
        return str(self.data.get("run") or "")

    @property
    def started_stamp(self) -> str:
        """When it started, as the record says it (`2026-05-01T12:00:00Z`; "" when it does not)."""
        return str(self.data.get("started") or "")

    @property
    def app_version(self) -> str:
        """The version of the app that played it ("" when the record does not say)."""
        return str(self.data.get("app_version") or "")

    @property
    def limits(self) -> dict:
        return _dict(self.data.get("limits"))

    @property
    def max_turns(self) -> int | None:
        return _int(self.limits.get("max_turns"))

    @property
    def end_reason(self) -> str:
        return str(self.data.get("end_reason") or "")

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
        return _dict(self.data.get("final"))

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
        steps = self.data.get("steps")
        return [s for s in steps if isinstance(s, dict)] if isinstance(steps, list) else []

    @cached_property
    def plan_steps(self) -> list[dict]:
        """The plans to step through: every check and submit; the submitted plan alone when steps were not kept."""
        if self.steps or self.final.get("plan") is None:
            return self.steps
        return [{"turn": self.data.get("turns"), "tool": "submit_plan", "plan": self.final["plan"], "result": {}}]

    @cached_property
    def checks(self) -> list[dict]:
        """The `check_plan` calls the server accepted (rollouts.record.accepted), in order."""
        return [s for s in self.steps if s.get("tool") == "check_plan" and accepted(s)]

    @property
    def last_plan(self) -> Any:
        """The last plan the player sent (what the optimum is shown beside)."""
        steps = self.plan_steps
        return steps[-1].get("plan") if steps else None

    # -- what it took ----------------------------------------------------------------------------------------

    @property
    def usage(self) -> dict[str, int]:
        usage = _dict(self.data.get("usage"))
        return {"input_tokens": _int(usage.get("input_tokens")) or 0,
                "output_tokens": _int(usage.get("output_tokens")) or 0}

    @property
    def turns(self) -> int | None:
        return _int(self.data.get("turns"))

    @property
    def started(self) -> bool:
        """Whether this is a rollout at all: its player took a turn (STARTED_SQL is the same rule over index rows)."""
        turns = self.turns
        return turns is None or turns > 0

    @property
    def seconds(self) -> float | None:
        seconds = self.data.get("seconds")
        return float(seconds) if isinstance(seconds, int | float) and not isinstance(seconds, bool) else None

    @property
    def messages(self) -> list[dict]:
        messages = self.data.get("messages")
        return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []

    @property
    def provider_switches(self) -> list[str]:
        switches = self.data.get("provider_switches")
        return [str(s) for s in switches] if isinstance(switches, list) else []

    @property
    def errors(self) -> list[str]:
        errors = self.data.get("errors")
        return [e for e in errors if isinstance(e, str)] if isinstance(errors, list) else []

    @classmethod
    def of(cls, record: Record | Mapping[str, Any]) -> Record:
        """A Record as it is, or a record's JSON read as one (what a function taking either begins with)."""
        return record if isinstance(record, Record) else cls(record)

    # -- its steps, addressable ------------------------------------------------------------------------------

    @cached_property
    def drafts(self) -> list[Draft]:
        """Every plan sent, in order (the plans to step through): draft 1, 2, ..."""
        return [Draft(k, _int(step.get("turn")), str(step.get("tool") or ""), step.get("plan"), _dict(step.get("result")))
                for k, step in enumerate(self.plan_steps, 1)]

    def draft(self, k: int) -> Draft:
        """The k-th plan sent (from 1); IndexError when there is none."""
        if not 1 <= k <= len(self.drafts):
            raise IndexError(f"no draft {k}: {len(self.drafts)} plans were sent")
        return self.drafts[k - 1]

    @property
    def checks_sent(self) -> int:
        """The `check_plan` calls the server answered, accepted or not."""
        return sum(1 for d in self.drafts if d.tool == "check_plan")

    @cached_property
    def played_turns(self) -> list[Turn]:
        """Every turn the player took, in order: each assistant message and the drafts sent in it."""
        turns = []
        for number, message in enumerate((m for m in self.messages if m.get("role") == "assistant"), 1):
            calls = message.get("tool_calls")
            turns.append(Turn(number, str(message.get("content") or ""), str(message.get("reasoning") or ""),
                              str(message.get("stop") or ""),
                              [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else [],
                              _dict(message.get("usage")), [d for d in self.drafts if d.turn == number]))
        return turns

    def turn(self, n: int) -> Turn:
        """The n-th turn (from 1); IndexError when there is none."""
        if not 1 <= n <= len(self.played_turns):
            raise IndexError(f"no turn {n}: the player took {len(self.played_turns)}")
        return self.played_turns[n - 1]

    # -- the record and its events ---------------------------------------------------------------------------

    def events(self) -> list[Event]:
        """The episode as events: the ones it was made from (from_events), else the stored record replayed."""
        return list(self.kept_events) if self.kept_events is not None else record_events(self.data)

    @classmethod
    def from_events(cls, events: Iterable[Event]) -> Record:
        """The record of an episode's events: the finished record its last event carries, else the record as it
        stands so far (who plays what, its limits, the drafts sent and their answers, turns, usage and errors)."""
        kept = tuple(events)
        finished = next((e for e in reversed(kept) if e.get("type") == "episode_finished"), None)
        if finished is not None and isinstance(finished.get("record"), Mapping):
            return cls(finished["record"], kept)
        record: dict[str, Any] = {"steps": [], "final": {"submitted": False, "plan": None, "grade": None,
                                                        "rubric": None}, "errors": [], "end_reason": None}
        for event in kept:
            _fold(record, event)
        return cls(record, kept)


def _fold(record: dict, event: Mapping[str, Any]) -> None:
    """One event's part of a running episode's record (the loop writes the finished one itself)."""
    kind = event.get("type")
    if kind == "episode_started":
        record.update({key: event.get(key) for key in ("episode_id", "task_id", "model", "env_url", "limits", "task")})
    elif kind == "turn_finished":
        record["turns"], record["usage"] = event.get("turn"), dict(event.get("usage_total") or {})
    elif kind == "tool_result" and isinstance(event.get("step"), Mapping):
        record["steps"].append(dict(event["step"]))
        if event.get("done"):
            metadata = _dict(event.get("metadata"))
            record["reward"] = float(event.get("reward") or 0.0)
            if event.get("name") == "submit_plan" and metadata.get("grade") is not None:
                record["final"] = {"submitted": True, "plan": event["step"].get("plan"),
                                   "grade": metadata.get("grade"), "rubric": metadata.get("rubric")}
    elif kind == "error":
        record["errors"].append(str(event.get("message") or ""))


# -- the write side: the rules the loop and hand play share ----------------------------------------------------

def apply_tool_outcome(record: dict, *, turn: int, tool: str, plan: Any, text: str, data: Any, done: bool,
                       reward: float | None, metadata: Mapping[str, Any], is_error: bool) -> tuple[dict | None, str | None]:
    """A tool call the server answered, kept in `record`: a plan tool's step (the plan as sent, the answer parsed
    or as text), and on the episode's last call its reward and, for a graded submit, its final plan and grade.
    Returns (the step or None, the end reason when the call ended the episode, else None); ending it (the record's
    `end_reason`, saving) is the caller's."""
    step = None
    if tool in PLAN_TOOLS:
        result = data if isinstance(data, dict) else {"text": text}
        step = {"turn": turn, "tool": tool, "plan": plan_value(plan), "result": result}
        record["steps"].append(step)
    if not done:
        return step, None
    record["reward"] = float(reward or 0.0)
    if tool == "submit_plan" and not is_error:
        record["final"] = {"submitted": True, "plan": step["plan"] if step else None,
                           "grade": metadata.get("grade"), "rubric": metadata.get("rubric")}
        return step, "submitted"
    return step, str(metadata.get("end_reason") or "server_ended")


def finish(record: dict, reason: str, seconds: float) -> dict:
    """The record as its episode leaves it: the end reason it reached (else `reason`) and its wall time."""
    record["end_reason"] = record.get("end_reason") or reason
    record["seconds"] = round(seconds, 1)
    return record


__all__ = ["PLAN_TOOLS", "STARTED_SQL", "Draft", "Record", "Turn", "accepted", "apply_tool_outcome", "finish",
           "plan_value"]
