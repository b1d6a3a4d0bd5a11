"""The berth chart as a plotly figure: the output the app shows, drawn from a scene (viewer/chart/scene.py).

Ships and the quay's facts are `layout.shapes` (one dict each, cheap for 59 ships); whatever a person may want to
switch off or hover is a trace, one per layer and never one per ship: ship labels and hovers, published positions
with arrows, marks. `text` is the one place a scene's text becomes plotly text: plotly renders a subset of HTML
in texts, hovers, titles and legend names (`<a href>` links among it), so every text is escaped there.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viewer.chart.scene import (
    AVAILABLE_NAME,
    CRANE_LINE,
    GHOST_LINE,
    IN_USE_FILL,
    IN_USE_NAME,
    MOVED_NAME,
    OVER_NAME,
    PUBLISHED_NAME,
    SHIP_FILL,
    UNSAFE,
    VIOLATION_LINE,
    Box,
    Cranes,
    LegendItem,
    Panel,
    Scene,
    Tip,
)

_STYLES = {"b", "i"}


def text(value: Any) -> str:
    """Plain text as plotly text: unsafe characters dropped, `<`, `>` and `&` escaped, so it shows as written."""
    return html.escape(UNSAFE.sub("", str(value)), quote=False)


def tip_html(value: Tip) -> str:
    """A scene hover as plotly hover text: escaped spans, bold and italic as tags, lines joined by <br>."""
    return "<br>".join("".join(f"<{style}>{text(t)}</{style}>" if style in _STYLES else text(t)
                               for style, t in line) for line in value)


def to_figure(scene: Scene) -> go.Figure:
    """The plotly figure of a scene: one quay panel (with the crane panel under it when the scene has one), or
    two panels stacked on one hour axis (a compare)."""
    if len(scene.panels) > 1:
        return _stacked(scene)
    shapes, annotations, traces = _panel(scene.panels[0], "x", "y")
    xaxis, yaxis = _axes(scene)
    legend = _legend(scene.legend)
    if scene.cranes is None:
        layout = {**_layout(scene.title, scene.height), "xaxis": xaxis, "yaxis": yaxis, "shapes": shapes,
                  "annotations": annotations}
        return go.Figure(data=[*traces, *legend], layout=layout)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.8, 0.2], vertical_spacing=0.05)
    fig.update_layout(**_layout(scene.title, scene.height), shapes=shapes, annotations=annotations)
    fig.update_xaxes(**{k: v for k, v in xaxis.items() if k != "title"}, row=1, col=1)
    fig.update_xaxes(**xaxis, row=2, col=1)
    fig.update_yaxes(**yaxis, row=1, col=1)
    fig.update_yaxes(title={"text": "cranes", "font": {"size": 11}}, fixedrange=True, rangemode="tozero",
                     showgrid=True, gridcolor="#eeeeee", row=2, col=1)
    fig.add_traces([*traces, *_crane_traces(scene.cranes), *legend])
    return fig


def _stacked(scene: Scene) -> go.Figure:
    """Two plans of one task stacked on a shared hour axis; the lower panel's traces share the upper's legend."""
    fig = make_subplots(rows=len(scene.panels), cols=1, shared_xaxes=True, vertical_spacing=0.1,
                        subplot_titles=[text(p.subtitle) for p in scene.panels])
    parts = [_panel(p, "x" if i == 0 else f"x{i + 1}", "y" if i == 0 else f"y{i + 1}")
             for i, p in enumerate(scene.panels)]
    xaxis, yaxis = _axes(scene)
    # make_subplots placed the subplot titles as annotations already; keep them and add ours.
    fig.update_layout(**_layout(scene.title, scene.height), shapes=[s for p in parts for s in p[0]],
                      annotations=[*fig.layout.annotations, *(a for p in parts for a in p[1])])
    fig.update_xaxes(**{k: v for k, v in xaxis.items() if k != "title"})
    fig.update_xaxes(title=xaxis["title"], row=len(scene.panels), col=1)
    fig.update_yaxes(**yaxis)
    for _, _, traces in parts[1:]:
        for trace in traces:
            trace.showlegend = False
    fig.add_traces([t for p in parts for t in p[2]])
    fig.add_traces(_legend(scene.legend))
    return fig


def _layout(title: str, height: int) -> dict:
    return {"title": {"text": text(title), "font": {"size": 13}, "x": 0.01}, "height": height,
            "margin": {"l": 56, "r": 16, "t": 48, "b": 96}, "plot_bgcolor": "white", "hovermode": "closest",
            "dragmode": "pan", "legend": {"orientation": "h", "yanchor": "top", "y": -0.12 * 480 / height,
                                          "x": 0, "font": {"size": 10}}}


def _axes(scene: Scene) -> tuple[dict, dict]:
    x, y = scene.x, scene.y
    xaxis = {"range": [x.lo, x.hi], "tickvals": x.ticks, "ticktext": [text(s) for s in x.labels], "tickangle": 0,
             "zeroline": False, "showgrid": True, "gridcolor": "#e6e6e6",
             "title": {"text": text(x.title), "font": {"size": 11}}}
    yaxis = {"range": [y.lo, y.hi], "dtick": y.dtick, "zeroline": False,
             "title": {"text": text(y.title), "font": {"size": 11}}, "showgrid": False, "fixedrange": True}
    return xaxis, yaxis


# -- one panel -----------------------------------------------------------------------------------------------------

def _panel(panel: Panel, xref: str, yref: str) -> tuple[list[dict], list[dict], list[go.Scatter]]:
    """The panel's shapes, annotations and traces on axes `xref`/`yref`."""
    shapes = [_shape(b, xref, yref) for b in panel.boxes]
    annotations = [{
        "name": n.name, "xref": xref, "yref": f"{yref} domain", "x": n.x, "y": 1 if n.at == "top" else 0.04,
        "xanchor": "left", "yanchor": "top" if n.at == "top" else "bottom", "showarrow": False,
        **({"yshift": -14 * n.row} if n.at == "top" else {}),
        "text": text(f"{n.icon} {n.text}" if n.icon else n.text), "font": {"size": 10, "color": n.colour},
        "bgcolor": "rgba(255,255,255,0.7)"} for n in panel.notes]
    axes = {"xaxis": xref, "yaxis": yref}
    traces = []
    blocks = [lb for lb in panel.labels if lb.group == "blocks"]
    if blocks:
        traces.append(go.Scatter(
            x=[lb.x for lb in blocks], y=[lb.y for lb in blocks], mode="markers", marker={"opacity": 0, "size": 12},
            hovertext=[tip_html(lb.tip) for lb in blocks], hoverinfo="text", showlegend=False, name="blocks", **axes))
    ships = [lb for lb in panel.labels if lb.group == "ships"]
    if ships:
        # Invisible markers carry the hover, so a ship too small for a label can still be hovered.
        traces.append(go.Scatter(
            x=[lb.x for lb in ships], y=[lb.y for lb in ships], mode="markers+text",
            text=[text(lb.text) for lb in ships], customdata=[lb.key for lb in ships], textposition="middle center",
            textfont={"size": 10, "color": [lb.colour for lb in ships]}, marker={"opacity": 0, "size": 16},
            hovertext=[tip_html(lb.tip) for lb in ships], hoverinfo="text", showlegend=False, name="ships",
            cliponaxis=True, **axes))
    traces += _moves(panel, axes)
    for marks in panel.marks:
        traces.append(go.Scatter(
            x=[p[0] for p in marks.points], y=[p[1] for p in marks.points], mode="markers",
            marker={"symbol": marks.symbol, "size": 10, "color": marks.colour, "line": {"color": "white", "width": 1}},
            hovertext=[tip_html(p[2]) for p in marks.points], hoverinfo="text", name=text(marks.name),
            legendgroup=marks.kind, **axes))
    return shapes, annotations, traces


def _shape(box: Box, xref: str, yref: str) -> dict:
    line: dict[str, Any] = {"color": box.edge, "width": box.edge_width} if box.edge else {"width": 0}
    if box.dash:
        line["dash"] = box.dash
    shape = {"type": "rect", "name": box.name, "xref": xref, "yref": yref, "x0": box.x0, "x1": box.x1,
             "y0": box.y0, "y1": box.y1, "fillcolor": box.fill, "line": line, "layer": box.layer}
    if box.opacity != 1:
        shape["opacity"] = box.opacity
    if box.label:
        shape["label"] = {"text": text(box.label), "font": {"size": 10, "color": box.label_colour},
                          "textangle": -90 if box.label_vertical else 0}
    return shape


def _moves(panel: Panel, axes: dict) -> list[go.Scatter]:
    """One trace for the published outlines and one for the arrows, both in the legend, so a click on the
    legend hides them."""
    if not panel.moves:
        return []
    box_x: list[float | None] = []
    box_y: list[float | None] = []
    arrow_x: list[float | None] = []
    arrow_y: list[float | None] = []
    for move in panel.moves:
        x0, x1, y0, y1 = move.ghost
        box_x += [x0, x1, x1, x0, x0, None]
        box_y += [y0, y0, y1, y1, y0, None]
        arrow_x += [move.start[0], move.end[0], None]
        arrow_y += [move.start[1], move.end[1], None]
    ghost = GHOST_LINE
    return [
        go.Scatter(x=box_x, y=box_y, mode="lines", line={"color": ghost, "width": 1, "dash": "dash"},
                   hoverinfo="skip", name=PUBLISHED_NAME, legendgroup="published", showlegend=True, **axes),
        go.Scatter(x=arrow_x, y=arrow_y, mode="lines+markers", line={"color": ghost, "width": 1},
                   marker={"symbol": "arrow", "size": 9, "angleref": "previous", "color": ghost,
                           "opacity": [0, 1, 0] * len(panel.moves)},
                   hoverinfo="skip", name=MOVED_NAME, legendgroup="published", showlegend=True, **axes)]


# -- cranes and legend ---------------------------------------------------------------------------------------------

def _crane_traces(cranes: Cranes) -> list[go.Scatter]:
    hours = list(range(len(cranes.use)))
    over = cranes.over
    axes = {"xaxis": "x2", "yaxis": "y2"}
    traces = [
        go.Scatter(x=hours, y=cranes.available, mode="lines", line={"shape": "hv", "color": CRANE_LINE, "dash": "dot"},
                   name=AVAILABLE_NAME, hovertemplate="h%{x}: %{y} available<extra></extra>", **axes),
        go.Scatter(x=hours, y=cranes.use, mode="lines", line={"shape": "hv", "color": SHIP_FILL, "width": 1.5},
                   fill="tozeroy", fillcolor=IN_USE_FILL, name=IN_USE_NAME,
                   hovertemplate="h%{x}: %{y} in use<extra></extra>", **axes)]
    if over:
        traces.append(go.Scatter(
            x=over, y=[cranes.use[h] for h in over], mode="markers", marker={"color": VIOLATION_LINE, "size": 5},
            name=OVER_NAME, hovertemplate="h%{x}: %{y} in use, over the limit<extra></extra>", **axes))
    return traces


def _legend(items: Iterable[LegendItem]) -> list[go.Scatter]:
    """Legend-only traces for the scene's box entries (the other entries are traces of their own)."""
    return [go.Scatter(x=[None], y=[None], mode="markers", name=text(item.label), hoverinfo="skip",
                       marker={"symbol": "square", "size": 12, "color": item.fill,
                               "line": {"color": item.edge, "width": 2}})
            for item in items if item.kind == "box"]
