"""The board's cost x reward frontier, as data: every model at (dollars per episode, mean reward) with the board's
95% interval, and the Pareto frontier through the models no other beats on both (cheaper or as cheap and better
or as good, one of them strictly). HAL's holistic agent leaderboard draws agents this way: a column of dollars
hides that one model costs a hundred times another for a point more.

The points are the board's own figures (rollouts.board: `usd_per_episode`, `mean_reward`, `ci_low`, `ci_high`),
so the figure on Browse, `/board.png` and `python -m agent board --plot` say what the board's table says. A
baseline or a person spends no dollars: they sit at $0 on their own marker (a log axis has no 0). A baseline takes
part in the frontier as the cheapest player there is (a model worth paying for beats it); a person does not,
since a person's time is not free, only unpriced: people are drawn for reference. A model whose dollars are
unknown (self-hosted, an unlisted price) is not on the figure; `Frontier.unpriced` names it. Drawing is elsewhere: rollouts.board_plot (SVG) and
viewer.browse.frontier_figure (Plotly).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rollouts.board import MARK
from rollouts.record import Record
from rollouts.sample_size import PROVISIONAL


@dataclass(frozen=True)
class FrontierPoint:
    """One model on the figure: its board figures, and whether it is on the frontier."""

    model: str
    usd: float          # dollars per episode; 0.0 for a free player
    reward: float       # mean reward
    low: float | None   # its 95% interval (None: too few episodes for one)
    high: float | None
    n: int
    free: bool          # a baseline or a person: drawn at $0 on its own marker
    on_frontier: bool
    person: bool = False  # drawn for reference, never on the frontier
    provisional: bool = False  # rollouts.sample_size: too few tasks (or battles) to take as settled


@dataclass(frozen=True)
class Frontier:
    points: list[FrontierPoint]   # cheapest first, then best
    unpriced: list[str]           # models with no dollars to place them by

    @property
    def frontier(self) -> list[FrontierPoint]:
        """The frontier's models from the cheapest up (each better than the one before)."""
        return [p for p in self.points if p.on_frontier]


def pareto(points: Sequence[tuple[float, float]]) -> list[bool]:
    """For each (cost, value): whether no other point has cost <= and value >= with one of them strictly (lower
    cost is better, higher value is better). Equal points do not beat each other, so both stay. O(n log n): sweep
    the points cheapest first; within one cost only the best value can stand, and only if it beats every
    strictly cheaper point."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1]))
    on = [False] * len(points)
    best_cheaper = -math.inf   # the best value among points strictly cheaper than the current cost
    k = 0
    while k < len(order):
        cost = points[order[k]][0]
        group = []
        while k < len(order) and points[order[k]][0] == cost:
            group.append(order[k])
            k += 1
        top = points[group[0]][1]
        for i in group:
            on[i] = points[i][1] == top and top > best_cheaper
        best_cheaper = max(best_cheaper, top)
    return on


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def frontier(lines: Sequence[dict]) -> Frontier:
    """The figure's points from the board's lines (rollouts.board.board, or `board --json`'s objects)."""
    placed: list[tuple[dict, float, float, bool, bool]] = []
    unpriced = []
    for line in lines:
        reward = _number(line.get("mean_reward"))
        if reward is None:
            continue
        view = Record({"model": str(line["model"])})
        free = view.baseline or view.human
        usd = 0.0 if free else _number(line.get("usd_per_episode"))
        if usd is None:
            unpriced.append(str(line["model"]))
            continue
        placed.append((line, usd, reward, free, view.human))
    players = [i for i, (*_, person) in enumerate(placed) if not person]
    front = dict(zip(players, pareto([placed[i][1:3] for i in players]), strict=True))
    points = [FrontierPoint(model=str(line["model"]), usd=usd, reward=reward, low=_number(line.get("ci_low")),
                            high=_number(line.get("ci_high")), n=int(line.get("n") or 0), free=free,
                            on_frontier=front.get(i, False), person=person,
                            provisional=PROVISIONAL in str(line.get(MARK) or ""))
              for i, (line, usd, reward, free, person) in enumerate(placed)]
    points.sort(key=lambda p: (p.usd, -p.reward, p.model))
    return Frontier(points, unpriced)


def point_json(point: FrontierPoint) -> dict[str, Any]:
    """One point as `board --plot`'s and the API's JSON give it (the board's own keys where it has them)."""
    return {"model": point.model, "usd_per_episode": point.usd, "mean_reward": point.reward, "ci_low": point.low,
            "ci_high": point.high, "n": point.n, "free": point.free, "person": point.person,
            "on_frontier": point.on_frontier, "provisional": point.provisional}
