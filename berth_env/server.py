"""The PortSimEnv v1-compatible OpenEnv server: the `berth_planning` MCP environment and its FastAPI app.

Contract: PORTSIM_SPEC §6. Each WebSocket session gets its own `BerthEnvironment`; all share the cached task pack
and the episode store. The tools do the episode's work (checks, grading, ending the episode); `step` and
`step_async` wrap every tool call with the step bookkeeping (call counter, rubric reward, `done`, metadata),
because the WebSocket handler calls `step_async` while other paths call `step`.
"""

from __future__ import annotations

import json
import random
import re
import uuid
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError as McpToolError
from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import (
    CallToolAction,
    CallToolObservation,
    ToolError,
    ToolErrorType,
)
from openenv.core.env_server.types import (
    Action,
    ConcurrencyConfig,
    EnvironmentMetadata,
    Observation,
    State,
)
from pydantic import BaseModel, Field

from berth_env import PlanError, canonical_plan, evaluate, grade, load_pack, parse_plan
from berth_env.episodes import STORE, Episode
from berth_env.rubric import BerthPlanRubric
from berth_env.settings import env_int
from berth_env.texts import rules_text, situation_text

ENV_NAME = "berth_planning"
TOOL_NAMES = ("get_situation", "check_plan", "submit_plan")
PROMPT_VERSION = 1
DEFAULT_MAX_CHECKS = 10
DEFAULT_MAX_TOOL_CALLS = 24
DEFAULT_MAX_CONCURRENT_ENVS = 64
# An HTTP-created session nobody is attached to (a client that died before closing it) is reaped after this long;
# sessions with a live WebSocket are never reaped.
DEFAULT_SESSION_IDLE_S = 1800.0
SUBMIT_VIOLATIONS_SHOWN = 20


def to_json(value: Any) -> str:
    """Tool output format: compact separators, non-ASCII kept, keys in insertion order."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class PlanEntry(BaseModel):
    """One ship's place in a plan (the list form of the `plan` argument)."""

    ship: int = Field(description="ship id from the situation table")
    berth_hour: int = Field(description="hour the ship berths")
    section: int = Field(description="first quay section the ship occupies")
    cranes: int | None = Field(default=None, description="quay cranes working the ship (omit for its standard count)")


PlanArgument = Annotated[
    list[PlanEntry] | str,
    Field(description="the plan: a list of {ship, berth_hour, section, cranes} objects, or the same as JSON text"),
]


class BerthState(State):
    """`/state` and the WebSocket `state` message (PORTSIM_SPEC §6.5)."""

    task_id: str | None = None
    split: str | None = None
    checks_used: int = 0
    tool_calls: int = 0
    done: bool = False
    reward: float | None = None
    grade: dict[str, Any] | None = None


@dataclass
class _Call:
    """What one step's tool call leaves for the step bookkeeping."""

    raw: dict[str, Any]
    ran: bool = False  # the tool body started, so the arguments passed validation
    output: dict[str, Any] | None = None
    grade: dict[str, Any] | None = None  # set by an accepted submit_plan


def plan_for_record(task: dict, raw: Any) -> list[dict] | None:
    """The plan as the canonical list kept in episode steps, or None when it cannot be read at all."""
    try:
        return canonical_plan(parse_plan(task, raw))
    except PlanError:
        return None


def choose_task(pack: Any, task_id: Any = None, split: Any = None, index: Any = None, seed: Any = None) -> dict:
    """The task a reset asks for (PORTSIM_SPEC §6.2); raises ValueError with a readable reason."""
    if task_id is not None:
        try:
            return pack.get(str(task_id))
        except KeyError:
            raise ValueError(f"unknown task {str(task_id)!r}") from None
    splits = pack.splits()
    if split is None:
        split = "train" if "train" in splits else splits[0]
    tasks = pack.split(str(split)) if str(split) in splits else []
    if not tasks:
        raise ValueError(f"unknown split {str(split)!r}; splits: {', '.join(splits)}")
    if index is None:
        return tasks[random.Random(seed).randrange(len(tasks))]
    try:
        position = int(index)
    except (TypeError, ValueError):
        raise ValueError(f"index must be a whole number, got {index!r}") from None
    if not -len(tasks) <= position < len(tasks):
        raise ValueError(f"index {position} is out of range for split {split!r} ({len(tasks)} tasks)")
    return tasks[position]


_PYDANTIC_HINT = re.compile(r"^\s*For further information visit .*$", re.MULTILINE)


def _argument_error(tool_name: str, message: str) -> ToolError:
    details = _PYDANTIC_HINT.sub("", message).strip()
    details = "\n".join(line for line in details.splitlines() if line.strip())[:1500]
    expected = ("it takes no arguments" if tool_name == "get_situation" else
                "plan must be a list of {ship, berth_hour, section, cranes} objects with whole numbers, or a string "
                "holding the plan as JSON")
    return ToolError(error_type=ToolErrorType.INVALID_ARGS,
                     message=f"invalid arguments for {tool_name}: {expected}. Details: {details}")


class BerthEnvironment(MCPEnvironment):
    """PortSimEnv v1 berth planning: reset to a task, then get_situation / check_plan / submit_plan."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        mcp = FastMCP(ENV_NAME)
        self._register_tools(mcp)
        super().__init__(mcp)
        self.rubric = BerthPlanRubric()
        self.pack = load_pack()
        self.max_checks = env_int("BERTH_MAX_CHECKS", DEFAULT_MAX_CHECKS)
        self.max_tool_calls = env_int("BERTH_MAX_TOOL_CALLS", DEFAULT_MAX_TOOL_CALLS)
        self._episode: Episode | None = None
        self._call: _Call | None = None

    # ----------------------------------------------------------------------------------------------- the tools

    def _register_tools(self, mcp: FastMCP) -> None:
        @mcp.tool(output_schema=None)
        def get_situation() -> str:
            """Show the situation again: quay, notices, closed sections, cranes and wind, and the ships to berth."""
            self._started_call()
            return situation_text(self._require_episode().task)

        @mcp.tool(output_schema=None)
        def check_plan(plan: PlanArgument) -> str:
            """Check a draft plan without ending the episode: every rule violation and, if feasible, its cost.

            Each call uses one of your limited checks. Give one entry per ship: ship id, berth hour, first section
            and cranes (omit cranes for the ship's standard count).
            """
            call = self._started_call()
            return to_json(self._check(self._require_live(), self._raw_plan(call, plan), call))

        @mcp.tool(output_schema=None)
        def submit_plan(plan: PlanArgument) -> str:
            """Submit your final plan. This ends the episode and grades the plan once. Same format as check_plan."""
            call = self._started_call()
            return to_json(self._submit(self._require_live(), self._raw_plan(call, plan), call))

    def _started_call(self) -> _Call:
        call = self._call or _Call(raw={})
        call.ran = True
        return call

    def _require_episode(self) -> Episode:
        if self._episode is None:
            raise McpToolError("no episode is running: call reset first, then use the tools")
        return self._episode

    def _require_live(self) -> Episode:
        episode = self._require_episode()
        if episode.done:
            how = "the plan was submitted" if episode.end_reason == "submitted" else "the tool-call limit was reached"
            raise McpToolError(f"the episode is over ({how}); reset to start a new one")
        return episode

    @staticmethod
    def _raw_plan(call: _Call, validated: list[PlanEntry] | str) -> Any:
        # Grade what the agent sent, with the lenient parser: schema coercions (true -> 1) must not change a verdict.
        if "plan" in call.raw:
            return call.raw["plan"]
        if isinstance(validated, str):
            return validated
        return [entry.model_dump(exclude_none=True) for entry in validated]

    def _check(self, episode: Episode, raw: Any, call: _Call) -> dict:
        if episode.checks_used >= self.max_checks:
            call.output = {"error": f"no checks left: all {self.max_checks} checks are used; submit your plan "
                                    "with submit_plan"}
            return call.output
        episode.checks_used += 1  # consumed before parsing, as upstream does
        try:
            output = evaluate(episode.task, raw)
        except PlanError as err:
            output = {"error": err.message}
        output["checks_left"] = self.max_checks - episode.checks_used
        call.output = output
        return output

    def _submit(self, episode: Episode, raw: Any, call: _Call) -> dict:
        result = grade(episode.task, raw)
        episode.done, episode.end_reason = True, "submitted"
        episode.grade, episode.reward = result, result["reward"]
        call.grade = result
        reply = {"submitted": True, "feasible": result["feasible"], "reward": result["reward"]}
        if result["feasible"]:
            reply.update(cost=result["cost"], delay_cost=result["delay_cost"], moves=result["moves"])
        else:
            reply.update(violations=result["violations"][:SUBMIT_VIOLATIONS_SHOWN],
                         entry_problems=result["parse_problems"])
        call.output = reply
        return reply

    # ------------------------------------------------------------------------------------------------ episodes

    def reset(self, seed: Any = None, episode_id: Any = None, split: Any = None, index: Any = None,
              task_id: Any = None, **ignored: Any) -> Observation:
        """Start an episode on a task chosen by `task_id`, or by `split` and `index`, or by `seed` (§6.2)."""
        task = choose_task(self.pack, task_id=task_id, split=split, index=index, seed=seed)
        self._reset_rubric()
        eid = str(episode_id)[:64] if episode_id is not None else uuid.uuid4().hex[:12]
        self._episode = Episode(episode_id=eid, task=task)
        self._call = None
        STORE.add(self._episode)
        return Observation(done=False, reward=None, metadata={
            "episode_id": eid,
            "task_id": task["task_id"],
            "split": task["split"],
            "difficulty": task.get("difficulty"),
            "instructions": rules_text(task, self.max_checks),
            "situation": situation_text(task),
            "max_checks": self.max_checks,
            "max_tool_calls": self.max_tool_calls,
            "tools": list(TOOL_NAMES),
            "prompt_version": PROMPT_VERSION,
            "viewer_url": f"/viewer/#/live/{eid}",
        })

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        if not isinstance(action, CallToolAction):
            return super().step(action, timeout_s=timeout_s, **kwargs)
        self._call = _Call(raw=dict(action.arguments))
        return self._after_call(action, super().step(action, timeout_s=timeout_s, **kwargs))

    async def step_async(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        if not isinstance(action, CallToolAction):
            return await super().step_async(action, timeout_s=timeout_s, **kwargs)
        self._call = _Call(raw=dict(action.arguments))
        return self._after_call(action, await super().step_async(action, timeout_s=timeout_s, **kwargs))

    def _after_call(self, action: CallToolAction, obs: Observation) -> Observation:
        """Step post-processing (PORTSIM_SPEC §6.4), after the tool succeeded or errored."""
        call, self._call = self._call or _Call(raw={}), None
        error = getattr(obs, "error", None)
        if error is not None and not call.ran and action.tool_name in TOOL_NAMES \
                and error.error_type == ToolErrorType.EXECUTION_ERROR:
            obs.error = error = _argument_error(action.tool_name, error.message)
        episode = self._episode
        obs.reward = 0.0
        if episode is None:
            return obs
        episode.tool_calls += 1
        episode.step_count += 1
        if action.tool_name in ("check_plan", "submit_plan"):
            episode.steps.append({
                "turn": episode.tool_calls,
                "tool": action.tool_name,
                "plan": plan_for_record(episode.task, call.raw["plan"]) if "plan" in call.raw else None,
                "result": call.output if error is None and call.output is not None
                else {"error": error.message if error is not None else "no output"},
            })
        if call.grade is not None:
            obs.metadata["grade"] = call.grade
        obs.reward = self._apply_rubric(action, obs)
        if episode.done:
            obs.done = True
            obs.metadata.update(grade=episode.grade, rubric=self.rubric.scores(), end_reason=episode.end_reason,
                                episode_id=episode.episode_id)
        elif episode.tool_calls >= self.max_tool_calls:
            episode.done, episode.end_reason, episode.reward = True, "tool_call_limit", 0.0
            obs.done, obs.reward = True, 0.0
            obs.metadata.update(end_reason="tool_call_limit", episode_id=episode.episode_id)
        return obs

    def _step_impl(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        return Observation(done=False, reward=0.0, metadata={
            "error": f"unsupported action {type(action).__name__}: call the MCP tools {', '.join(TOOL_NAMES)} "
                     "with a call_tool action"})

    @property
    def state(self) -> BerthState:
        episode = self._episode
        if episode is None:
            return BerthState()
        return BerthState(episode_id=episode.episode_id, step_count=episode.step_count, task_id=episode.task_id,
                          split=episode.task.get("split"), checks_used=episode.checks_used,
                          tool_calls=episode.tool_calls, done=episode.done, reward=episode.reward,
                          grade=episode.grade)

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name=ENV_NAME, version="1.0.0",
                                   description="PortSimEnv v1 berth planning: re-plan the berths, cranes and hours "
                                               "of a disrupted container-terminal week.")

    # -------------------------------------------------------------------------------------------- the Task API

    def list_splits(self) -> list[dict]:
        return [{"name": name, "type": name, "num_tasks": len(self.pack.split(name))} for name in self.pack.splits()]

    def num_tasks(self, split: str) -> int:
        return len(self.pack.split(split)) if split in self.pack.splits() else 0

    def get_task(self, split: str, index: int) -> dict:
        tasks = self.pack.split(split) if split in self.pack.splits() else []
        if not -len(tasks) <= int(index) < len(tasks):
            raise IndexError(f"index {index} is out of range for split {split!r} ({len(tasks)} tasks)")
        return self.pack.public(tasks[int(index)])

    def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[dict]:
        tasks = self.pack.split(split) if split in self.pack.splits() else []
        first = max(0, start or 0)
        last = len(tasks) if stop is None else min(len(tasks), stop)
        return [self.pack.public(task) for task in tasks[first:last]]

    def list_tasks(self, split: str) -> list[dict]:
        return self.get_task_range(split)


# ---------------------------------------------------------------------------------------------------- the app


def task_summary(task: dict) -> dict:
    return {"task_id": task["task_id"], "split": task["split"], "quay": task.get("quay"),
            "terminal": task.get("terminal"), "week": task.get("week"), "difficulty": task.get("difficulty"),
            "ships": len(task["ships"]), "disruptions": [d.get("type") for d in task.get("disruptions") or []]}


def add_berth_routes(app: FastAPI) -> None:
    """`/healthz` and the viewer's JSON routes (PORTSIM_SPEC §6.8)."""

    def known_task(task_id: str) -> dict:
        try:
            return load_pack().get(task_id)
        except KeyError:
            raise HTTPException(status_code=404, detail=f"unknown task {task_id!r}") from None

    @app.get("/healthz", tags=["Health"])
    def healthz() -> dict:
        pack = load_pack()
        return {"status": "ok", "tasks": {name: len(pack.split(name)) for name in pack.splits()}}

    @app.get("/api/tasks", tags=["Viewer"])
    def api_tasks() -> list[dict]:
        return [task_summary(task) for task in load_pack().tasks]

    @app.get("/api/tasks/{task_id}", tags=["Viewer"])
    def api_task(task_id: str) -> dict:
        return load_pack().public(known_task(task_id))

    @app.get("/api/tasks/{task_id}/reference", tags=["Viewer"])
    def api_task_reference(task_id: str) -> dict:
        return known_task(task_id).get("reference") or {}

    @app.get("/api/episodes", tags=["Viewer"])
    def api_episodes() -> list[dict]:
        return [episode.summary() for episode in STORE.recent()]

    @app.get("/api/episodes/{episode_id}", tags=["Viewer"])
    def api_episode(episode_id: str) -> dict:
        episode = STORE.get(episode_id)
        if episode is None:
            raise HTTPException(status_code=404, detail=f"unknown episode {episode_id!r}")
        return episode.detail()


def create_berth_app(env_factory: type[BerthEnvironment] = BerthEnvironment) -> FastAPI:
    """The FastAPI app: OpenEnv's routes for `env_factory` plus ours. Mount a Gradio UI on it if you like."""
    load_pack()  # fail at start-up, not on the first session, if the pack is broken
    config = ConcurrencyConfig(
        max_concurrent_envs=env_int("MAX_CONCURRENT_ENVS", DEFAULT_MAX_CONCURRENT_ENVS),
        session_timeout=DEFAULT_SESSION_IDLE_S,
    )
    app = create_fastapi_app(env_factory, CallToolAction, CallToolObservation, concurrency_config=config,
                             env_name=ENV_NAME, state_cls=BerthState, reset_observation_cls=Observation)
    add_berth_routes(app)
    return app
