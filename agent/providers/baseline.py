"""Heuristic players that need no key and no network (`baseline:greedy`, `baseline:naive`, `baseline:hasty`).

They play through the same loop and the same server tools as a model: read the situation, check a draft, repair
the ships the check flags, submit. They say what they do in short sentences so a live view has something to show.
`hasty` plays like a model in a hurry: its first draft is the published plan as it stands, so its first check
comes back full of violations, and it mends the flagged ships check by check until the plan is clean.
"""

from __future__ import annotations

import difflib
import json

from agent.interrupt import Interrupt
from agent.providers.base import ModelAPI, ModelTurn, ProviderSetup, ToolCall, TurnStream
from agent.spec import ModelSpec, SpecError
from rollouts import events as ev

PLAYERS = {
    "greedy": "ships in order of arrival, each with as many cranes as it may use, at the nearest free section "
              "to its planned one, at the earliest hour that fits",
    "naive": "ships in their published order with their planned cranes, each at the earliest hour from its "
             "planned one where a section near its planned one is free",
    "hasty": "ships exactly where the port's published plan had them, as if nothing had happened this week",
}


class BaselineError(RuntimeError):
    """A baseline can't play this task."""


class BaselinePlayer(ModelAPI):
    """A scripted planner behind the provider interface: each turn is one decision, streamed as words.

    It needs no key and sends no request, so it plays its own turn (`stream_turn`) instead of the base class's
    request-and-stream template.
    """

    prefixes = ("baseline",)
    label = "The baseline"

    @classmethod
    def check_model(cls, spec: ModelSpec) -> None:
        """The baselines are PLAYERS, no other name; they take no `@effort`."""
        if spec.model not in PLAYERS:
            close = difflib.get_close_matches(spec.model, PLAYERS, n=1)
            hint = f" (did you mean baseline:{close[0]}?)" if close else ""
            raise SpecError(f"unknown baseline {spec.model[:40]!r}{hint}: the baselines are "
                            f"{', '.join('baseline:' + p for p in PLAYERS)}")
        if spec.effort:
            raise SpecError(f"model spec {spec.text!r}: a baseline takes no @effort; write baseline:{spec.model}")

    @classmethod
    def create(cls, spec: ModelSpec, setup: ProviderSetup) -> BaselinePlayer:
        return cls(spec.model, setup.task_id, max_turns=setup.max_turns, pace_s=setup.pace_s)

    def __init__(self, name: str, task_id: str, *, max_turns: int, pace_s: float = 0.0):
        from berth_env import load_pack

        try:
            self.task = load_pack().get(task_id)
        except KeyError:
            raise BaselineError(f"baseline:{name} plays only the tasks of the embedded task pack, and "
                                f"{task_id!r} is not one of them") from None
        self.name, self.max_turns = name, max_turns
        self.pace_s = pace_s  # seconds per step (its words, then its tool call), so a person can follow along
        self.provider_switches: list[str] = []
        self.plan: list[dict] | None = None
        self.last_check: dict | None = None
        self.checks_left: int | None = None
        self.submitted = False
        self._calls = 0
        self._interrupt: Interrupt | None = None

    # The player reads what the server answered; the rest of the conversation is for models.
    def add_user(self, text: str) -> None:
        pass

    def add_notes(self, text: str) -> None:
        pass

    def add_tool_results(self, results: list[tuple[ToolCall, str]]) -> None:
        for call, text in results:
            if call.name != "check_plan":
                continue
            payload = text.split("\n\n[", 1)[0]  # drop the loop's turns-left suffix
            try:
                answer = json.loads(payload)
            except json.JSONDecodeError:
                answer = {"error": payload}
            self.last_check = answer if isinstance(answer, dict) else {"error": payload}
            if isinstance(self.last_check.get("checks_left"), int):
                self.checks_left = self.last_check["checks_left"]

    def stream_turn(self, turn: int, interrupt: Interrupt) -> TurnStream:
        interrupt.check()
        self._interrupt = interrupt
        if turn >= self.max_turns:
            if self.plan is None:
                self.plan = self._draft()
            return (yield from self._submit(turn, "This is the last turn, so I submit the plan as it stands."))
        if turn == 1:
            return (yield from self._act(turn, "I start by reading the situation: the quay, the notices and the "
                                               "ships to berth.", "get_situation", {}))
        if self.plan is None:
            self.plan = self._draft()
            return (yield from self._act(turn, f"My draft places the {PLAYERS[self.name]}. I check it before "
                                               "I submit.", "check_plan", {"plan": self.plan}))
        return (yield from self._review(turn))

    def _review(self, turn: int) -> TurnStream:
        check = self.last_check or {}
        if "error" in check:
            return (yield from self._submit(turn, f"The check answered: {check['error']} I submit the draft."))
        if check.get("feasible"):
            return (yield from self._submit(turn, f"The check is clean: every rule holds and the plan costs "
                                                  f"{check.get('cost')}. I submit it."))
        flagged = sorted({v["ship"] for v in check.get("violations", []) if isinstance(v.get("ship"), int)})
        out_of_checks = self.checks_left is not None and self.checks_left <= 0
        if not flagged or out_of_checks or turn >= self.max_turns - 1:
            return (yield from self._submit(turn, "The check still shows problems, but I am out of checks or "
                                                  "turns, so I submit the best plan I have."))
        from berth_env.baselines import repair_plan

        self.plan = repair_plan(self.task, self.plan or [], flagged)
        listed = ", ".join(str(s) for s in flagged[:12]) + (" and more" if len(flagged) > 12 else "")
        return (yield from self._act(turn, f"The check flags ships {listed}. I keep every other ship where it is "
                                           "and place the flagged ones again, each at the earliest hour that "
                                           "fits around the rest. Checking the repaired plan.",
                                     "check_plan", {"plan": self.plan}))

    def _draft(self) -> list[dict]:
        from berth_env import greedy_plan, naive_plan
        from berth_env.baselines import published_plan

        return {"greedy": greedy_plan, "naive": naive_plan, "hasty": published_plan}[self.name](self.task)

    def _submit(self, turn: int, text: str) -> TurnStream:
        self.submitted = True
        return (yield from self._act(turn, text, "submit_plan", {"plan": self.plan or []}))

    def _act(self, turn: int, text: str, tool: str, arguments: dict) -> TurnStream:
        words = _words(text)
        for word in words:
            if self.pace_s:  # the words take half of the step's time, the pause before the call the other half
                self._interrupt.sleep(self.pace_s / 2 / len(words))
            yield ev.text_delta(turn, word)
        if self.pace_s:
            self._interrupt.sleep(self.pace_s / 2)
        self._calls += 1
        call = ToolCall(f"baseline_{self._calls}", tool, json.dumps(arguments))
        yield ev.tool_args_delta(turn, 0, call.id, call.name, call.arguments)
        return ModelTurn(text=text, calls=[call], stop="tool_use")


def _words(text: str) -> list[str]:
    """Stream a sentence word by word, as a model would, keeping the spaces."""
    parts = text.split(" ")
    return [part + (" " if i < len(parts) - 1 else "") for i, part in enumerate(parts)]
