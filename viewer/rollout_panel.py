"""One rollout on screen: its transcript, its berth chart with a slider over every draft, its grade, and its last plan
beside the proven optimum. Run (live, or a finished episode opened by its link), Browse's open rollout and compare,
and the arena's two sides all show a rollout with this one panel.

`build_rollout_panel` makes the components (in a section's layout: chart or chat first, the optimum folded away or
shown); `stored_rollout` fills them for a finished record, and `draft` and `optimum` answer the slider and the
optimum's accordion. The live Run view fills the same components as events arrive (viewer/run/stream.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gradio as gr

from rollouts.record import Record
from viewer.chart import optimum_chart, step_chart
from viewer.gap_view import final_gap, gap_markdown
from viewer.replay import record_messages
from viewer.summary import grade_panel, usage_summary

PARTS = ("chart", "chat", "drafts", "grade", "optimum")
# Every berth chart of the app sits in a box of one of these classes, drawn at least this wide (two side by side,
# `compact`, a little narrower), so that its labels fit their ships; `FIT_CHARTS` scales it down to a narrower box.
CSS = """
.berth-chart .js-plotly-plot, .berth-chart .plot-container {min-width: 720px}
.berth-chart-compact .js-plotly-plot, .berth-chart-compact .plot-container {min-width: 560px}
"""
# A chart fits its box as the share page's SVG does with its viewBox: on a box narrower than the chart (a phone) the
# whole chart is scaled down to the box's width, the week's end in view, never cut off. Plotly measures its div
# unscaled and reads CSS transforms when it places a hover, so the figure and its hovers stay as drawn. Negative
# margins give back the room the scaled chart no longer takes. For the page's <head>: Gradio's `js` runs only once
# the app has loaded, and a chart may be drawn before that.
FIT_CHARTS = """<script>(() => {
  const BOXES = '.berth-chart, .berth-chart-compact';
  const fit = (box) => {
    const plot = box && box.querySelector('.js-plotly-plot');
    if (!plot) return;
    const style = getComputedStyle(box);
    const room = box.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const drawn = parseFloat(getComputedStyle(plot).minWidth) || plot.offsetWidth;
    const k = room > 0 && drawn > room ? room / drawn : 1;
    const scaled = k < 1 ? `scale(${k.toFixed(4)})` : '';
    if (plot.style.transform === scaled && plot.dataset.fitHeight === String(plot.offsetHeight)) return;
    plot.dataset.fitHeight = String(plot.offsetHeight);
    Object.assign(plot.style, {transform: scaled, transformOrigin: '0 0',
                               marginRight: k < 1 ? `${(k - 1) * drawn}px` : '',
                               marginBottom: k < 1 ? `${(k - 1) * plot.offsetHeight}px` : ''});
  };
  const sizes = new ResizeObserver((entries) => entries.forEach((e) => fit(e.target.closest(BOXES))));
  const watched = new WeakSet();
  const watch = (element) => { if (!watched.has(element)) { watched.add(element); sizes.observe(element); } };
  const look = () => document.querySelectorAll(BOXES).forEach((box) => {
    watch(box);
    const plot = box.querySelector('.js-plotly-plot');
    if (plot) watch(plot);
  });
  new MutationObserver(look).observe(document.documentElement, {childList: true, subtree: true});
})();</script>"""


@dataclass
class RolloutPanel:
    """A rollout's components (those of the parts it was built with); `chart_options` are how its chart is drawn."""

    chat: gr.Chatbot
    chart: gr.Plot
    plan_step: gr.Slider | None = None  # the drafts: a slider, and the plans it steps through
    steps: gr.State | None = None
    grade: gr.Markdown | None = None
    optimal: gr.Plot | None = None
    optimal_box: gr.Accordion | None = None  # the optimum folded away, drawn when opened (None: shown at the end)
    usage: gr.Markdown | None = None
    chart_options: dict[str, Any] = field(default_factory=dict)
    slider_label: str = "Draft"

    @property
    def outputs(self) -> list[Any]:
        """Every component `stored_rollout` fills."""
        parts = (self.chat, self.chart, self.plan_step, self.steps, self.grade, self.optimal, self.optimal_box,
                 self.usage)
        return [c for c in parts if c is not None]


def build_rollout_panel(prefix: str, *, parts: tuple[str, ...] = PARTS, chart_first: bool = False,
                        fold_optimum: bool = False, usage: bool = False, chat_label: str = "Transcript",
                        chat_height: int = 560, chart_options: dict | None = None, slider_label: str = "Draft",
                        compact: bool = False) -> RolloutPanel:
    """The components of `parts`, in place (inside the caller's layout); elem ids are `prefix` + chat, chart,
    plan-step, grade, optimal (and usage). `compact`: the chart fits its column (two side by side)."""
    chart_class = ["berth-chart-compact" if compact else "berth-chart"]

    def chart() -> tuple[gr.Plot, gr.Slider | None]:
        plot = gr.Plot(show_label=False, elem_id=f"{prefix}chart", elem_classes=chart_class)
        slider = gr.Slider(minimum=1, maximum=2, value=1, step=1, visible=False, label=slider_label,
                           show_label=not fold_optimum, elem_id=f"{prefix}plan-step") if "drafts" in parts else None
        return plot, slider

    if chart_first:
        plot, slider = chart()
    chat = gr.Chatbot(label=chat_label, height=chat_height, elem_id=f"{prefix}chat", sanitize_html=True,
                      render_markdown=True, feedback_options=None, group_consecutive_messages=False,
                      buttons=["copy_all"])
    if not chart_first:
        plot, slider = chart()
    panel = RolloutPanel(chat, plot, slider, gr.State([]) if slider is not None else None,
                         chart_options=dict(chart_options or {}), slider_label=slider_label)
    if "grade" in parts:
        with gr.Row(equal_height=False):
            panel.grade = gr.Markdown(elem_id=f"{prefix}grade")
            panel.usage = gr.Markdown(elem_id=f"{prefix}usage") if usage else None
    if "optimum" in parts and fold_optimum:
        # Drawn when opened: the first view of a shared rollout should not wait for a second chart.
        with gr.Accordion("Beside the proven optimum", open=False, elem_id=f"{prefix}optimal-box") as box:
            panel.optimal = gr.Plot(show_label=False, elem_id=f"{prefix}optimal", elem_classes=chart_class)
        panel.optimal_box = box
    elif "optimum" in parts:
        panel.optimal = gr.Plot(visible=False, show_label=False, elem_id=f"{prefix}optimal", elem_classes=chart_class)
    return panel


def draft_slider(panel: RolloutPanel, count: int, at: int = 0) -> gr.Slider:
    """The slider over `count` drafts, on draft `at` (from 1; 0 or past the last: the last one), hidden when there
    is one draft or none."""
    value = at if 0 < at <= count else max(count, 1)
    return gr.Slider(minimum=1, maximum=max(count, 2), value=value, step=1, visible=count > 1,
                     label=f"{panel.slider_label} (1-{count})")


def stored_rollout(panel: RolloutPanel, rollout: Record | Mapping[str, Any], task: Mapping[str, Any] | None, *,
                   chart: Any = None, optimum_label: str | None = None, at: int = 0) -> dict:
    """The panel filled for a finished rollout: every draft, draft `at` drawn (from 1; 0 or past the last: the
    last one), or `chart`, given one."""
    view = Record.of(rollout)
    plans = view.plan_steps
    shown = at if 0 < at <= len(plans) else len(plans)
    out = {panel.chat: record_messages(view, task),
           panel.chart: chart if chart is not None else draft(panel, task, plans, shown)}
    if panel.plan_step is not None:
        out.update({panel.plan_step: draft_slider(panel, len(plans), shown), panel.steps: plans})
    if panel.grade is not None:
        out[panel.grade] = grade_panel(view, task) + "\n\n" + gap_markdown(final_gap(view, task))
    if panel.usage is not None:
        out[panel.usage] = usage_summary(view)
    if panel.optimal_box is not None:  # folded: drawn when opened (`optimum`)
        out[panel.optimal] = None
        out[panel.optimal_box] = gr.Accordion(open=False, visible=bool((task or {}).get("reference")))
    elif panel.optimal is not None:
        out[panel.optimal] = shown_optimum(view, task, optimum_label)
    return out


def cleared(panel: RolloutPanel) -> dict:
    """The panel empty (no rollout)."""
    return {panel.chat: [], panel.chart: None}


def draft(panel: RolloutPanel, task: Mapping[str, Any] | None, steps: Sequence[Mapping[str, Any]],
          position: float | None) -> Any:
    """The chart of draft `position` (1-based; the slider's value)."""
    return step_chart(task, list(steps), int(position or 1) - 1, **panel.chart_options)


def optimum(rollout: Record | Mapping[str, Any], task: Mapping[str, Any] | None, label: str | None = None) -> Any:
    """The rollout's last plan over the task's proven optimum (None without a reference)."""
    view = Record.of(rollout)
    return optimum_chart(task, view.last_plan, label=label or f"{view.model}'s last plan")


def shown_optimum(view: Record, task: Mapping[str, Any] | None, label: str | None = None) -> gr.Plot:
    """The optimum as a panel that is not folded shows it: visible only when there is one."""
    chart = optimum(view, task, label)
    return gr.Plot(value=chart, visible=chart is not None)
