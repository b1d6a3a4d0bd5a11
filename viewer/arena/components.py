"""The Arena section's components, by name: what its handlers read and change (built by viewer/arena/section.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from viewer.context import AppContext
from viewer.frames import EpisodeSlots
from viewer.rollout_panel import RolloutPanel
from viewer.task_picker import TaskPicker


@dataclass
class ArenaSide:
    """One side of the match (`#arena-a`, `#arena-b`): its head, its status line, its links, its rollout panel."""

    side: str  # "a" or "b"
    column: gr.Column
    head: gr.Markdown
    status: gr.Markdown
    info: gr.Markdown
    panel: RolloutPanel

    def slots(self, ctx: AppContext, *, masked: bool) -> EpisodeSlots:
        """Where its episode shows (viewer/run/stream.py); masked, the episode's links (they name the model) stay
        off the page."""
        return EpisodeSlots(ctx, self.panel, self.status, episode_info=None if masked else self.info)

    @property
    def outputs(self) -> list[Any]:
        return [self.head, self.status, self.info, *self.panel.outputs]


@dataclass
class ArenaSection:
    ctx: AppContext
    app_tabs: gr.Tabs
    # the form
    model_a: gr.Dropdown
    model_b: gr.Dropdown
    random: gr.Checkbox
    picker: TaskPicker
    task: gr.Dropdown  # the picker's task dropdown
    run_button: gr.Button
    stop_button: gr.Button
    budget_note: gr.Markdown  # what a match on the Space's keys may spend of its budget, before it starts
    note: gr.Markdown  # why a match did not start, beside the form
    keys: gr.Accordion
    key_fields: dict[str, gr.Textbox]
    # the match
    verdict: gr.Markdown
    vote_row: gr.Row
    vote_buttons: dict[str, gr.Button]  # by choice (rollouts.matches.VOTE_CHOICES)
    skip: gr.Button
    ballot: gr.Markdown  # the question, or what became of the vote, and the votes once shown
    link: gr.Markdown
    sides_row: gr.Row  # both sides, shown once a match is on the page
    a: ArenaSide
    b: ArenaSide
    match: gr.State  # {"id", "task_id", "stop_token"} of the match on this page, or None
    watch: gr.Textbox  # the `?match=` of the page's URL, read at load

    @property
    def sides(self) -> tuple[ArenaSide, ArenaSide]:
        return self.a, self.b

    @property
    def match_outputs(self) -> list[Any]:
        """Everything a match's display may change."""
        return [self.verdict, self.vote_row, self.skip, self.ballot, self.link, self.match, self.sides_row,
                *self.a.outputs, *self.b.outputs]
