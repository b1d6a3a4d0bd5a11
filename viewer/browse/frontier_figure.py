"""The board's cost x reward frontier (rollouts.frontier) as Browse's Plotly figure: the same points, intervals,
frontier and $0 band as `/board.png` and `python -m agent board --plot` (rollouts.board_plot), with a hover (a tap
on a phone) naming each model and its figures in the SVG's own words (`point_title`).

A log axis cannot show $0, so the figure has two panels sharing the reward axis: a narrow "$0" band at the left
for the baselines and the people, and the log axis of dollars for the priced models; the legend says so. It fits
a 390 px phone: the legend goes under the plot, the margins are narrow and the names show on hover, the frontier's
own models named beside their points.
"""

from __future__ import annotations

import html
import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from rollouts.board_plot import FREE, FRONTIER, OFF, log_range, point_title
from rollouts.frontier import Frontier, FrontierPoint
from viewer.markdown import escape_cell

HEIGHT = 440
NAME_CHARS = 22


def _short(model: str) -> str:
    """The model without its provider prefix, cut to fit beside a point on a phone."""
    name = model.partition(":")[2] or model
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "…"


def _hover(point: FrontierPoint) -> str:
    """The SVG's title of the point, one figure a line so a phone's label fits; Plotly reads a few HTML tags in
    it, so the model's name (untrusted) goes in escaped."""
    return "<br>".join(html.escape(part.strip(), quote=False) for part in point_title(point).replace(": mean", ";mean", 1)
                       .split(";"))


def _trace(points: list[FrontierPoint], *, name: str, colour: str, symbol: str, free: bool,
           labels: bool = False) -> go.Scatter:
    def bars(upper: bool) -> list[float]:
        return [((p.high - p.reward) if upper else (p.reward - p.low)) if p.low is not None and p.high is not None
                else 0.0 for p in points]

    return go.Scatter(
        x=["$0"] * len(points) if free else [p.usd for p in points], y=[p.reward for p in points],
        mode="markers+text" if labels else "markers", name=name,
        text=[html.escape(_short(p.model), quote=False) for p in points] if labels else None, textposition="top right",
        textfont={"size": 11}, hovertext=[_hover(p) for p in points], hoverinfo="text",
        marker={"color": ["white" if p.provisional else colour for p in points], "symbol": symbol, "size": 11,
                "line": {"color": colour, "width": 2}},
        error_y={"type": "data", "array": bars(True), "arrayminus": bars(False), "color": colour,
                 "thickness": 1.5, "width": 4},
        customdata=[p.model for p in points], cliponaxis=False, showlegend=False)


def _key(name: str, colour: str, symbol: str, fill: str | None = None) -> go.Scatter:
    """A legend entry alone: a trace's own entry would take its first point's look (hollow when provisional)."""
    return go.Scatter(x=[None], y=[None], mode="markers", name=name, hoverinfo="skip",
                      marker={"color": fill or colour, "symbol": symbol, "size": 10,
                              "line": {"color": colour, "width": 2}})


def frontier_figure(figure: Frontier) -> go.Figure:
    """The frontier as a Plotly figure (two panels: $0, and dollars on a log axis)."""
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, column_widths=[0.14, 0.86], horizontal_spacing=0.02)
    free = [p for p in figure.points if p.free]
    paid = [p for p in figure.points if not p.free]
    for group, name, symbol in (([p for p in free if not p.person], "$0: a baseline (a log axis has no zero)",
                                 "diamond"),
                                ([p for p in free if p.person], "a person, $0: for reference", "square")):
        if group:
            fig.add_trace(_trace(group, name=name, colour=FREE, symbol=symbol, free=True), row=1, col=1)
    for group, name, colour in (([p for p in paid if p.on_frontier], "on the frontier", FRONTIER),
                                ([p for p in paid if not p.on_frontier], "beaten on both", OFF)):
        if group:
            fig.add_trace(_trace(group, name=name, colour=colour, symbol="circle", free=False,
                                 labels=colour == FRONTIER), row=1, col=2)
    keys = [("$0: a baseline (a log axis has no zero)", FREE, "diamond", None, any(not p.person for p in free)),
            ("a person, $0: for reference", FREE, "square", None, any(p.person for p in free)),
            ("on the frontier", FRONTIER, "circle", None, any(p.on_frontier for p in paid)),
            ("beaten on both", OFF, "circle", None, any(not p.on_frontier for p in paid)),
            ("hollow: provisional", OFF, "circle", "white", any(p.provisional for p in figure.points))]
    for name, colour, symbol, fill, shown in keys:
        if shown:
            fig.add_trace(_key(name, colour, symbol, fill), row=1, col=2)
    low, high = log_range([p.usd for p in figure.points])
    front = figure.frontier
    if front:
        # Steps: each frontier model's reward holds until the next, dearer and better one; a free one starts it
        # at the log axis's left edge.
        xs = [low if p.free else p.usd for p in front] + [high]
        ys = [p.reward for p in front] + [front[-1].reward]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": FRONTIER, "dash": "dash", "shape": "hv",
                                                                   "width": 2},
                                 name="frontier: nothing cheaper is as good", hoverinfo="skip"), row=1, col=2)
    fig.update_xaxes(type="category", row=1, col=1, showgrid=False, fixedrange=True)
    fig.update_xaxes(type="log", range=[math.log10(low), math.log10(high)], row=1, col=2, title_text="$ per episode (log)",
                     tickprefix="$", fixedrange=True)
    fig.update_yaxes(range=[0, 1.05], title_text="mean reward (95% CI)", row=1, col=1, fixedrange=True)
    fig.update_yaxes(fixedrange=True, row=1, col=2)
    fig.update_layout(height=HEIGHT, margin={"l": 48, "r": 12, "t": 36, "b": 10}, template="plotly_white",
                      title={"text": "Cost against reward", "font": {"size": 15}, "x": 0.01},
                      legend={"orientation": "h", "y": -0.22, "x": 0, "font": {"size": 11}},
                      hoverlabel={"namelength": -1}, dragmode=False,
                      meta={"unpriced": figure.unpriced})
    if not figure.points:
        fig.add_annotation(text="No model with a mean reward to place yet.", showarrow=False, x=0.5, y=0.5,
                           xref="paper", yref="paper")
    return fig


def frontier_note(figure: Frontier) -> str:
    """Under the figure: what it shows, and the models it could not place for want of a price (Markdown, each
    name escaped)."""
    note = ("Each model at its dollars per episode and mean reward, with the board's 95% interval; hover or tap a "
            "point for its figures. The frontier runs through the models nothing cheaper beats; hollow marks are "
            "provisional. People are drawn at $0 for reference, not on the frontier.")
    if figure.unpriced:
        note += " Not drawn, no price known: " + ", ".join(escape_cell(m) for m in figure.unpriced) + "."
    return note
