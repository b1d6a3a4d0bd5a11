"""The leaderboard, one computation for Browse, the CLI's `board`, a run's board.md and a sweep's end: per model over
index rows, with the intervals a reader needs to trust a difference; and the task x model heatmap.

- FIGURES is every column of the board and how each door shows it (`Figure`): Browse's table, its API, the CLI's
  Markdown, compact table and JSON are all made from it.
- The point figures come from one SQL query over the engine's `rollouts` view (each aggregate figure's `sql`, over
  a model's rows, or over its tries per task, TASK_COUNTS, for pass^k); the
  arena's figures are the model's rating (rollouts.ratings), joined by `with_ratings` (the archive passes them).
- The intervals come from one function, `intervals`: a seeded percentile bootstrap over a model's episodes (rows
  in the view's order, so the same rows give the same interval wherever the board is drawn), and past
  BOOTSTRAP_MAX_EPISODES episodes the normal interval (mean ± 1.96 s/√n; the delta method for reward per dollar),
  from aggregates the query already has, so no row leaves DuckDB for a large model.
- The Markdown and JSON are rollouts.board_text's.

A new figure that is one aggregate is one row of FIGURES (its name, which is its JSON key, its SQL, its headers,
digits and width); nothing else changes for Browse, the API or the CLI to show it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rollouts.board_trust import Standard, marks, trust_columns, trust_of
from rollouts.filters import FRAME_ORDER
from rollouts.sample_size import PROVISIONAL, has_interval, provisional_why, ranked
from rollouts.schema import TIERS

if TYPE_CHECKING:  # the engine (and DuckDB) is the caller's: `python -m agent board --help` needs neither
    from rollouts.index.engine import IndexEngine
    from rollouts.ratings import Rating

BOOTSTRAP_RESAMPLES = 2000
# Resampling costs resamples x episodes; past this many episodes the bootstrap distribution of a mean is normal to
# within the digits we print (tests/rollouts/test_board.py checks the two agree).
BOOTSTRAP_MAX_EPISODES = 1000


@dataclass(frozen=True)
class Figure:
    """One column of the board, and how every door shows it: an aggregate over a model's rows (`sql`), or, with
    no `sql`, a field of its arena rating (ARENA_FIELDS) joined to its line. Its `name` is its key everywhere: in
    the board's lines, Browse's API and `python -m agent board --json`."""

    name: str
    sql: str | None
    header: str | None  # its column in the Markdown tables (--wide, a run's board.md); None: not there
    shown: str = "3"  # how the text shows it: a key of rollouts.board_text.SHOWN
    interval: tuple[str, str] | None = None  # the columns of its 95% interval, shown beside it (in JSON too)
    page: str | None = ""  # its header on Browse's board ("": `header`; None: not on the page)
    digits: int | None = None  # the digits Browse rounds it to (None: as `shown` says)
    width: str = "100px"  # its column's width on Browse's board
    page_interval: tuple[str, str] | None = None  # (header, width) of its interval's own column on Browse
    unknown: str = ""  # what Browse's interval column says when the figure itself is unknown
    over: str = "rows"  # what `sql` aggregates: a model's rows, or "tasks": its TASK_COUNTS, one row per task

    @property
    def page_header(self) -> str:
        return self.page or str(self.header)

    @property
    def page_digits(self) -> int | None:
        """The digits Browse rounds it to; None for a text figure (shown as it is)."""
        if self.shown == "text":
            return None
        return self.digits if self.digits is not None else {"int": 0, "0": 0, "1": 1, "%": 0, "$": 4}.get(
            self.shown, 3)


UNRATED = "unrated"  # in the arena interval's place on Browse; the notes under the board say why
# An arena figure's column -> its field of rollouts.ratings.Rating.
ARENA_FIELDS = {"arena": "rating", "arena_low": "ci_low", "arena_high": "ci_high", "arena_rank": "rank",
                "arena_note": "note", "arena_battles": "battles"}
# The trust marks (rollouts.board_trust): "verified", "provisional", both or blank, on every line.
MARK = "mark"
# pass^k (tau-bench's reliability over repeats): the chance that all k tries of a task succeed, estimated without
# bias from a task's n tries of which c succeeded as C(c,k)/C(n,k) (the share of its k-subsets of tries that all
# succeed), averaged over the model's tasks with at least k tries; None (blank, null) when no task has k tries,
# and `pass{k}_tasks` says over how many tasks it is. "Within 10%": feasible at a cost at most 1.1x the optimum, over
# the tasks whose optimum is known.
PASS_K = (1, 2, 3, 4)
WITHIN10 = "feasible AND cost IS NOT NULL AND optimal_cost IS NOT NULL AND cost <= 1.1 * optimal_cost"
# A model's tries per task, the table the figures `over="tasks"` aggregate (named `t` in the board's query).
TASK_COUNTS = ("SELECT model, task_id, count(*) AS tries, count(*) FILTER (WHERE feasible) AS feasible, "
               f"count(*) FILTER (WHERE {WITHIN10}) AS within10, bool_or(optimal_cost IS NOT NULL) AS optimum_known "
               "FROM m WHERE task_id IS NOT NULL GROUP BY model, task_id")


def pass_k_sql(successes: str, k: int, where: str = "true") -> str:
    """pass^k over TASK_COUNTS in percent: C(c,k)/C(n,k) = prod over i < k of (c-i)/(n-i), which is 0 once c < k."""
    ratio = " * ".join(f"({successes} - {i})::DOUBLE / (tries - {i})" for i in range(k))
    return f"100.0 * avg({ratio}) FILTER (WHERE tries >= {k} AND {where})"


def pass_k_figures() -> list[Figure]:
    """Per k: all k tries feasible, all k within 10% of the optimum; then over how many tasks each k is. Browse
    shows pass^1 and the largest k of each; every k is in the JSON and --wide."""
    top = PASS_K[-1]
    shown = {k: "" if k in (1, top) else None for k in PASS_K}
    return [*(Figure(f"pass{k}_feasible_pct", pass_k_sql("feasible", k), f"pass^{k} feasible", "%",
                     page=shown[k] and f"pass^{k} feasible", width="150px", over="tasks") for k in PASS_K),
            *(Figure(f"pass{k}_within10_pct", pass_k_sql("within10", k, "optimum_known"), f"pass^{k} ≤10%", "%",
                     page=shown[k] and f"pass^{k} ≤10%", width="132px", over="tasks") for k in PASS_K),
            *(Figure(f"pass{k}_tasks", f"count(*) FILTER (WHERE tries >= {k})", None, "int", page=None,
                     over="tasks") for k in PASS_K)]


# One order for every door: Browse's board, the Markdown tables, the JSON.
FIGURES: tuple[Figure, ...] = (
    Figure("n", "count(*)", "n", "int", width="56px"),
    Figure(MARK, None, "mark", "text", width="132px"),
    Figure("tasks", "count(DISTINCT task_id)", "tasks", "int", width="64px"),
    Figure("mean_reward", "avg(reward)", "mean reward (95% CI)", interval=("ci_low", "ci_high"),
           page="mean reward", width="112px", page_interval=("95% CI", "120px")),
    Figure("arena", None, "arena (95% CI)", "0", ("arena_low", "arena_high"), page="arena", width="72px",
           page_interval=("arena 95% CI", "128px"), unknown=UNRATED),
    Figure("arena_rank", None, "arena rank", "int", width="108px"),
    Figure("arena_note", None, None, "text", page=None),
    Figure("arena_battles", None, "battles", "int", page=None),
    *[Figure(f"mean_{t}", f"avg(reward) FILTER (WHERE difficulty = '{t}')", t, width="86px") for t in TIERS],
    Figure("beat_naive_pct", "100.0 * avg(beat_naive::DOUBLE)", "beat naive (95% CI)", "%",
           ("beat_naive_low", "beat_naive_high"), page="beat naive %", width="116px"),
    Figure("feasible_pct", "100.0 * avg(feasible::DOUBLE)", "feasible", "%", page="feasible %"),
    Figure("optimal_pct", "100.0 * avg((feasible AND cost IS NOT NULL AND optimal_cost IS NOT NULL AND "
                          "cost <= optimal_cost)::DOUBLE)", "optimal", "%", page="optimal %"),
    *pass_k_figures(),
    Figure("no_submit", "count(*) - sum(submitted::INT)", "no submit", "int", width="96px"),
    Figure("median_checks_to_feasible", "quantile_cont(checks_to_feasible, 0.5)", "median checks to feasible", "1",
           page="checks to feasible", width="150px"),
    Figure("mean_output_tokens", "avg(output_tokens)", "mean output tokens", "0", page="output tokens",
           width="126px"),
    Figure("usd_per_episode", "avg(usd)", "$ / episode", "$", width="110px"),
    Figure("reward_per_usd", "sum(reward) FILTER (WHERE usd IS NOT NULL) / nullif(sum(usd), 0)",
           "reward / $ (95% CI)", "1", ("reward_per_usd_low", "reward_per_usd_high"), page="reward / $"),
    Figure("median_seconds", "quantile_cont(seconds, 0.5)", "median s", "1", digits=0, width="96px"),
    Figure("median_tokens", "quantile_cont(tokens, 0.5)", "median tokens", "0", page=None),
    Figure("feasible_check_pct", "100.0 * count(checks_to_feasible) / count(*)", "feasible check", "%", page=None),
)
# What `intervals` needs beyond the figures: a spread, the naive-plan counts, the priced episodes' moments.
_MOMENTS = ("stddev_samp(reward) AS sd, count(beat_naive) AS naive_known, sum(beat_naive::INT) AS naive_hits, "
            "count(usd) AS priced, sum(usd) AS spent, var_samp(reward) FILTER (WHERE usd IS NOT NULL) AS var_reward, "
            "var_samp(usd) AS var_usd, covar_samp(reward, usd) AS covar, max(started) AS newest")
INTERVALS = ("ci_low", "ci_high", "beat_naive_low", "beat_naive_high", "reward_per_usd_low", "reward_per_usd_high")


def aggregates() -> list[Figure]:
    """The figures one query computes (read at call time, so a figure added to FIGURES counts at once)."""
    return [f for f in FIGURES if f.sql is not None]


def figure_kinds(figures: Sequence[Figure] | None = None) -> dict[str, type]:
    """Each column of the board's JSON objects (rollouts.board_text.board_json) -> its type, for these figures
    (default: every one): the model, each figure (int for counts, str for text, float otherwise), its interval's
    columns (float). The flat files and the dataset card's `boards` config are typed by it."""
    kinds: dict[str, type] = {"model": str}
    for f in FIGURES if figures is None else figures:
        kinds[f.name] = {"int": int, "text": str}.get(f.shown, float)
        kinds.update({name: float for name in f.interval or ()})
    return kinds


def columns(*, rated: bool = False) -> list[str]:
    """The columns of the board's lines: the model, the aggregates, the intervals; with `rated`, the arena's too."""
    arena = [name for name in ARENA_FIELDS if rated]
    return ["model", *(f.name for f in aggregates()), *INTERVALS, MARK, *arena]



def board(engine: IndexEngine, where: str = "true", params: Sequence[Any] = (), *, same_tasks: bool = False,
          latest: int | None = None, rated: Sequence[Rating] | None = None,
          standard: Standard | None = None) -> list[dict]:
    """One line per model over the rows matching `where` (`columns()`; unknown figures are NaN), best mean reward
    first. `same_tasks`: only the tasks every model played; `latest`: only the newest N rows of each model and
    task; `rated`: the arena ratings (rollouts.ratings) to join, each line then carrying ARENA_FIELDS (None for a
    model without a rating); `standard`: what a verified model is played under (rollouts.board_trust), without
    which no line is marked verified. Every line's MARK says "verified", "provisional", both or nothing."""
    head = matched(where, same_tasks, latest)
    kept = columns()
    # The card's aggregates ride in the same query: one scan of the rows for the figures and the marks.
    card, card_params = trust_columns(standard, card=False) if standard is not None else ("", [])
    with engine.lock:
        answer = engine.sql(_board_sql(head, card), [*params, *card_params])
        names = [d[0] for d in answer.description]
        lines = [dict(zip(names, row, strict=True)) for row in answer.fetchall()]
        # The bootstrap's episodes: every row of a small model; the priced rows of a large one with few priced.
        small = [s["model"] for s in lines if s["n"] <= BOOTSTRAP_MAX_EPISODES]
        few = [s["model"] for s in lines if s["n"] > BOOTSTRAP_MAX_EPISODES and 1 <= s["priced"] <= BOOTSTRAP_MAX_EPISODES]
        episodes = engine.sql(f"{head} SELECT model, reward, usd FROM m WHERE list_contains(?, model) OR "
                              f"(list_contains(?, model) AND usd IS NOT NULL) ORDER BY {FRAME_ORDER}",
                              [*params, small, few]).fetchall() if small or few else []
    samples: dict[str, list[tuple[float, float | None]]] = {}
    for model, reward, usd in episodes:
        samples.setdefault(model, []).append((reward, usd))
    out = []
    for stat in lines:
        drawn = samples.get(stat["model"])
        line = {name: _number(stat[name]) for name in kept if name in stat and name != "model"}
        out.append({"model": str(stat["model"]), **line, "n": int(stat["n"]), "tasks": int(stat["tasks"]),
                    "no_submit": int(stat["no_submit"]),
                    **intervals(stat, drawn)})
    battles = None if rated is None else {r.model: r.battles for r in rated}
    trusts = {str(stat["model"]): trust_of(stat, battles) for stat in lines} if standard is not None else {}
    for line in out:
        facts = trusts.get(line["model"])
        line[MARK] = marks(facts, standard) if facts is not None else (
            PROVISIONAL if provisional_why(int(_number(line["tasks"], 0)), None if battles is None else
                                           battles.get(line["model"], 0)) else "")
    return sort_board(out if rated is None else with_ratings(out, rated), "mean_reward")


def _board_sql(head: str, card: str = "") -> str:
    """One query for every aggregate figure: those over a model's rows (and `card`, the reproducibility card's
    aggregates, when asked), joined to those over its TASK_COUNTS."""
    over_rows = ", ".join([*(f"{f.sql} AS {f.name}" for f in aggregates() if f.over == "rows"), *([card] if card else [])])
    over_tasks = ", ".join(f"{f.sql} AS {f.name}" for f in aggregates() if f.over == "tasks")
    rows = f"SELECT model, {over_rows}, {_MOMENTS} FROM m GROUP BY model"
    if not over_tasks:
        return f"{head} {rows} ORDER BY newest DESC, model"
    return (f"{head}, a AS ({rows}), t AS ({TASK_COUNTS}), p AS (SELECT model, {over_tasks} FROM t GROUP BY model) "
            "SELECT a.*, p.* EXCLUDE (model) FROM a LEFT JOIN p USING (model) ORDER BY newest DESC, model")


def with_ratings(lines: list[dict], rated: Sequence[Rating]) -> list[dict]:
    """The board's lines with each model's arena rating (ARENA_FIELDS; None where it has none)."""
    by_model = {r.model: r for r in rated}
    return [{**line, **{column: getattr(by_model[line["model"]], field) if line["model"] in by_model else None
                        for column, field in ARENA_FIELDS.items()}} for line in lines]


def matched(where: str, same_tasks: bool, latest: int | None) -> str:
    """A WITH clause naming the board's rows `m`: the filtered rows, on the tasks every model played if asked."""
    rows = f"SELECT * FROM rollouts WHERE ({where}) AND model IS NOT NULL"
    if latest is not None:
        rows += (" QUALIFY row_number() OVER (PARTITION BY model, task_id ORDER BY started DESC NULLS LAST, "
                 f"episode_id DESC) <= {int(latest)}")
    if not same_tasks:
        return f"WITH m AS ({rows})"
    return (f"WITH f AS ({rows}), m AS (SELECT * FROM f WHERE task_id IN (SELECT task_id FROM f GROUP BY task_id "
            "HAVING count(DISTINCT model) = (SELECT count(DISTINCT model) FROM f)))")


def sort_board(lines: list[dict], by: str, *, descending: bool = True) -> list[dict]:
    """The board sorted by one of its columns, more episodes first among equals, unknown values last; the models
    too small to rank (rollouts.sample_size) after the ranked ones, sorted the same way among themselves."""
    if by not in (sortable := columns(rated=True)):
        raise ValueError(f"cannot sort the board by {by!r}: one of {', '.join(sortable)}")
    if by == "model":
        ordered = sorted(lines, key=lambda line: line["model"], reverse=descending)
    else:
        known = [line for line in lines if not _missing(line[by])]
        ordered = sorted(known, key=lambda line: (-line[by] if descending else line[by], -line["n"]))
        ordered += [line for line in lines if _missing(line[by])]
    return [line for line in ordered if ranked(line["n"])] + [line for line in ordered if not ranked(line["n"])]


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


# -- the intervals ---------------------------------------------------------------------------------------------


def intervals(stat: dict, episodes: list[tuple[float, float | None]] | None) -> dict[str, float]:
    """The board's 95% intervals for one model: its mean reward, its share beating the naive plan, its reward per
    dollar. `stat` is the model's aggregates (FIGURES and the moments); `episodes` its (reward, usd) rows in the
    view's order when the model is small enough to resample (or, for a large model with few priced episodes, those)."""
    n = int(stat["n"])
    mean, nan = _number(stat["mean_reward"]), float("nan")
    rewards = np.array([r for r, _ in episodes or []], dtype=float)
    picks = None
    if not has_interval(n):  # rollouts.sample_size: one episode is no interval
        ci = (nan, nan)
    elif n <= BOOTSTRAP_MAX_EPISODES and len(rewards) == n:
        picks = np.random.default_rng(0).integers(0, n, size=(BOOTSTRAP_RESAMPLES, n))
        ci = _bootstrap_mean(rewards, picks)
    else:
        half = 1.96 * _number(stat["sd"], 0.0) / math.sqrt(n)
        ci = (mean - half, mean + half)
    naive_known = int(stat["naive_known"])
    naive = _proportion_ci(int(_number(stat["naive_hits"], 0)), naive_known) if has_interval(naive_known) \
        else (nan, nan)
    priced, spent = int(stat["priced"]), _number(stat["spent"], 0.0)
    per_usd = (nan, nan)
    if priced > BOOTSTRAP_MAX_EPISODES and spent > 0:
        ratio = _number(stat["reward_per_usd"])
        spread = stat["var_reward"] + ratio ** 2 * stat["var_usd"] - 2 * ratio * stat["covar"]
        half = 1.96 * math.sqrt(max(spread, 0.0)) / (math.sqrt(priced) * spent / priced)
        per_usd = (ratio - half, ratio + half)
    elif has_interval(priced) and spent > 0 and episodes:
        costs = np.array([np.nan if u is None else u for _, u in episodes], dtype=float)
        known = ~np.isnan(costs)
        rows = np.array([r for r, _ in episodes], dtype=float)
        per_usd = _ratio_ci(rows[known], costs[known], picks if known.all() else None)
    return {"ci_low": ci[0], "ci_high": ci[1], "beat_naive_low": 100.0 * naive[0],
            "beat_naive_high": 100.0 * naive[1], "reward_per_usd_low": per_usd[0], "reward_per_usd_high": per_usd[1]}


def _bootstrap_mean(values: np.ndarray, picks: np.ndarray) -> tuple[float, float]:
    low, high = np.percentile(values[picks].mean(axis=1), [2.5, 97.5])
    return float(low), float(high)


def _proportion_ci(hits: int, n: int) -> tuple[float, float]:
    """Resampling n yes/no outcomes gives a binomial count, so the bootstrap draws the count directly: the same
    distribution, at no cost per episode."""
    if n == 0:
        return float("nan"), float("nan")
    shares = np.random.default_rng(0).binomial(n, hits / n, size=BOOTSTRAP_RESAMPLES) / n
    low, high = np.percentile(shares, [2.5, 97.5])
    return float(low), float(high)


def _ratio_ci(numerator: np.ndarray, denominator: np.ndarray, picks: np.ndarray | None) -> tuple[float, float]:
    """sum(numerator) / sum(denominator), bootstrapped over episodes (`picks`: resamples already drawn)."""
    n = len(numerator)
    if not has_interval(n) or denominator.sum() <= 0:
        return float("nan"), float("nan")
    if picks is None:
        picks = np.random.default_rng(0).integers(0, n, size=(BOOTSTRAP_RESAMPLES, n))
    spent = denominator[picks].sum(axis=1)
    ratios = numerator[picks].sum(axis=1)[spent > 0] / spent[spent > 0]
    low, high = np.percentile(ratios, [2.5, 97.5])
    return float(low), float(high)


def _number(value: Any, default: float = float("nan")) -> float:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return default
    return float(value)


# -- the heatmap ---------------------------------------------------------------------------------------------------


@dataclass
class Heatmap:
    tasks: list[tuple[str, str]]            # (tier, task id), tiers easiest first, then task id
    models: list[str]                       # most rollouts first
    mean: list[list[float | None]]          # [task][model]
    count: list[list[int]]
    best: list[list[str | None]]            # the episode id a click on the cell opens


def heatmap(engine: IndexEngine, where: str = "true", params: Sequence[Any] = ()) -> Heatmap:
    """Mean reward per task and model; each cell's best rollout is its highest reward, the newest of equals."""
    head = f"WITH m AS (SELECT * FROM rollouts WHERE ({where}) AND model IS NOT NULL AND task_id IS NOT NULL)"
    with engine.lock:
        cells = engine.sql(f"""{head} SELECT task_id, model, avg(reward), count(*),
            arg_max(episode_id, row(reward, coalesce(started, ''), -grp)) FROM m GROUP BY task_id, model""",
                           params).fetchall()
        tiers = dict(engine.sql(f"""{head} SELECT task_id, arg_max(difficulty, row(coalesce(started, ''), -grp))
            FILTER (WHERE difficulty IS NOT NULL) FROM m GROUP BY task_id""", params).fetchall())
        models = [r[0] for r in engine.sql(f"{head} SELECT model FROM m GROUP BY model ORDER BY count(*) DESC, "
                                           "model", params).fetchall()]
    if not cells:
        return Heatmap([], [], [], [], [])
    rank = {tier: i for i, tier in enumerate(TIERS)}
    tasks = sorted(((str(tier), task) for task, tier in tiers.items()),
                   key=lambda p: (rank.get(p[0], len(rank)), p[1]))
    by_cell = {(task, model): (mean, size, best) for task, model, mean, size, best in cells}
    empty = (None, 0, None)
    return Heatmap(tasks, models,
                   [[_cell_mean(by_cell.get((t, m), empty)[0]) for m in models] for _, t in tasks],
                   [[int(by_cell.get((t, m), empty)[1]) for m in models] for _, t in tasks],
                   [[by_cell.get((t, m), empty)[2] for m in models] for _, t in tasks])


def _cell_mean(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
