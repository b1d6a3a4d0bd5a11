"""PortSimEnv v1 berth planning: the task pack, the plan parser, the checker, the grader and the baselines.

Written from PORTSIM_SPEC.md alone, so that parity with upstream's numbers is evidence rather than a copy.
"""

from berth_env.baselines import greedy_plan, naive_plan
from berth_env.check import CheckResult, ShipResult, check
from berth_env.grade import GRADER_VERSION, evaluate, grade, unavoidable_cost
from berth_env.pack import TIERS, Pack, PackError, load_pack
from berth_env.plan import ParsedPlan, PlanError, canonical_plan, parse_plan

__all__ = [
    "GRADER_VERSION",
    "TIERS",
    "CheckResult",
    "Pack",
    "PackError",
    "ParsedPlan",
    "PlanError",
    "ShipResult",
    "canonical_plan",
    "check",
    "evaluate",
    "grade",
    "greedy_plan",
    "load_pack",
    "naive_plan",
    "parse_plan",
    "unavoidable_cost",
]
