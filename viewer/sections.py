"""What a section of the page is to app.py: one contract to build it, load it and list its API routes, so the app
loops over its sections (as FastChat gives every tab one build and one load function) and a new section is one
package with one `SECTION`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr

from viewer.context import AppContext


@dataclass(frozen=True)
class Page:
    """What a section may reach of the page around it: the Blocks (for its page-load events) and the tabs (to
    open its own tab from a link, or another's)."""
    demo: gr.Blocks
    tabs: gr.Tabs


@dataclass(frozen=True)
class Route:
    """One API route for scripts: `gr.api(handler bound to the app's context, api_name=name)`. None for
    `concurrency_limit` lets a route stream many at once (each handler enforces its own caps)."""
    name: str
    handler: Callable[..., Any]
    concurrency_limit: int | str | None = "default"


@dataclass(frozen=True)
class Section:
    """A tab of the page. `build(ctx, page)` makes its components inside its tab and returns them (the section's
    value); `load(built, page, tab)` wires what it reads of the URL when a page loads, after every tab is built."""
    label: str
    id: str
    css: str
    build: Callable[[AppContext, Page], Any]
    load: Callable[[Any, Page, gr.Tab], None]
    routes: tuple[Route, ...] = ()
    elem_id: str | None = None
