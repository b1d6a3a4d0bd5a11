"""The plans Play can start from: the published plan, the naive re-plan, or the last plan of any stored rollout
("Try to beat this" on Browse's open rollout and on the share page `/r/<id>`).

A link `?tab=play&task=<task id>&from=<episode id | naive | published>` opens Play on that task with that plan on
the chart. A person who starts from a model's plan plays as `human+<model>` (live.hand_play.human_model), the
centaur row the board ranks beside `human` and the models.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent.limits import InputTooLarge, check_input
from berth_env import PlanError, canonical_plan, parse_plan
from berth_env.baselines import published_plan
from rollouts.archive import RolloutNotFound
from rollouts.sources import SourceError

PUBLISHED, NAIVE = "published", "naive"


@dataclass(frozen=True)
class StartPlan:
    """A plan to start from, what the page calls it, and the rollout (and its model) it came from, if any."""

    plan: list
    name: str
    episode_id: str | None = None
    model: str | None = None

    @property
    def player(self) -> dict:
        """What the record says about the start (record["player"]["start"])."""
        start = {"from": self.episode_id or (NAIVE if self.name == NAIVE_NAME else PUBLISHED)}
        if self.model:
            start["model"] = self.model
        return start


PUBLISHED_NAME, NAIVE_NAME = "the published plan", "the naive re-plan"


def published_start(task: Mapping[str, Any]) -> StartPlan:
    return StartPlan(published_plan(task), PUBLISHED_NAME)


def start_plan(records: Any, task: Mapping[str, Any], source: str) -> StartPlan:
    """The plan `source` names for `task` (`published`, `naive`, or a rollout's episode id read through `records`,
    the app's RecordCache); ValueError with a message for the page when it names none of this task."""
    source = (source or "").strip()
    if source in ("", PUBLISHED):
        return published_start(task)
    if source == NAIVE:
        naive = (task.get("reference") or {}).get("naive_plan")
        if not naive:
            raise ValueError("this task has no naive re-plan")
        return StartPlan(list(naive), NAIVE_NAME)
    try:
        view = records.find(source, running=False).record
    except (RolloutNotFound, SourceError) as exc:
        raise ValueError(f"rollout {source[:64]}: {exc}") from None
    if view.task_id != task.get("task_id"):
        raise ValueError(f"rollout {source[:64]} played another task ({str(view.task_id)[:80]})")
    try:  # a stored record is untrusted until read: the plan goes through the one size limit and the parser
        check_input(view.last_plan, "the rollout's plan")
        plan = canonical_plan(parse_plan(task, view.last_plan).entries) if view.last_plan else []
    except (InputTooLarge, PlanError) as exc:
        raise ValueError(f"rollout {source[:64]}'s last plan cannot be read: {exc}") from None
    if not plan:
        raise ValueError(f"rollout {source[:64]} sent no plan to start from")
    model = str(view.model or "?")
    return StartPlan(plan, f"{model[:60]}'s plan ({source[:24]})", source, model)
