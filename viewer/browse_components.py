"""The Browse section's components, by name: what its handlers read and change (built by
viewer/browse_section.py, changed by viewer/browse_handlers.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from rollouts.index import BrowseIndex
from viewer.browse_records import RecordCache
from viewer.context import AppContext


@dataclass
class BrowseSection:
    ctx: AppContext
    app_tabs: gr.Tabs  # the app's tabs, so a Browse link can open this one
    index: BrowseIndex
    records: RecordCache
    export_dir: Path
    # the bar
    search: gr.Textbox
    f_model: gr.Dropdown
    f_task: gr.Dropdown
    f_tier: gr.Dropdown
    more: gr.Button
    more_row: gr.Row
    f_quay: gr.Dropdown
    f_source: gr.Dropdown
    f_submitted: gr.Radio
    f_feasible: gr.Radio
    f_reward_min: gr.Number
    f_reward_max: gr.Number
    f_from: gr.Textbox
    f_to: gr.Textbox
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
    chart: gr.Plot
    plan_step: gr.Slider
    steps: gr.State
    chat: gr.Chatbot
    grade: gr.Markdown
    usage: gr.Markdown
    optimal_box: gr.Accordion
    optimal: gr.Plot
    # the leaderboard
    board: gr.Dataframe
    board_note: gr.Markdown
    board_models: gr.State
    same_tasks: gr.Checkbox
    heatmap: gr.Dataframe
    heatmap_cells: gr.State
    convergence: gr.Plot
    # compare
    compare_pick: gr.Dropdown
    compare_head: gr.Markdown
    compare_chart_a: gr.Plot
    compare_chart_b: gr.Plot
    compare_diff: gr.Dataframe
    compare_chat_a: gr.Chatbot
    compare_chat_b: gr.Chatbot
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

    @property
    def form(self) -> list[Any]:
        """The bar's inputs, in the order `on.form_state` reads them."""
        return [self.search, self.f_model, self.f_task, self.f_tier, self.f_quay, self.f_source, self.f_submitted,
                self.f_feasible, self.f_reward_min, self.f_reward_max, self.f_from, self.f_to, self.sort_by,
                self.order]

    @property
    def outputs(self) -> list[Any]:
        """Everything `on.render` may change."""
        return [*self.form, self.more, self.more_row, self.filter_note, self.views, self.status, self.table, self.page_ids, self.page_info,
                self.detail, self.message, self.head, self.share, self.export_json, self.compare_pick, self.chart,
                self.plan_step, self.steps, self.chat, self.grade, self.usage, self.optimal_box, self.optimal, self.board,
                self.board_note, self.board_models, self.heatmap, self.heatmap_cells, self.convergence, self.compare_head,
                self.compare_chart_a, self.compare_chart_b, self.compare_diff, self.compare_chat_a,
                self.compare_chat_b, self.state, self.version, self.url, self.title]
