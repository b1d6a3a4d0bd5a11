"""The board's frontier (rollouts.frontier) drawn as one SVG document, 1200 x 630 (the size a share card takes):
every model at (dollars per episode on a log axis, mean reward) with its 95% interval, the Pareto frontier drawn
through the models no other beats on both, and the free players (baselines, people) in a band of their own at the
left marked "$0", since a log axis cannot show zero. `python -m agent board --plot` writes it (as SVG, or as PNG
through rollouts.raster) and the app serves it as `/board.svg` and `/board.png` (viewer/share/board_files.py).

A small writer in the spirit of viewer/chart/svg.py (which sits above the CLI, so is not used here): shapes and
text only, no script, no link, no style sheet; every text escaped by `text`; each point carries a <title>
naming its model and figures.
"""

from __future__ import annotations

import html
import itertools
import math
import re
from collections.abc import Sequence

from rollouts.frontier import Frontier, FrontierPoint

WIDTH, HEIGHT = 1200, 630
FONT = "Liberation Sans, Arial, Helvetica, sans-serif"
INK, MUTED, GRID, ACCENT = "#2a3f5f", "#555", "#e6e6e6", "#1f6fb2"
FRONTIER, FREE, OFF = "#d9480f", "#2E7D32", "#7a8ca3"
TOP, BOTTOM = 112, 520                 # the plot area's top and bottom
BAND = (96, 176)                       # the $0 band's left and right
LOG = (206, 1150)                      # the log axis's left and right
LABEL_CHARS = 30
_UNSAFE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u202a-\u202e\u2066-\u2069]")


def text(value: object) -> str:
    """Plain text as SVG text: control and direction-override characters dropped, markup characters escaped."""
    return html.escape(_UNSAFE.sub("", str(value)), quote=True)


def _cut(name: str, room: int = LABEL_CHARS) -> str:
    return name if len(name) <= room else name[: room - 1] + "…"


def usd_words(usd: float) -> str:
    if usd == 0:
        return "$0"
    return f"${usd:.4f}" if usd < 0.1 else f"${usd:.2f}"


def point_title(point: FrontierPoint) -> str:
    """What hovering a point says: the model and its figures (the same words on Browse's figure)."""
    interval = (f" (95% CI {point.low:.3f}–{point.high:.3f})" if point.low is not None and point.high is not None
                else " (n too small for an interval)")
    marks = [w for w, on in (("on the frontier", point.on_frontier), ("provisional", point.provisional)) if on]
    spent = ("$0 (a person: for reference, not on the frontier)" if point.person else
             "$0 (a baseline)" if point.free else f"{usd_words(point.usd)} per episode")
    return (f"{point.model}: mean reward {point.reward:.3f}{interval}; {spent}; {point.n} episode{'s' * (point.n != 1)}"
            + "".join(f"; {m}" for m in marks))


def log_range(costs: Sequence[float]) -> tuple[float, float]:
    """Whole decades around the priced models' dollars (one decade when they all cost the same)."""
    paid = [c for c in costs if c > 0]
    if not paid:
        return 1e-3, 1e-1
    low, high = math.floor(math.log10(min(paid))), math.ceil(math.log10(max(paid)))
    return 10.0 ** low, 10.0 ** (high if high > low else low + 1)


class _Axes:
    def __init__(self, costs: Sequence[float]) -> None:
        self.lo, self.hi = log_range(costs)

    def x(self, usd: float) -> float:
        if usd <= 0:
            return (BAND[0] + BAND[1]) / 2
        share = (math.log10(usd) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        return LOG[0] + share * (LOG[1] - LOG[0])

    @staticmethod
    def y(reward: float) -> float:
        return BOTTOM - max(0.0, min(1.0, reward)) * (BOTTOM - TOP)


def frontier_svg(figure: Frontier, *, title: str = "Cost against reward", subtitle: str = "") -> str:
    """The frontier as an SVG document (WIDTH x HEIGHT)."""
    axes = _Axes([p.usd for p in figure.points])
    parts = [_frame(axes), _frontier_line(figure, axes)]
    parts += [_point(p, axes) for p in figure.points]
    parts += _labels(figure.points, axes)
    parts.append(_legend(figure))
    if not figure.points:
        parts.append(f'<text x="{WIDTH / 2}" y="{(TOP + BOTTOM) / 2}" font-size="22" fill="{MUTED}" '
                     'text-anchor="middle">No model with a mean reward to place yet.</text>')
    head = (f'<text x="40" y="40" font-size="15" font-weight="bold" letter-spacing="2" fill="{ACCENT}">'
            'BERTH-PLANNING AGENT ARENA</text>'
            f'<text x="40" y="76" font-size="30" font-weight="bold" fill="{INK}">{text(title)}</text>'
            f'<text x="40" y="100" font-size="16" fill="{MUTED}">{text(subtitle)}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="{FONT}" role="img"><title>{text(title)}</title>'
            f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/><rect width="{WIDTH}" height="8" '
            f'fill="{ACCENT}"/>{head}{"".join(parts)}</svg>')


def _frame(axes: _Axes) -> str:
    """Grid, axes and ticks: reward 0 to 1 up the left, decades of dollars along the bottom, the $0 band."""
    out = []
    for k in range(6):
        value = k / 5
        y = axes.y(value)
        out.append(f'<line x1="{BAND[0]}" y1="{y:.1f}" x2="{LOG[1]}" y2="{y:.1f}" stroke="{GRID}"/>'
                   f'<text x="{BAND[0] - 8}" y="{y + 5:.1f}" font-size="14" fill="{MUTED}" '
                   f'text-anchor="end">{value:.1f}</text>')
    decade = axes.lo
    while decade <= axes.hi * 1.0001:
        x = axes.x(decade)
        out.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{BOTTOM}" stroke="{GRID}"/>'
                   f'<text x="{x:.1f}" y="{BOTTOM + 20}" font-size="14" fill="{MUTED}" '
                   f'text-anchor="middle">{text(_decade(decade))}</text>')
        decade *= 10
    middle = (BAND[0] + BAND[1]) / 2
    gap = (BAND[1] + LOG[0]) / 2
    out.append(f'<rect x="{BAND[0]}" y="{TOP}" width="{BAND[1] - BAND[0]}" height="{BOTTOM - TOP}" '
               'fill="#f3f7f2"/>'
               f'<text x="{middle}" y="{BOTTOM + 20}" font-size="14" font-weight="bold" fill="{FREE}" '
               'text-anchor="middle">$0</text>'
               # the axis break: two slashes between the $0 band and the log axis
               f'<path d="M{gap - 9} {BOTTOM + 6} l8 -12 M{gap - 1} {BOTTOM + 6} l8 -12" stroke="{MUTED}" '
               'stroke-width="1.5"/>'
               f'<line x1="{BAND[0]}" y1="{BOTTOM}" x2="{LOG[1]}" y2="{BOTTOM}" stroke="{MUTED}"/>'
               f'<line x1="{BAND[0]}" y1="{TOP}" x2="{BAND[0]}" y2="{BOTTOM}" stroke="{MUTED}"/>'
               f'<text x="{(LOG[0] + LOG[1]) / 2}" y="{BOTTOM + 42}" font-size="15" fill="{INK}" '
               'text-anchor="middle">dollars per episode (log scale)</text>'
               f'<text x="34" y="{(TOP + BOTTOM) / 2}" font-size="15" fill="{INK}" text-anchor="middle" '
               f'transform="rotate(-90 34 {(TOP + BOTTOM) / 2})">mean reward (95% CI)</text>')
    return "".join(out)


def _decade(value: float) -> str:
    if value >= 1:
        return f"${value:,.0f}"
    return f"${value:.{max(0, -math.floor(math.log10(value)))}f}"


def _frontier_line(figure: Frontier, axes: _Axes) -> str:
    """The frontier as steps: from each of its models the reward holds until the next, dearer and better one."""
    front = figure.frontier
    if not front:
        return ""
    points = [f"{axes.x(front[0].usd):.1f},{axes.y(front[0].reward):.1f}"]
    for before, after in itertools.pairwise(front):
        points.append(f"{axes.x(after.usd):.1f},{axes.y(before.reward):.1f}")
        points.append(f"{axes.x(after.usd):.1f},{axes.y(after.reward):.1f}")
    points.append(f"{LOG[1]:.1f},{axes.y(front[-1].reward):.1f}")
    return (f'<polyline points="{" ".join(points)}" fill="none" stroke="{FRONTIER}" stroke-width="2.5" '
            'stroke-dasharray="7 4" opacity="0.9"/>')


def _point(point: FrontierPoint, axes: _Axes) -> str:
    x, y = axes.x(point.usd), axes.y(point.reward)
    colour = FREE if point.free else FRONTIER if point.on_frontier else OFF
    bar = ""
    if point.low is not None and point.high is not None:
        y0, y1 = axes.y(point.low), axes.y(point.high)
        bar = (f'<line x1="{x:.1f}" y1="{y0:.1f}" x2="{x:.1f}" y2="{y1:.1f}" stroke="{colour}" stroke-width="2"/>'
               f'<line x1="{x - 5:.1f}" y1="{y0:.1f}" x2="{x + 5:.1f}" y2="{y0:.1f}" stroke="{colour}"/>'
               f'<line x1="{x - 5:.1f}" y1="{y1:.1f}" x2="{x + 5:.1f}" y2="{y1:.1f}" stroke="{colour}"/>')
    fill = "white" if point.provisional else colour  # hollow: provisional
    if point.person:
        mark = (f'<rect x="{x - 8:.1f}" y="{y - 8:.1f}" width="16" height="16" fill="{fill}" stroke="{colour}" '
                'stroke-width="2"/>')
    elif point.free:
        mark = (f'<path d="M{x:.1f} {y - 9:.1f} L{x + 9:.1f} {y:.1f} L{x:.1f} {y + 9:.1f} L{x - 9:.1f} {y:.1f} Z" '
                f'fill="{fill}" stroke="{colour}" stroke-width="2"/>')
    else:
        mark = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="7" fill="{fill}" stroke="{colour}" stroke-width="2"/>'
    return f'<g><title>{text(point_title(point))}</title>{bar}{mark}</g>'


def _labels(points: Sequence[FrontierPoint], axes: _Axes) -> list[str]:
    """Each point's model beside it, moved up or down until it clears the labels already placed."""
    placed: list[tuple[float, float, float]] = []  # (left, right, y) of each label
    out = []
    for point in points:
        # above and to the right: the frontier's steps run level out of a point to the right
        x, y = axes.x(point.usd) + 10, axes.y(point.reward) - 9
        name = _cut(point.model)
        width = len(name) * 13 * 0.55
        anchor = "start"
        if x + width > WIDTH - 8:
            x, anchor = x - 24, "end"
        left, right = (x, x + width) if anchor == "start" else (x - width, x)
        for shift in (0, 15, -15, 30, -30, 45, -45, 60, -60):
            if all(abs(y + shift - py) >= 14 or right < pl or left > pr for pl, pr, py in placed):
                y += shift
                break
        placed.append((left, right, y))
        weight = ' font-weight="bold"' if point.on_frontier else ""
        out.append(f'<text x="{x:.1f}" y="{y:.1f}" font-size="13" fill="{INK}" text-anchor="{anchor}"{weight}>'
                   f'{text(name)}</text>')
    return out


def _legend(figure: Frontier) -> str:
    y = HEIGHT - 26
    items = [f'<circle cx="46" cy="{y - 5}" r="6" fill="{FRONTIER}"/>'
             f'<text x="58" y="{y}" font-size="14" fill="{INK}">on the frontier: nothing cheaper is as good'
             '</text>',
             f'<circle cx="402" cy="{y - 5}" r="6" fill="{OFF}"/>'
             f'<text x="414" y="{y}" font-size="14" fill="{INK}">beaten on both</text>',
             f'<circle cx="538" cy="{y - 5}" r="6" fill="white" stroke="{OFF}" stroke-width="2"/>'
             f'<text x="550" y="{y}" font-size="14" fill="{INK}">provisional</text>',
             f'<path d="M660 {y - 13} l8 8 l-8 8 l-8 -8 Z" fill="{FREE}"/>'
             f'<text x="674" y="{y}" font-size="14" fill="{INK}">$0: a baseline (a log axis has no zero)</text>',
             f'<rect x="944" y="{y - 12}" width="13" height="13" fill="{FREE}"/>'
             f'<text x="963" y="{y}" font-size="14" fill="{INK}">a person, for reference</text>']
    if figure.unpriced:
        names = ", ".join(_cut(m, 40) for m in figure.unpriced[:4]) + (
            f" and {len(figure.unpriced) - 4} more" if len(figure.unpriced) > 4 else "")
        items.append(f'<text x="40" y="{HEIGHT - 6}" font-size="12" fill="{MUTED}">not drawn, no price known: '
                     f'{text(names)}</text>')
    return "".join(items)


def subtitle(lines: Sequence[dict]) -> str:
    """The figure's second line: how many models and episodes it is drawn from."""
    episodes = sum(int(line.get("n") or 0) for line in lines)
    return (f"{len(lines)} model{'s' * (len(lines) != 1)}, {episodes:,} episode{'s' * (episodes != 1)}; "
            "mean reward with its 95% interval against dollars per episode")
