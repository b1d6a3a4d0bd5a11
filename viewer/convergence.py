"""The convergence plot: per model, how close the best plan found so far is to the optimum, check after check.

`convergence_figure(rows)` takes the index rows Browse lists (after its filters: an Arrow table such as the matched
rows of `Archive.matching`, or a list of row dicts), or `curves=` (`Archive.convergence(filters)`'s answer). The rows need the
columns `model`, `check_costs`, `optimal_cost` and `naive_cost` of rollouts.schema.COLUMNS; no record is read.
Two panels share the check axis:

- top: the gap to the optimum of the best plan so far (0 = optimal, 1 = no better than the naive plan), the
  median as a line and the interquartile range as a band, over the episodes that have a feasible plan by then;
- bottom: the share of episodes with a feasible plan by that check, which says how many episodes the top panel
  speaks for (before an episode's first feasible check it has no gap).

The figures' definitions are in rollouts.convergence.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

import pandas as pd
import plotly.graph_objects as go
import pyarrow as pa
from plotly.subplots import make_subplots

from rollouts.convergence import convergence

# Plotly's default qualitative colours, in order; a model keeps its colour in both panels.
PALETTE = ("#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880", "#FF97FF",
           "#FECB52")
HEIGHT_PX = 560


def convergence_figure(rows: pa.Table | Iterable[dict] | None = None, *, curves: pa.Table | None = None,
                       title: str = "Convergence: best plan so far, check by check") -> go.Figure:
    """The plot for `rows` (module docstring), or for `curves` already computed by rollouts.convergence."""
    data = (curves if curves is not None else convergence(rows if rows is not None else [])).to_pandas()
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.62, 0.38])
    for i, (model, curve) in enumerate(data.groupby("model", sort=False)):
        _draw_model(fig, str(model), curve, PALETTE[i % len(PALETTE)])
    fig.update_layout(
        title={"text": escape(title), "font": {"size": 13}, "x": 0.01}, height=HEIGHT_PX, plot_bgcolor="white",
        margin={"l": 64, "r": 16, "t": 48, "b": 56}, hovermode="x unified",
        legend={"orientation": "h", "yanchor": "top", "y": -0.1, "x": 0, "font": {"size": 10}})
    fig.update_yaxes(title_text="gap to optimum (0 = optimal, 1 = naive)", rangemode="tozero", gridcolor="#eee",
                     row=1, col=1)
    fig.update_yaxes(title_text="feasible plan by then (%)", range=[0, 100], gridcolor="#eee", row=2, col=1)
    fig.update_xaxes(title_text="check number", dtick=1, gridcolor="#eee", row=2, col=1)
    if data.empty:
        fig.add_annotation(text="No checked plans among these rollouts", showarrow=False, xref="paper",
                           yref="paper", x=0.5, y=0.6, font={"size": 13, "color": "#666"})
    return fig


def _draw_model(fig: go.Figure, model: str, curve: pd.DataFrame, colour: str) -> None:
    name = escape(model)
    checks = curve["check"].tolist()
    band = _transparent(colour, 0.18)
    fig.add_trace(go.Scatter(x=checks, y=curve["gap_q3"].tolist(), mode="lines", line={"width": 0},
                             legendgroup=name, showlegend=False, hoverinfo="skip", connectgaps=False), row=1, col=1)
    fig.add_trace(go.Scatter(x=checks, y=curve["gap_q1"].tolist(), mode="lines", line={"width": 0}, fill="tonexty",
                             fillcolor=band, legendgroup=name, showlegend=False, hoverinfo="skip",
                             connectgaps=False), row=1, col=1)
    fig.add_trace(go.Scatter(
        x=checks, y=curve["gap_median"].tolist(), mode="lines+markers", name=name, legendgroup=name,
        line={"color": colour, "width": 2}, marker={"size": 5},
        customdata=list(zip(curve["gap_q1"], curve["gap_q3"], strict=True)),
        hovertemplate=f"{name}: median gap %{{y:.3f}} (IQR %{{customdata[0]:.3f}}–%{{customdata[1]:.3f}})"
                      "<extra></extra>"), row=1, col=1)
    episodes = int(curve["episodes"].iloc[0]) if len(curve) else 0
    fig.add_trace(go.Scatter(
        x=checks, y=curve["feasible_pct"].tolist(), mode="lines", name=name, legendgroup=name, showlegend=False,
        line={"color": colour, "width": 2, "dash": "dot"},
        hovertemplate=f"{name}: %{{y:.0f}}% of {episodes} episodes feasible<extra></extra>"), row=2, col=1)


def _transparent(colour: str, alpha: float) -> str:
    red, green, blue = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},{alpha})"
