"""Arena ratings: a Bradley–Terry fit over the battles every task's rollouts make, on the Elo scale.

A battle: on one task, two models that both have rollouts there; the higher mean reward on that task wins, equal
means (within TIE_TOLERANCE: means computed in different orders differ in the last bits) are a tie, which counts
half a win to each side. Every task makes a battle of every pair of its models.

The fit (`ratings`):

- Bradley–Terry maximum likelihood, P(i beats j) = 1 / (1 + exp(θj − θi)), with ties as half wins (FastChat's
  `compute_bt` form), found by Newton's method on the log-likelihood, all fits of one call at once. Each step is
  capped (MAX_STEP) and halved while it would lower the likelihood, so it converges from any start.
- A weak prior: each θ (natural-log strength) is N(0, PRIOR_SD²), PRIOR_SD = 10 (≈1,700 Elo points). On real data
  it moves a rating by well under a point (a pair of models with 20 battles: a quarter of a point); it is there
  for the cases where the likelihood has no maximum: a model that won (or lost) every battle, or a group of models
  that beat another group in every battle, whose MLE is at infinity. Such a model gets a finite rating that says
  "far above (below) everyone it met" (one win over the anchor and nothing else: about 1,680), how far set by the
  prior rather than the data, and a note saying so when it won or lost every battle itself.
- The Elo scale: rating = 400 · log10(strength) = 400 / ln 10 · θ, shifted so ANCHOR (`baseline:naive`) is
  ANCHOR_RATING (1000) when it fought a battle, otherwise so the rated models' mean is 1000.
- A model with battles on fewer than rollouts.sample_size.MIN_RANKED tasks is not rated (a rating and a rank
  from one task would look as sure as any other): its battles are counted and left out of the fit, so they move
  no other model's rating either, and a note says so. The anchor needs as many to be the anchor.
- Only models linked to the anchor by a chain of shared tasks are rated (without an anchor: the largest such
  group). Ratings of two groups that never met have no common scale: a number for the other group would be the
  prior's guess, so those models get no rating and a note saying why, as does a model that shares no task with
  another model.
- 95% intervals: BOOTSTRAP_ROUNDS resamples of the tasks that hold a battle (with replacement, seeded, so the
  same cells give the same intervals), each fitted again; the 2.5th and 97.5th percentiles of each model's
  rating. Resampling tasks rather than battles keeps the battles of one task together (they come from the same
  rewards, so they are not independent). A resample where a model fought no battle linked to the anchor leaves
  it out of that model's percentiles. With an anchor, the anchor's interval is its point: intervals are relative
  to it. With a handful of tasks the bootstrap understates the spread (tasks all alike in every resample; a single
  shared task gives a point), so a narrow interval means little until there are tens of tasks.
- Rank, "upper bound" as the arenas show it: 1 + the number of rated models whose interval lies wholly above this
  model's (their ci_low > this ci_high).

Input: cells (task_id, model, mean_reward), one per task and model, which `cells_sql` aggregates in DuckDB from
the index view `rollouts` (rollouts.index.engine), so a million rows never leave the engine: only tasks x models
cells do. Votes on matches (rollouts.matches) never enter a rating.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from rollouts.sample_size import (
    MIN_RANKED,
    PROVISIONAL,
    arena_minimum,
    arena_too_few,
    provisional_note,
    provisional_why,
)

if TYPE_CHECKING:  # the caller's connection: the dataset card reads this module's battle columns, without DuckDB
    import duckdb

ANCHOR = "baseline:naive"
ANCHOR_RATING = 1000.0
ELO_PER_NAT = 400.0 / math.log(10.0)  # Elo points per unit of natural-log strength
BOOTSTRAP_ROUNDS = 100
TIE_TOLERANCE = 1e-9
PRIOR_SD = 10.0
MAX_STEP = 2.0  # natural-log units per Newton step, at most
MAX_ITERATIONS = 100
CONVERGED = 1e-9  # a step this small (natural-log units) ends the fit
HALVINGS = 20
CHUNK_CELLS = 1 << 22  # tasks x pairs held at once while counting battles (32 MB per float64 array)

CELLS_SQL = ("SELECT task_id, model, avg(reward) AS mean_reward FROM rollouts "
             "WHERE ({where}) AND task_id IS NOT NULL AND model IS NOT NULL AND reward IS NOT NULL GROUP BY ALL")


def cells_sql(where: str = "true") -> str:
    """The query that turns the index view's rows matching `where` into one cell per task and model."""
    return CELLS_SQL.format(where=where)


def fetch_cells(con: duckdb.DuckDBPyConnection, where: str = "true", params: Sequence[Any] = ()) -> pa.Table:
    """`cells_sql(where)` run with `params` on a connection that has the `rollouts` view, as an Arrow table.
    Through rollouts.index.engine.IndexEngine: `engine.sql(cells_sql(where), params).fetchnumpy()` under
    `engine.lock` (its `where(filters)` gives both), a mapping `ratings` takes as it is."""
    return con.sql(cells_sql(where), params=list(params)).to_arrow_table()


@dataclass(frozen=True)
class Rating:
    """One model's line. `rating`, `ci_low`, `ci_high` and `rank` are None when it has no rating (`note` says
    why; a rated model that won or lost every battle has a note too); battles, wins, losses and ties count every
    battle it fought, rated or not."""

    model: str
    rating: float | None
    ci_low: float | None
    ci_high: float | None
    rank: int | None
    battles: int
    wins: int
    losses: int
    ties: int
    note: str | None = None


@dataclass
class _Battles:
    models: list[str]
    pairs: tuple[np.ndarray, np.ndarray]  # (i, j), i < j: every pair of models
    wins: np.ndarray  # (fits, pairs): battles i won over j, ties as halves, weighted by each fit's task counts
    games: np.ndarray  # (fits, pairs): battles between i and j, likewise weighted
    outcome: np.ndarray  # (3, pairs): unweighted counts of i winning, tying, losing against j
    tasks: np.ndarray  # (models,): tasks on which each model fought a battle, fitted or not
    fitted: np.ndarray  # (models,): battles on enough tasks to enter the fit (rollouts.sample_size)


def ratings(cells: pa.Table | Mapping[str, Any], *, anchor: str = ANCHOR, rounds: int = BOOTSTRAP_ROUNDS,
            seed: int = 0, min_tasks: int = MIN_RANKED) -> list[Rating]:
    """Every model of `cells` (columns task_id, model, mean_reward), rated models best first, then the unrated
    ones by name. Seeded: the same cells (in any order) and seed give the same intervals. `min_tasks`: the tasks
    with a battle a model needs to be rated (the project's minimum; a test of the fit alone may lower it)."""
    battles = _battles(cells, rounds, seed, min_tasks)
    if battles is None:
        return []
    models, m = battles.models, len(battles.models)
    wins = np.zeros((battles.wins.shape[0], m, m))
    i, j = battles.pairs
    wins[:, i, j], wins[:, j, i] = battles.wins, battles.games - battles.wins
    theta = _fit(wins)
    games = wins + wins.transpose(0, 2, 1)
    linked = _linked(games > 0)
    has_anchor = anchor in models and bool(games[0, models.index(anchor)].any())
    everyone = np.ones(m, dtype=bool)
    ref = models.index(anchor) if has_anchor else _largest_group(linked[0], games[0], everyone)
    rated = linked[:, ref] & (games[0].sum(1) > 0)  # (fits, models): the anchor's group in each fit
    if not has_anchor:  # each resample: its own largest group among the models rated on all tasks
        refs = [_largest_group(linked[f], games[f], rated[0]) for f in range(1, len(wins))]
        rated[1:] = linked[np.arange(1, len(wins)), refs] & rated[0]
    # Differences first, so the anchor comes out at exactly ANCHOR_RATING.
    elo = ELO_PER_NAT * (theta - (theta[:, [ref]] if has_anchor else _masked_mean(theta, rated)[:, None]))
    elo = np.where(rated, elo + ANCHOR_RATING, np.nan)
    return _lines(battles, elo, rated[0], _note(anchor if has_anchor else None))


def _note(anchor: str | None) -> str:
    if anchor:
        return f"no rating: no chain of shared tasks links it to {anchor}"
    return "no rating: it shares no task, directly or through other models, with the larger group rated"


def _battles(cells: pa.Table | Mapping[str, Any], rounds: int, seed: int, min_tasks: int) -> _Battles | None:
    """The battles of every task, counted for the full data and for each bootstrap resample of the tasks."""
    task_ids, model_ids, means = (_column(cells, name) for name in ("task_id", "model", "mean_reward"))
    means = means.astype(float)
    known = ~np.isnan(means)
    models, model_code = np.unique(model_ids.astype(str), return_inverse=True)
    if not len(models):
        return None
    tasks, task_code = np.unique(task_ids[known].astype(str), return_inverse=True)
    m = len(models)
    # One mean per task and model (duplicates are averaged), NaN where the model has none.
    flat = task_code * m + model_code[known]
    total = np.bincount(flat, weights=means[known], minlength=len(tasks) * m)
    count = np.bincount(flat, minlength=len(tasks) * m)
    with np.errstate(invalid="ignore", divide="ignore"):
        table = (total / count).reshape(len(tasks), m)
    table = table[(count.reshape(len(tasks), m) > 0).sum(1) >= 2]  # tasks with at least one battle
    fitted = _enough_tasks(~np.isnan(table), min_tasks)
    pairs = np.triu_indices(m, 1)
    both = fitted[pairs[0]] & fitted[pairs[1]]
    # The resamples draw from the tasks holding a fitted battle; the others weigh nothing in any fit.
    fit_tasks = np.flatnonzero((~np.isnan(table) & fitted).sum(1) >= 2)
    weights = np.zeros((1 + rounds, len(table)))
    weights[:, fit_tasks] = _task_weights(len(fit_tasks), rounds, seed)
    wins = np.zeros((len(weights), len(pairs[0])))
    games = np.zeros_like(wins)
    outcome = np.zeros((3, len(pairs[0])))
    step = max(1, CHUNK_CELLS // max(1, len(pairs[0])))
    for start in range(0, len(table), step):
        part = table[start:start + step]
        diff = part[:, pairs[0]] - part[:, pairs[1]]  # NaN where either model is missing
        met = ~np.isnan(diff)
        won, tied = diff > TIE_TOLERANCE, np.abs(diff) <= TIE_TOLERANCE
        lost = diff < -TIE_TOLERANCE
        chunk = weights[:, start:start + step]
        wins += chunk @ ((won + 0.5 * tied) * both)
        games += chunk @ (met & both)
        outcome += np.stack([won.sum(0), tied.sum(0), lost.sum(0)])
    return _Battles([str(model) for model in models], pairs, wins, games, outcome, (~np.isnan(table)).sum(0),
                    fitted)


BATTLE_COLUMNS = ("task_id", "model_a", "model_b", "mean_a", "mean_b", "winner")


def battles(cells: pa.Table | Mapping[str, Any]) -> list[dict]:
    """Every battle the cells make, one row each (BATTLE_COLUMNS): on a task, two models (model_a before model_b
    by name), their mean rewards there and the winner (`a`, `b` or `tie`, by the rule of the module doc). All of
    them, including those of models with too few tasks to be rated, which the fit leaves out."""
    by_task: dict[str, dict[str, list[float]]] = {}
    for task, model, mean in zip(*(_column(cells, name) for name in ("task_id", "model", "mean_reward")),
                                 strict=True):
        if mean is not None and not np.isnan(float(mean)):
            by_task.setdefault(str(task), {}).setdefault(str(model), []).append(float(mean))
    out = []
    for task in sorted(by_task):
        means = {model: sum(values) / len(values) for model, values in by_task[task].items()}
        for a, b in itertools.combinations(sorted(means), 2):
            diff = means[a] - means[b]
            winner = "tie" if abs(diff) <= TIE_TOLERANCE else "a" if diff > 0 else "b"
            out.append(dict(zip(BATTLE_COLUMNS, (task, a, b, means[a], means[b], winner), strict=True)))
    return out


def _enough_tasks(present: np.ndarray, min_tasks: int) -> np.ndarray:
    """(models,): the models with battles on at least `min_tasks` tasks among models that have as many (leaving
    one out can leave another short, so until nothing changes)."""
    fitted = np.ones(present.shape[1], dtype=bool)
    while True:
        kept = present & fitted
        enough = (kept & (kept.sum(1, keepdims=True) >= 2)).sum(0) >= min_tasks
        if (enough == fitted).all():
            return fitted
        fitted = enough


def _task_weights(tasks: int, rounds: int, seed: int) -> np.ndarray:
    """(1 + rounds, tasks): each task once for the fit on all the data, then how many times each resample drew it
    (a multinomial draw of `tasks` tasks is a resample with replacement, as counts)."""
    if not tasks:
        return np.zeros((1 + rounds, 0))
    drawn = np.random.default_rng(seed).multinomial(tasks, np.full(tasks, 1.0 / tasks), size=rounds)
    return np.vstack([np.ones(tasks), drawn])


def _column(cells: pa.Table | Mapping[str, Any], name: str) -> np.ndarray:
    values = cells[name]
    if isinstance(values, pa.ChunkedArray | pa.Array):
        return values.to_numpy(zero_copy_only=False)
    return np.asarray(values, dtype=object if name != "mean_reward" else float)


def _fit(wins: np.ndarray) -> np.ndarray:
    """θ (fits, models): the posterior mode of each fit's wins matrix (wins[f, i, j]: i's wins over j, ties as
    halves) under the N(0, PRIOR_SD²) prior, by capped and damped Newton steps on all fits at once."""
    fits, m, _ = wins.shape
    games = wins + wins.transpose(0, 2, 1)
    scored = wins.sum(2)
    prior = 1.0 / PRIOR_SD ** 2
    theta = np.zeros((fits, m))
    value = _log_posterior(theta, wins, prior)
    eye = np.eye(m)
    for _ in range(MAX_ITERATIONS):
        p = _sigmoid(theta[:, :, None] - theta[:, None, :])
        grad = scored - (games * p).sum(2) - prior * theta
        weight = games * p * (1.0 - p)
        # The negative Hessian: a weighted graph Laplacian plus the prior, so positive definite.
        curvature = eye * (weight.sum(2) + prior)[:, :, None] - weight
        step = np.linalg.solve(curvature, grad[:, :, None])[:, :, 0]
        size = np.abs(step).max(1)
        step *= np.minimum(1.0, MAX_STEP / np.maximum(size, 1e-300))[:, None]
        scale = np.ones(fits)
        for _ in range(HALVINGS):
            trial = theta + scale[:, None] * step
            trial_value = _log_posterior(trial, wins, prior)
            worse = trial_value < value - 1e-12 * np.abs(value)
            if not worse.any():
                break
            scale = np.where(worse, scale / 2, scale)
        theta, value = trial, trial_value
        if (np.abs(scale[:, None] * step)).max() < CONVERGED:
            break
    return theta


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(x, -500.0, 500.0)))


def _log_posterior(theta: np.ndarray, wins: np.ndarray, prior: float) -> np.ndarray:
    diff = theta[:, :, None] - theta[:, None, :]
    return -(wins * np.logaddexp(0.0, -diff)).sum((1, 2)) - 0.5 * prior * (theta ** 2).sum(1)


def _linked(met: np.ndarray) -> np.ndarray:
    """linked[f, i, j]: a chain of battles joins i and j in fit f (each model is linked to itself)."""
    reach = met | np.eye(met.shape[1], dtype=bool)
    while True:
        wider = (reach.astype(np.float32) @ reach.astype(np.float32)) > 0
        if (wider == reach).all():
            return reach
        reach = wider


def _largest_group(linked: np.ndarray, games: np.ndarray, among: np.ndarray) -> int:
    """A model of the largest linked group of models `among` that fought (most models, then most battles, then the
    first by name)."""
    candidates = among & (games.sum(1) > 0)
    members = linked & candidates[None, :]
    size = members.sum(1) * candidates
    battles = members.astype(float) @ games.sum(1)
    return int(np.lexsort((-np.arange(len(size)), battles, size))[-1])


def _masked_mean(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    count = mask.sum(1)
    return np.where(count > 0, np.where(mask, values, 0.0).sum(1) / np.maximum(count, 1), 0.0)


def _lines(battles: _Battles, elo: np.ndarray, rated: np.ndarray, unlinked: str) -> list[Rating]:
    """One Rating per model from its point rating (elo[0]) and its resamples (elo[1:])."""
    m = len(battles.models)
    i, j = battles.pairs
    won, tied, lost = battles.outcome
    wins = np.bincount(i, won, m) + np.bincount(j, lost, m)
    losses = np.bincount(i, lost, m) + np.bincount(j, won, m)
    ties = np.bincount(i, tied, m) + np.bincount(j, tied, m)
    low, high = np.full(m, np.nan), np.full(m, np.nan)
    for k in np.flatnonzero(rated):
        resampled = elo[1:, k][~np.isnan(elo[1:, k])]
        low[k], high[k] = np.percentile(resampled, [2.5, 97.5]) if len(resampled) else (elo[0, k], elo[0, k])
    ranks = upper_bound_ranks(low, high)
    lines = []
    for k, model in enumerate(battles.models):
        fought = int(wins[k] + losses[k] + ties[k])
        counts = {"battles": fought, "wins": int(wins[k]), "losses": int(losses[k]), "ties": int(ties[k])}
        if rated[k]:
            one_sided = "won" if not losses[k] and not ties[k] else "lost" if not wins[k] and not ties[k] else None
            note = f"{one_sided} every battle: how far it stands from the others is the prior's guess" \
                if one_sided else None
            lines.append(Rating(model, float(elo[0, k]), float(low[k]), float(high[k]), int(ranks[k]), **counts,
                                note=note))
        else:
            note = (arena_too_few(int(battles.tasks[k])) if fought and not battles.fitted[k] else unlinked if fought
                    else "no rating: it shares no task with another model")
            lines.append(Rating(model, None, None, None, None, **counts, note=note))
    return sorted(lines, key=lambda r: (r.rating is None, -(r.rating or 0.0), r.model))


def upper_bound_ranks(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """1 + the number of models whose interval lies wholly above each one's (NaN intervals count for nothing)."""
    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    above = low[None, :] > high[:, None]  # above[k, other]: other's interval is wholly above k's
    return 1 + above.sum(1)


def ratings_json(lines: Sequence[Rating]) -> list[dict]:
    """`python -m agent ratings --json`: {model, rating, ci_low, ci_high, rank, battles, wins, losses, ties, note,
    provisional} per model, ratings to one decimal (null without a rating); `provisional`: too few battles to read
    its place as more than a first look (rollouts.sample_size)."""
    out = []
    for line in lines:
        item = asdict(line)
        for key in ("rating", "ci_low", "ci_high"):
            item[key] = None if item[key] is None else round(item[key], 1)
        item[PROVISIONAL] = provisional_why(None, line.battles) is not None
        out.append(item)
    return out


def ratings_notes(lines: Sequence[Rating], anchor: str = ANCHOR) -> list[str]:
    """What a reader of the ratings must know, for Browse and `python -m agent ratings` alike: the scale's real
    anchor (or that it is centred on the mean), who is rated and how the rank counts, the ranks several models
    share and why, and each model without a rating and why."""
    if not lines:
        return []
    rated = [r for r in lines if r.rating is not None]
    notes = []
    if any(r.model == anchor for r in rated):
        notes.append(f"scale: 1000 = {anchor}, the anchor (its interval is its point: the others' are relative to it)")
    elif rated:
        notes.append(f"scale: centred on the mean, 1000 = the mean of the {len(rated)} rated model"
                     f"{'s' * (len(rated) != 1)} ({anchor}, the usual anchor, has no rating here)")
    notes.append(f"{arena_minimum()}; its rank is 1 + the number of rated models whose 95% interval lies wholly "
                 "above its own")
    for rank in sorted({r.rank for r in rated}):
        shared = [r.model for r in rated if r.rank == rank]
        if len(shared) > 1:
            above = f"{rank - 1} rated model{'s' * (rank != 2)} lie{'s' * (rank == 2)} wholly above each of them, " \
                if rank > 1 else "no rated model lies wholly above them, "
            notes.append(f"{', '.join(shared[:-1])} and {shared[-1]} share rank {rank}: {above}and their own "
                         "intervals overlap, so the data cannot say which is ahead")
    notes += [f"{r.model}: {r.note} ({r.battles} battle{'s' * (r.battles != 1)})" for r in lines
              if r.rating is None and r.note]
    if any(provisional_why(None, r.battles) for r in rated):
        notes.append(provisional_note())
    return notes


def ratings_markdown(lines: Sequence[Rating]) -> str:
    """The ratings as a Markdown table, then the notes (`ratings_notes`), one a line."""
    rows = ["| rank | model | rating (95% CI) | battles | wins | losses | ties |", "|---:|---|---:|---:|---:|---:|---:|"]
    rows += [f"| {r.rank} | {r.model} | {r.rating:.0f} ({r.ci_low:.0f}-{r.ci_high:.0f})"
             f"{' ' + PROVISIONAL if provisional_why(None, r.battles) else ''} | {r.battles} | {r.wins} "
             f"| {r.losses} | {r.ties} |" for r in lines if r.rating is not None]
    notes = ratings_notes(lines)
    return "\n".join([*rows, *([""] if notes else []), *notes]) + "\n"
