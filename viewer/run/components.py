"""The Run section's components, by name: what its handlers read and change (built by viewer/run/section.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from viewer.context import AppContext
from viewer.rollout_panel import RolloutPanel
from viewer.task_picker import TaskPicker


@dataclass
class RunSection:
    ctx: AppContext
    # the form
    model: gr.Dropdown
    model_note: gr.Markdown
    picker: TaskPicker  # the task, its filters and Random (viewer/task_picker.py)
    task: gr.Dropdown  # the picker's task dropdown
    run_button: gr.Button
    stop_button: gr.Button
    budget_note: gr.Markdown  # what a run on the Space's keys may spend of its budget, before it starts
    episode_info: gr.Markdown
    server: gr.Radio
    server_url: gr.Textbox
    server_note: gr.Markdown
    max_turns: gr.Number
    max_tokens: gr.Number
    keys: gr.Accordion
    key_fields: dict[str, gr.Textbox]
    # the right-hand side
    status: gr.Markdown
    preview: gr.Column
    preview_text: gr.Markdown
    preview_chart: gr.Plot
    live: gr.Column
    panel: RolloutPanel  # the episode: chat, chart and drafts, grade, optimum (viewer/rollout_panel.py)
    episode: gr.State

    @property
    def frame_outputs(self) -> list[Any]:
        """Everything an episode's display may change."""
        return [*self.panel.outputs, self.status, self.episode_info, self.episode, self.preview, self.live]
