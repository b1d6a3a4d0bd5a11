"""The share image of a rollout: a 1200 x 630 PNG (the size Open Graph and X's large card show) with the final
berth chart and what a reader wants first: the model, the task and its tier, the reward, feasible or not, and the
cost against the proven optimum when known.

It is built as data, never by parsing anyone's text as markup: the chart is the app's own scene drawn by the SVG
output (viewer/chart/svg.py), the facts are cleaned, cut to fit and escaped by that output's `text`, and the card's
SVG is rasterised by resvg (viewer/chart/raster.py: no browser, no network, no system library) with the bundled Liberation
Sans and no system font, so the same rollout gives the same picture on any machine. A glyph the font lacks (CJK,
emoji) is left out. `share_png` draws in this process; the share pages' server draws `share_svg` in its raster
helper instead (viewer/share/routes.py), since resvg holds the GIL while it draws.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from viewer.chart import berth_scene, read_plan
from viewer.chart.raster import FONT_DIR, FONT_FILES, svg_png
from viewer.chart.scene import SHIP_FILL, VIOLATION_LINE, clean
from viewer.chart.svg import FONT, INK, MUTED, svg_element, text

__all__ = ["CARD_H", "CARD_W", "FONT_DIR", "FONT_FILES", "CardFacts", "cost_words", "share_png",
           "share_svg"]

CARD_W, CARD_H = 1200, 630
CHART_PLOT = (960, 300)         # the chart's plot area before it is scaled into the card
CHART_TOP = 190
PAD = 40
FEASIBLE = "#2E7D32"
CHAR_EM = 0.58                  # a character's width in ems (Liberation Sans, mixed text), to cut texts to fit


@dataclass(frozen=True)
class CardFacts:
    """What the card says besides the chart; None where unknown."""

    model: str
    task_id: str
    tier: str | None
    ships: int | None
    reward: float | None
    feasible: bool | None
    cost: int | None
    optimal_cost: int | None
    status: str | None = None   # said instead of feasible or not (an episode still running)
    step: str | None = None     # the step drawn, when not the final plan ("draft 2 of 5 · turn 4")


def share_svg(task: Mapping[str, Any] | None, plan: Any, *, model: str, reward: float | None = None,
              feasible: bool | None = None, cost: int | None = None, optimal_cost: int | None = None,
              task_id: str | None = None, tier: str | None = None, check: Any = None,
              status: str | None = None, step: str | None = None) -> str:
    """The share card as an SVG document (what `share_png` rasterises).

    `task` may be None (a task this Space does not have): the card then has the facts without a chart. Facts not
    given are taken from the task (id, tier, ships, optimum) and from checking `plan` (feasible, cost); a rollout's
    index row (`rollouts.schema.index_row`) has them all: `model`, `reward`, `feasible`, `cost`, `optimal_cost`.
    `status` (e.g. "still running") is said in a grey pill instead of feasible or not; `step` names the draft
    drawn when it is not the final plan (a step's card: its reward, feasibility and cost are that draft's).
    """
    view = read_plan(task, plan, check) if task is not None else None
    result = view.result if view is not None else None
    reference = (task or {}).get("reference") or {}
    facts = CardFacts(
        model=clean(model, 200), task_id=clean(task_id if task_id is not None else (task or {}).get("task_id", ""), 100),
        tier=clean(tier if tier is not None else (task or {}).get("difficulty") or "", 40) or None,
        ships=len(task.get("ships") or []) if task is not None else None, reward=reward,
        feasible=feasible if feasible is not None else (result.feasible if result is not None else None),
        cost=cost if cost is not None else (result.cost if result is not None else None),
        optimal_cost=optimal_cost if optimal_cost is not None else reference.get("optimal_cost"),
        status=clean(status, 40) if status else None, step=clean(step, 60) if step else None)
    parts = _header(facts)
    if task is not None:
        scene = berth_scene(task, plan, check=result, title="", cranes=False, size=CHART_PLOT)
        parts.append(svg_element(scene, PAD / 2, CHART_TOP, CARD_W - PAD, CARD_H - CHART_TOP - 10))
    else:
        parts.append(f'<text x="{CARD_W / 2}" y="{CHART_TOP + 200}" font-size="24" fill="{MUTED}" '
                     f'text-anchor="middle">This task is not in the arena\'s pack: no chart to draw.</text>')
    summary = text(f"{facts.model} on {facts.task_id}")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{CARD_W}" height="{CARD_H}" '
            f'viewBox="0 0 {CARD_W} {CARD_H}" font-family="{FONT}" role="img"><title>{summary}</title>'
            f'<rect width="{CARD_W}" height="{CARD_H}" fill="white"/>'
            f'<rect width="{CARD_W}" height="8" fill="{SHIP_FILL}"/>{"".join(parts)}</svg>')


def share_png(task: Mapping[str, Any] | None, plan: Any, *, model: str, **facts: Any) -> bytes:
    """The share card as a 1200 x 630 PNG, drawn in this process (`facts`: as for `share_svg`)."""
    return svg_png(share_svg(task, plan, model=model, **facts))


def _fit(value: Any, size: float, width: float) -> str:
    """`value` cleaned and cut to about `width` px at font size `size`."""
    return clean(value, max(1, int(width / (size * CHAR_EM))))


def _number(value: float) -> str:
    shown = f"{value:.4f}".rstrip("0")
    return shown + "0" if shown.endswith(".") else shown


def _header(facts: CardFacts) -> list[str]:
    """The brand, the model, the task line and the result line, each cut to the card's width."""
    width = CARD_W - 2 * PAD
    task_line = " · ".join([_fit(facts.task_id, 24, 560)]
                           + ([f"tier {_fit(facts.tier, 24, 200)}"] if facts.tier else [])
                           + ([f"{facts.ships} ships"] if facts.ships is not None else [])
                           + ([facts.step] if facts.step else []))
    parts = [
        f'<text x="{PAD}" y="40" font-size="15" font-weight="bold" letter-spacing="2" fill="{SHIP_FILL}">'
        f"BERTH-PLANNING AGENT ARENA</text>",
        f'<text x="{PAD}" y="88" font-size="40" font-weight="bold" fill="{INK}">{text(_fit(facts.model, 40, width))}'
        f"</text>",
        f'<text x="{PAD}" y="126" font-size="24" fill="{MUTED}">{text(task_line)}</text>']
    x = float(PAD)
    if facts.reward is not None:
        reward = f"reward {_number(float(facts.reward))}"
        parts.append(f'<text x="{x}" y="172" font-size="30" font-weight="bold" fill="{INK}">{text(reward)}</text>')
        x += len(reward) * 30 * 0.53 + 20   # digits run narrower than mixed text
    if facts.status or facts.feasible is not None:
        word, colour = ((facts.status, MUTED) if facts.status else
                        ("feasible", FEASIBLE) if facts.feasible else ("infeasible", VIOLATION_LINE))
        pill = len(word) * 22 * CHAR_EM + 28
        parts.append(f'<rect x="{x:.0f}" y="145" width="{pill:.0f}" height="36" rx="18" fill="{colour}"/>'
                     f'<text x="{x + pill / 2:.0f}" y="170" font-size="22" font-weight="bold" fill="white" '
                     f'text-anchor="middle">{text(word)}</text>')
        x += pill + 20
    costs = cost_words(facts.cost, facts.optimal_cost)
    if costs:
        parts.append(f'<text x="{x:.0f}" y="171" font-size="24" fill="{MUTED}">{text(costs)}</text>')
    return parts


def cost_words(cost: Any, optimal_cost: Any) -> str:
    """`cost 687 · optimum 114 (+502.6 %)`, or what of it is known (the card's line, the share page's too)."""
    words = []
    if isinstance(cost, int):
        words.append(f"cost {cost:,}")
    if isinstance(optimal_cost, int):
        gap = ""
        if isinstance(cost, int) and optimal_cost > 0:
            gap = " (optimal)" if cost == optimal_cost else f" ({(cost - optimal_cost) / optimal_cost * 100:+.1f} %)"
        words.append(f"optimum {optimal_cost:,}{gap}")
    return " · ".join(words)
