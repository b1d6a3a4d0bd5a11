"""The berth chart as an SVG document, drawn from a scene (viewer/chart/scene.py): for pages served without
Gradio's JavaScript (the share page) and, rasterised, for the share image (viewer/chart/card.py).

The document is inert: only shapes, text and <title> tooltips (no script, no link, no style sheet, no id that two
charts on one page could share), every text escaped by `text`, the one place a scene's text becomes SVG text. A
viewBox lets it scale to any width (a phone's). The plot area is the scene's `plot_width` x `plot_height`, the
size its labels were fitted to, so labels fit their boxes at any scale. Where the app's chart shows a hover (a
ship, its broken rules, a block, a mark), the SVG has a tooltip. Emoji icons are left out: a rasteriser with one
font has no glyph for them.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from viewer.chart.scene import (
    CRANE_LINE,
    GHOST_LINE,
    IN_USE_FILL,
    SHIP_FILL,
    UNSAFE,
    VIOLATION_LINE,
    Box,
    Cranes,
    LegendItem,
    Panel,
    Scene,
    Tip,
    tip_text,
)

FONT = "Liberation Sans, Arial, Helvetica, sans-serif"   # the share image bundles Liberation Sans
INK, MUTED, GRID = "#2a3f5f", "#444", "#e6e6e6"
LEFT, RIGHT = 56, 16                  # margins beside the plot area, for the section numbers and their title
CRANES_PX, LEGEND_ROW_PX = 80, 18
CHAR_EM = 0.56                        # a character's width in ems, to lay out the legend and the notes


def text(value: Any) -> str:
    """Plain text as SVG text: unsafe characters dropped, markup characters escaped."""
    return html.escape(UNSAFE.sub("", str(value)), quote=True)


def _title(value: Tip) -> str:
    return f"<title>{text(tip_text(value))}</title>" if value else ""


@dataclass
class _Plot:
    """A plot area in pixels and the data range it shows."""

    left: float
    top: float
    width: float
    height: float
    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float

    @property
    def bottom(self) -> float:
        return self.top + self.height

    def x(self, hour: float) -> float:
        return self.left + (hour - self.x_lo) * self.width / (self.x_hi - self.x_lo or 1)

    def y(self, value: float) -> float:
        return self.top + (self.y_hi - value) * self.height / (self.y_hi - self.y_lo or 1)

    def box(self, x0: float, x1: float, y0: float, y1: float) -> str | None:
        """`x y width height` attributes of a data rectangle cut to the plot area (None when nothing is left)."""
        left, right = max(self.left, self.x(min(x0, x1))), min(self.left + self.width, self.x(max(x0, x1)))
        top, bottom = max(self.top, self.y(max(y0, y1))), min(self.bottom, self.y(min(y0, y1)))
        if right <= left or bottom <= top:
            return None
        return f'x="{left:.1f}" y="{top:.1f}" width="{right - left:.1f}" height="{bottom - top:.1f}"'


def to_svg(scene: Scene) -> str:
    """The scene as a standalone SVG document (a string)."""
    width, height, body = _draw(scene)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="{FONT}" role="img">{body}</svg>')


def svg_element(scene: Scene, x: float, y: float, width: float, height: float) -> str:
    """The scene as a group to place inside another SVG, scaled to fit `width` x `height` at (x, y), centred
    across and at the top. A transformed group, not a nested <svg>: resvg clips a nested viewport through a mask,
    which costs the share image a third of its drawing time."""
    natural_w, natural_h, body = _draw(scene)
    scale = min(width / natural_w, height / natural_h)
    left = x + (width - natural_w * scale) / 2
    return f'<g transform="translate({left:.1f} {y:.1f}) scale({scale:.4f})">{body}</g>'


def _draw(scene: Scene) -> tuple[int, int, str]:
    width = LEFT + scene.plot_width + RIGHT
    out = [f"<title>{text(scene.title)}</title>" if scene.title else "", ""]   # [1]: the background, sized last
    top = 40 if scene.title else 10
    if scene.title:
        out.append(f'<text x="8" y="24" font-size="13" fill="{INK}">{text(scene.title)}</text>')
    plots = []
    for i, panel in enumerate(scene.panels):
        if panel.subtitle:
            out.append(f'<text x="{LEFT + scene.plot_width / 2:.1f}" y="{top + 12}" font-size="12" fill="{INK}" '
                       f'text-anchor="middle">{text(panel.subtitle)}</text>')
            top += 20
        plot = _Plot(LEFT, top, scene.plot_width, scene.plot_height, scene.x.lo, scene.x.hi, scene.y.lo, scene.y.hi)
        out += _quay(scene, panel, plot)
        plots.append(plot)
        top = plot.bottom + (28 if i + 1 < len(scene.panels) else 0)
    if scene.cranes is not None:
        crane_plot = _Plot(LEFT, top + 10, scene.plot_width, CRANES_PX, scene.x.lo, scene.x.hi, 0,
                           max([1, *scene.cranes.use, *scene.cranes.available]) * 1.15)
        out += _crane_panel(scene, scene.cranes, crane_plot)
        plots.append(crane_plot)
    bottom = plots[-1].bottom
    out += [f'<text x="{plots[-1].x(t):.1f}" y="{bottom + 14:.1f}" font-size="10" fill="{MUTED}" '
            f'text-anchor="middle">{text(label)}</text>'
            for t, label in zip(scene.x.ticks, scene.x.labels, strict=True) if label and scene.x.lo <= t <= scene.x.hi]
    out.append(f'<text x="{LEFT + scene.plot_width / 2:.1f}" y="{bottom + 32:.1f}" font-size="11" fill="{MUTED}" '
               f'text-anchor="middle">{text(scene.x.title)}</text>')
    legend, rows = _legend(scene.legend, bottom + 52, width)
    out += legend
    height = math.ceil(bottom + 50 + rows * LEGEND_ROW_PX)
    out[1] = f'<rect width="{width}" height="{height}" fill="white"/>'
    return width, height, "".join(out)


# -- a quay panel --------------------------------------------------------------------------------------------------

def _quay(scene: Scene, panel: Panel, plot: _Plot) -> list[str]:
    """One plan over the quay, stacked as plotly stacks it: the quay's facts, the grid, ships, published
    positions and arrows, labels, marks, outages, notes."""
    # data-plot: the panel's pixels and the data range they show, for the Play tab's editor to turn a drag into
    # hours and sections (viewer/play/planner.js).
    out = [f'<rect class="plot" x="{plot.left}" y="{plot.top:.1f}" width="{plot.width}" height="{plot.height}" '
           f'fill="white" stroke="{GRID}" data-plot="{plot.left} {plot.top:.1f} {plot.width} {plot.height} '
           f'{plot.x_lo} {plot.x_hi} {plot.y_lo} {plot.y_hi}"/>']
    out += _boxes(panel.boxes, plot, "below")
    out += [f'<line x1="{plot.x(t):.1f}" y1="{plot.top:.1f}" x2="{plot.x(t):.1f}" y2="{plot.bottom:.1f}" '
            f'stroke="{GRID}"/>' for t in scene.x.ticks if scene.x.lo < t < scene.x.hi]
    out += _boxes(panel.boxes, plot, "between")
    out += _moves(panel, plot)
    # 9 px, not plotly's 10: the labels were fitted to Open Sans widths, and Arial's (Liberation's) run wider.
    out += [f'<text x="{plot.x(lb.x):.1f}" y="{plot.y(lb.y) + 3.2:.1f}" font-size="9" fill="{lb.colour}" '
            f'text-anchor="middle" pointer-events="none"{_ship_key(lb.key) if lb.group == "ships" else ""}>'
            f'{text(lb.text)}</text>' for lb in panel.labels if lb.text]
    for marks in panel.marks:
        out += [f'<path d="{_symbol(marks.symbol, plot.x(x), plot.y(y))}" fill="{marks.colour}" stroke="white">'
                f'{_title(hover)}</path>' for x, y, hover in marks.points]
    out += _boxes(panel.boxes, plot, "above")
    out += _notes(panel, plot)
    out += _section_axis(scene, plot)
    return out


def _boxes(boxes: Sequence[Box], plot: _Plot, layer: str) -> list[str]:
    out = []
    for box in boxes:
        if box.layer != layer:
            continue
        where = plot.box(box.x0, box.x1, box.y0, box.y1)
        if where is None:
            continue
        style = f' stroke="{box.edge}" stroke-width="{box.edge_width}"' if box.edge else ""
        style += ' stroke-dasharray="2,2"' if box.dash else ""
        # fill- and stroke-opacity, not opacity: resvg draws an element with `opacity` on a canvas of its own.
        style += f' fill-opacity="{box.opacity}" stroke-opacity="{box.opacity}"' if box.opacity != 1 else ""
        # The class says what the box is (ship, tail, closed, alongside, wind, outage), for a page's CSS and tests.
        kind, _, key = box.name.partition(":")
        ship = _ship_key(key) if kind in ("ship", "tail") else ""
        out.append(f'<rect class="{text(kind)}"{ship} {where} fill="{box.fill}"{style}>{_title(box.tip)}</rect>')
        if box.label:
            cx, cy = plot.x((box.x0 + box.x1) / 2), plot.y((box.y0 + box.y1) / 2)
            turn = f' transform="rotate(-90 {cx:.1f} {cy:.1f})"' if box.label_vertical else ""
            out.append(f'<text x="{cx:.1f}" y="{cy + 3.5:.1f}" font-size="10" fill="{box.label_colour}" '
                       f'text-anchor="middle" pointer-events="none"{turn}>{text(box.label)}</text>')
    return out


def _ship_key(key: Any) -> str:
    """The ship a shape belongs to, as an attribute: its box, its tail and its label move together in an editor."""
    return f' data-ship="{int(key)}"' if str(key).lstrip("-").isdigit() else ""


def _moves(panel: Panel, plot: _Plot) -> list[str]:
    """A dashed outline where each moved ship was published, and an arrow from there to where it is now."""
    out = []
    for move in panel.moves:
        where = plot.box(*move.ghost)
        if where is not None:
            out.append(f'<rect {where} fill="none" stroke="{GHOST_LINE}" stroke-dasharray="4,3"/>')
        (x0, y0), (x1, y1) = (plot.x(move.start[0]), plot.y(move.start[1])), (plot.x(move.end[0]), plot.y(move.end[1]))
        out.append(f'<path d="M{x0:.1f},{y0:.1f}L{x1:.1f},{y1:.1f}" stroke="{GHOST_LINE}" fill="none"/>'
                   f'<path d="{_arrow_head(x0, y0, x1, y1)}" fill="{GHOST_LINE}"/>')
    return out


def _arrow_head(x0: float, y0: float, x1: float, y1: float, size: float = 7) -> str:
    length = math.hypot(x1 - x0, y1 - y0) or 1
    ux, uy = (x1 - x0) / length, (y1 - y0) / length
    bx, by = x1 - ux * size, y1 - uy * size
    return (f"M{x1:.1f},{y1:.1f}L{bx - uy * size / 2:.1f},{by + ux * size / 2:.1f}"
            f"L{bx + uy * size / 2:.1f},{by - ux * size / 2:.1f}Z")


def _star() -> list[tuple[float, float]]:
    return [((6 if i % 2 == 0 else 2.6) * math.sin(i * math.pi / 5), -(6 if i % 2 == 0 else 2.6) * math.cos(i * math.pi / 5))
            for i in range(10)]


_SYMBOLS = {"triangle-left": [(-5.0, 0.0), (4.0, -5.0), (4.0, 5.0)],
            "diamond": [(0.0, -6.0), (5.0, 0.0), (0.0, 6.0), (-5.0, 0.0)],
            "star": _star(), "square": [(-5.0, -5.0), (5.0, -5.0), (5.0, 5.0), (-5.0, 5.0)]}


def _symbol(name: str, cx: float, cy: float) -> str:
    return "M" + "L".join(f"{cx + dx:.1f},{cy + dy:.1f}" for dx, dy in _SYMBOLS.get(name, _SYMBOLS["square"])) + "Z"


def _notes(panel: Panel, plot: _Plot) -> list[str]:
    """Notes on a light backing, at the top edge (one row each) or the bottom edge of the panel."""
    out = []
    for note in panel.notes:
        x = plot.x(note.x) + 2
        y = plot.top + 13 + 14 * note.row if note.at == "top" else plot.bottom - plot.height * 0.04 - 3
        out.append(f'<rect x="{x - 1:.1f}" y="{y - 10:.1f}" width="{len(note.text) * 10 * CHAR_EM + 4:.1f}" '
                   f'height="13" fill="white" fill-opacity="0.7"/><text x="{x:.1f}" y="{y:.1f}" font-size="10" '
                   f'fill="{note.colour}">{text(note.text)}</text>')
    return out


def _section_axis(scene: Scene, plot: _Plot) -> list[str]:
    step = max(1, scene.y.dtick)
    out = [f'<text x="{plot.left - 6}" y="{plot.y(s) + 3.5:.1f}" font-size="10" fill="{MUTED}" '
           f'text-anchor="end">{s}</text>' for s in range(math.ceil(plot.y_lo), math.floor(plot.y_hi) + 1)
           if s % step == 0]
    cy = plot.top + plot.height / 2
    out.append(f'<text x="16" y="{cy:.1f}" font-size="11" fill="{MUTED}" text-anchor="middle" '
               f'transform="rotate(-90 16 {cy:.1f})">{text(scene.y.title)}</text>')
    return out


# -- cranes and legend ---------------------------------------------------------------------------------------------

def _steps(values: Sequence[int], plot: _Plot) -> str:
    """Line commands of a step line through `values` (hour h holds values[h] until hour h + 1)."""
    parts, last = [], None
    for hour, value in enumerate(values):
        if value != last:
            parts.append(f"H{plot.x(hour):.1f}V{plot.y(value):.1f}" if parts else f"M{plot.x(hour):.1f},{plot.y(value):.1f}")
            last = value
    parts.append(f"H{plot.x(max(0, len(values) - 1)):.1f}")
    return "".join(parts)


def _crane_panel(scene: Scene, cranes: Cranes, plot: _Plot) -> list[str]:
    """Cranes in use (filled) against cranes available (dotted), and the hours over the limit (red dots)."""
    out = [f'<rect x="{plot.left}" y="{plot.top:.1f}" width="{plot.width}" height="{plot.height}" fill="white" '
           f'stroke="{GRID}"/>']
    out += [f'<line x1="{plot.x(t):.1f}" y1="{plot.top:.1f}" x2="{plot.x(t):.1f}" y2="{plot.bottom:.1f}" '
            f'stroke="{GRID}"/>' for t in scene.x.ticks if scene.x.lo < t < scene.x.hi]
    if cranes.use:
        use = _steps(cranes.use, plot)
        out.append(f'<path d="{use}V{plot.bottom:.1f}H{plot.x(0):.1f}Z" fill="{IN_USE_FILL}"/>'
                   f'<path d="{use}" fill="none" stroke="{SHIP_FILL}" stroke-width="1.5"/>'
                   f'<path d="{_steps(cranes.available, plot)}" fill="none" stroke="{CRANE_LINE}" '
                   f'stroke-dasharray="2,2"/>')
    out += [f'<circle cx="{plot.x(h):.1f}" cy="{plot.y(cranes.use[h]):.1f}" r="2.5" fill="{VIOLATION_LINE}"/>'
            for h in cranes.over]
    top = max(cranes.available, default=0)
    out += [f'<text x="{plot.left - 6}" y="{plot.y(v) + 3.5:.1f}" font-size="10" fill="{MUTED}" '
            f'text-anchor="end">{v}</text>' for v in sorted({0, top})]
    cy = plot.top + plot.height / 2
    out.append(f'<text x="16" y="{cy:.1f}" font-size="11" fill="{MUTED}" text-anchor="middle" '
               f'transform="rotate(-90 16 {cy:.1f})">cranes</text>')
    return out


def _swatch(item: LegendItem, x: float, y: float) -> str:
    """The legend's picture of an entry, 12 px wide, centred on height `y`."""
    if item.kind == "box":
        return (f'<rect x="{x:.1f}" y="{y - 5.5:.1f}" width="11" height="11" fill="{item.fill}" '
                f'stroke="{item.edge}" stroke-width="2"/>')
    if item.kind == "ghost":
        return f'<rect x="{x:.1f}" y="{y - 5:.1f}" width="12" height="10" fill="none" stroke="{GHOST_LINE}" stroke-dasharray="3,2"/>'
    if item.kind == "arrow":
        return (f'<path d="M{x:.1f},{y:.1f}H{x + 12:.1f}" stroke="{GHOST_LINE}"/>'
                f'<path d="{_arrow_head(x, y, x + 13, y, 6)}" fill="{GHOST_LINE}"/>')
    if item.kind == "mark":
        return f'<path d="{_symbol(item.symbol, x + 6, y)}" fill="{item.fill}" stroke="white"/>'
    if item.kind == "dot":
        return f'<circle cx="{x + 6:.1f}" cy="{y:.1f}" r="2.5" fill="{item.fill}"/>'
    dash = ' stroke-dasharray="2,2"' if item.dash else ""
    return f'<path d="M{x:.1f},{y:.1f}H{x + 14:.1f}" stroke="{item.fill}" stroke-width="1.5"{dash}/>'


def _legend(items: Sequence[LegendItem], top: float, width: float) -> tuple[list[str], int]:
    """The legend in rows under the chart; returns its parts and its number of rows."""
    out, x, row = [], float(LEFT), 0
    for item in items:
        size = 18 + len(item.label) * 10 * CHAR_EM + 14
        if x + size > width - RIGHT and x > LEFT:
            x, row = float(LEFT), row + 1
        y = top + row * LEGEND_ROW_PX
        out.append(_swatch(item, x, y) + f'<text x="{x + 18:.1f}" y="{y + 3.5:.1f}" font-size="10" '
                                          f'fill="{MUTED}">{text(item.label)}</text>')
        x += size
    return out, (row + 1 if items else 0)
