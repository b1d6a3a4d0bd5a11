"""What a sweep will cost, estimated before it starts: the Jobs' machine time at the flavor's price, plus the models'
tokens at their list prices (rollouts.prices prices an estimated episode exactly as it prices a played one); local
shards cost only time.

An episode's tokens, turns and seconds come from earlier rollouts of the same model when the rollout folder or the
dataset has some (their medians), else from a rough assumption, and the estimate says which. A shard's machine
time is a start-up allowance (a Job's image pull, or a local process's start: `start_up_s`) plus, per model (each model has its own pool of `--concurrency` episodes in flight),
its episodes in waves of `--concurrency`, the slowest model setting the pace. Every figure is a guess to decide
with, not a quote: the timeout bounds what the Jobs can cost, nothing bounds what a provider bills.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass

from agent.providers.registry import parse_spec
from batch.sweep_plan import HF_JOBS, SweepPlan
from rollouts.prices import episode_usd

JOB_START_S = 180.0  # pulling the image, starting Python and the berth server, loading the tasks
LOCAL_START_S = 18.0  # a local shard: starting Python, importing the server and the providers, loading the tasks
# A rough episode of a language model on a dock-v1 task: a 2-3k token prompt re-read over about six turns.
ASSUMED_TOKENS = (40_000, 12_000)
ASSUMED_TURNS = 6
ASSUMED_SECONDS = 120.0
BASELINE_SECONDS = 2.0
MIN_HISTORY = 3  # fewer earlier rollouts than this say too little
_PER_HOUR = {"second": 3600.0, "minute": 60.0, "hour": 1.0}


@dataclass(frozen=True)
class EpisodeGuess:
    input_tokens: float
    output_tokens: float
    turns: float
    seconds: float
    source: str  # where the figures come from, said beside them


@dataclass(frozen=True)
class ModelCost:
    model: str
    episodes: int
    guess: EpisodeGuess
    usd_per_episode: float | None  # None: no list price (baselines, self-hosted, unpriced)

    @property
    def usd(self) -> float:
        return (self.usd_per_episode or 0.0) * self.episodes


@dataclass(frozen=True)
class Estimate:
    models: list[ModelCost]
    shard_hours: list[float]  # each shard's machine time, at most its timeout
    usd_per_hour: float | None  # the flavor's price; None for local machines
    cap_hours: float | None  # every Job running to its timeout
    over_timeout: bool = False  # some shard needs longer than the timeout gives it

    @property
    def jobs_usd(self) -> float:
        return sum(self.shard_hours) * (self.usd_per_hour or 0.0)

    @property
    def cap_usd(self) -> float | None:
        if self.cap_hours is None or self.usd_per_hour is None:
            return None
        return self.cap_hours * self.usd_per_hour

    @property
    def total_usd(self) -> float:
        return self.jobs_usd + sum(m.usd for m in self.models)


def hourly_usd(unit_cost_usd: float, unit_label: str) -> float | None:
    """A flavor's price per hour, from list_jobs_hardware's price per unit."""
    per_hour = _PER_HOUR.get(unit_label.strip().lower().rstrip("s"))
    return None if per_hour is None else unit_cost_usd * per_hour


def episode_guess(model: str, rows: list[dict], where: str) -> EpisodeGuess:
    """Medians of the earlier rollouts of `model` in `rows` that ended without errors, else the assumption."""
    baseline = parse_spec(model).provider == "baseline"
    seen = [r for r in rows if r.get("model") == model and not r.get("errors") and _number(r.get("seconds"))]
    if not baseline:
        seen = [r for r in seen if _number(r.get("input_tokens")) and _number(r.get("output_tokens"))]
    if len(seen) < MIN_HISTORY:
        if baseline:
            return EpisodeGuess(0, 0, 1, BASELINE_SECONDS, "no tokens")
        return EpisodeGuess(*ASSUMED_TOKENS, ASSUMED_TURNS, ASSUMED_SECONDS,
                            "a rough assumption: no earlier rollouts of this model here")

    def median(key: str) -> float:
        return float(statistics.median(float(r.get(key) or 0) for r in seen))

    return EpisodeGuess(median("input_tokens"), median("output_tokens"), max(1.0, median("turns")),
                        median("seconds"), f"medians of {len(seen)} earlier rollouts in {where}")


def estimate(plan: SweepPlan, rows: list[dict], where: str, usd_per_hour: float | None) -> Estimate:
    """The sweep's estimate from earlier rollouts (`rows`, read from `where`) and the flavor's hourly price."""
    guesses = {m: episode_guess(m, rows, where) for m in plan.models}
    models = [ModelCost(m, len([c for c in plan.cells() if c[0] == m]) * plan.repeats, g, _usd(m, g))
              for m, g in guesses.items()]
    needed = []
    for shard in range(1, plan.machines + 1):
        cells = plan.cells(shard)
        waves = [math.ceil(len([c for c in cells if c[0] == m]) * plan.repeats / max(1, plan.concurrency))
                 * guesses[m].seconds for m in plan.models]
        needed.append(start_up_s(plan.on) + max(waves, default=0.0))
    limit = plan.timeout_s if plan.timeout_s and plan.on == "hf-jobs" else None
    hours = [min(s, limit or s) / 3600 for s in needed]
    cap = plan.machines * limit / 3600 if limit else None
    return Estimate(models, hours, usd_per_hour if plan.on == "hf-jobs" else None, cap,
                    over_timeout=bool(limit and max(needed) > limit))


def start_up_s(on: str) -> float:
    """A shard's start-up allowance where it runs: a Job pulls an image first, a local process only starts."""
    return JOB_START_S if on == HF_JOBS else LOCAL_START_S


def describe(estimate: Estimate, flavor: str) -> list[str]:
    """The estimate as lines for the plan the sweep prints."""
    lines = []
    if estimate.usd_per_hour is not None:
        each = max(estimate.shard_hours, default=0.0)
        cap = f"; at most {_dollars(estimate.cap_usd)} if every Job runs to its timeout" if estimate.cap_usd else ""
        lines.append(f"Jobs: {len(estimate.shard_hours)} x {flavor} at {_dollars(estimate.usd_per_hour)}/hour, "
                     f"about {_hours(each)} each (start-up {JOB_START_S / 60:.0f} min included) = "
                     f"{_dollars(estimate.jobs_usd)}{cap}")
        if estimate.over_timeout:
            lines.append("warning: a shard needs longer than --timeout allows: raise --timeout or --machines (a "
                         "shard that times out keeps what it saved, and --resume goes on with it)")
    else:
        lines.append(f"machines: {len(estimate.shard_hours)} local processes, about "
                     f"{_hours(max(estimate.shard_hours, default=0.0))} each (start-up {LOCAL_START_S:.0f} s "
                     "included)")
    for cost in estimate.models:
        g = cost.guess
        if not g.input_tokens and not g.output_tokens:
            lines.append(f"{cost.model}: {cost.episodes} episodes, {g.source}")
            continue
        price = (f"x {_dollars(cost.usd_per_episode)} = {_dollars(cost.usd)}" if cost.usd_per_episode is not None
                 else "(no list price: not counted)")
        lines.append(f"{cost.model}: {cost.episodes} episodes x {g.input_tokens:,.0f} in + {g.output_tokens:,.0f} "
                     f"out tokens, {g.seconds:.0f} s ({g.source}) {price}")
    cap = estimate.cap_usd
    bound = f" (the Jobs at most {_dollars(cap)})" if cap else ""
    lines.append(f"total: about {_dollars(estimate.total_usd)}{bound}, at list prices")
    return lines


def _usd(model: str, guess: EpisodeGuess) -> float | None:
    if not guess.input_tokens and not guess.output_tokens:
        return None
    record = {"model": model, "turns": max(1, round(guess.turns)),
              "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "usage": {"input_tokens": round(guess.input_tokens), "output_tokens": round(guess.output_tokens)}}
    return episode_usd(record)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _dollars(value: float | None) -> str:
    if value is None:
        return "?"
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def _hours(hours: float) -> str:
    if hours >= 1:
        return f"{hours:.1f} h"
    return f"{hours * 60:.0f} min" if hours * 60 >= 1.5 else f"{hours * 3600:.0f} s"
