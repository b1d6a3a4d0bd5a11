"""The Browse tab (being built: see issue 5). Placeholder wiring so the app runs meanwhile."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from viewer.context import AppContext


@dataclass
class BrowseTab:
    rollout_id: gr.Textbox

    def on_deep_link(self, loaded: Any) -> None:
        """Chain what opening `?tab=browse&rollout=<id>` does onto the page-load event."""


def build_browse_tab(ctx: AppContext) -> BrowseTab:
    gr.Markdown("Browse is coming.")
    rollout_id = gr.Textbox(label="Rollout id", elem_id="rollout-id")
    return BrowseTab(rollout_id)
