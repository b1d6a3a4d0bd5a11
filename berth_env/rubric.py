"""The OpenEnv rubric tree that turns a step into a reward (PORTSIM_SPEC §6.4).

Only an accepted `submit_plan` is scored. The environment grades the plan once, inside the tool, and hands that
grade to the rubric through the observation's `metadata["grade"]`; a submit that errored (bad arguments, or sent
after the episode ended) carries no grade and scores 0.0, so the step stream cannot be farmed for reward.

    BerthPlanRubric            reward: the grade's reward (v3: 0.2 x clean if infeasible, else 0.2 + 0.8 x quality)
    ├── ships_clean            the grade's clean fraction
    └── cost_quality           the grade's quality (0 when infeasible)

The children are re-evaluated on every action, as the framework's `last_score` semantics imply: after the submit
step they read 0.0 on any later action, while the environment keeps reporting the submitted grade itself.
"""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.rubrics import Rubric


def submitted_grade(action: Any, observation: Any) -> dict | None:
    """The grade of this step's accepted submit, or None if the step is anything else."""
    if not isinstance(action, CallToolAction) or action.tool_name != "submit_plan":
        return None
    if getattr(observation, "error", None) is not None:
        return None
    grade = (getattr(observation, "metadata", None) or {}).get("grade")
    return grade if isinstance(grade, dict) else None


class ShipsClean(Rubric):
    """Share of ships without any problem (entry problems count in the denominator)."""

    def forward(self, action: Any, observation: Any) -> float:
        grade = submitted_grade(action, observation)
        return float(grade["clean_fraction"]) if grade else 0.0


class CostQuality(Rubric):
    """How close a feasible plan's cost is to the optimum (1.0 at or below it, 0.0 if infeasible)."""

    def forward(self, action: Any, observation: Any) -> float:
        grade = submitted_grade(action, observation)
        return float(grade["quality"]) if grade else 0.0


class BerthPlanRubric(Rubric):
    """Root rubric: the step reward is the submitted grade's reward; the children report its two parts."""

    def __init__(self) -> None:
        super().__init__()
        self.ships_clean = ShipsClean()
        self.cost_quality = CostQuality()

    def forward(self, action: Any, observation: Any) -> float:
        self.ships_clean(action, observation)
        self.cost_quality(action, observation)
        grade = submitted_grade(action, observation)
        return float(grade["reward"]) if grade else 0.0

    def scores(self) -> dict[str, float]:
        """The children's latest scores, as reported in the step metadata."""
        return {"ships_clean": self.ships_clean.last_score or 0.0,
                "cost_quality": self.cost_quality.last_score or 0.0}
