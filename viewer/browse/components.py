"""The Browse section's components, by name: what its handlers read and change (built by viewer/browse/section.py,
changed by viewer/browse/handlers.py). The archive and the open records are the app's (viewer/context.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from rollouts.filters import FILTERS
from viewer.context import AppContext
from viewer.rollout_panel import RolloutPanel


@dataclass
class BrowseSection:
    ctx: AppContext
    app_tabs: gr.Tabs  # the app's tabs, so a Browse link can open this one
    # the bar: one widget per filter (rollouts.filters.FILTERS, by name), then the sort and the exports
    filters: dict[str, Any]
    more: gr.Button
    more_row: gr.Row
    sort_by: gr.Dropdown
    order: gr.Radio
    columns: gr.Dropdown
    export_csv: gr.Button
    export_parquet: gr.Button
    export_file: gr.DownloadButton
    filter_note: gr.Markdown
    views: gr.Tabs
    # the list and the open rollout
    status: gr.Markdown
    table: gr.Dataframe
    page_ids: gr.State
    prev_page: gr.Button
    page_info: gr.Markdown
    next_page: gr.Button
    detail: gr.Column
    message: gr.Markdown
    head: gr.Markdown
    back: gr.Button
    share: gr.Textbox
    copy: gr.Button
    export_json: gr.DownloadButton
    to_compare: gr.Button
    panel: RolloutPanel
    # the leaderboard
    board: gr.Dataframe
    board_note: gr.Markdown
    board_models: gr.State
    same_tasks: gr.Checkbox
    frontier: gr.Plot
    frontier_note: gr.Markdown
    card_pick: gr.Dropdown
    card: gr.Markdown
    heatmap: gr.Dataframe
    heatmap_cells: gr.State
    convergence: gr.Plot
    # compare
    compare_pick: gr.Dropdown
    compare_head: gr.Markdown
    compare_a: RolloutPanel
    compare_b: RolloutPanel
    compare_diff: gr.Dataframe
    compare_step: gr.Slider  # one slider over both sides' drafts
    # state and the page's URL
    state: gr.State
    version: gr.State
    url: gr.Textbox
    popstate: gr.Button
    next_row: gr.Button
    previous_row: gr.Button
    title: gr.Textbox
    link: gr.Textbox  # a placeholder input for the events whose JS reads the page's own query
    timer: gr.Timer
    flags: Any = None  # the open rollout's flags and the form (viewer/browse/flags.py's FlagBox)

    @property
    def form(self) -> list[Any]:
        """The bar's inputs, in the order `handlers.form_state` reads them: the filters (FILTERS order), the sort."""
        return [*(self.filters[f.name] for f in FILTERS), self.sort_by, self.order]

    @property
    def outputs(self) -> list[Any]:
        """Everything `handlers.render` may change."""
        return [*self.form, self.more, self.more_row, self.filter_note, self.views, self.status, self.table,
                self.page_ids, self.page_info, self.detail, self.message, self.head, self.share, self.export_json,
                self.compare_pick, *self.panel.outputs, *(self.flags.outputs if self.flags else ()), self.board,
                self.board_note, self.board_models, self.frontier, self.frontier_note, self.card_pick, self.card,
                self.heatmap,
                self.heatmap_cells, self.convergence, self.compare_head, self.compare_a.chart, self.compare_b.chart,
                self.compare_diff, self.compare_step, self.compare_a.chat, self.compare_b.chat, self.state, self.version, self.url,
                self.title]
