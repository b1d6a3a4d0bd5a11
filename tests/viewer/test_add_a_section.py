"""ARCHITECTURE.md's recipe for a section holds: one package's SECTION, named in app.SECTIONS, gets its tab, its
page-load wiring and its API route, with nothing else changed."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

import app as app_module
from testkit.app import settings_for
from viewer.context import AppContext
from viewer.sections import Page, Route, Section

LOADED: list[str] = []


def _build(ctx: AppContext, page: Page) -> gr.Markdown:
    return gr.Markdown("the new tab", elem_id="new-tab-text")


def _load(built: gr.Markdown, page: Page, tab: gr.Tab) -> None:
    LOADED.append(tab.id)
    page.demo.load(lambda: "loaded", None, [built], api_visibility="private")


def _echo(ctx: AppContext, text: str) -> str:
    return f"{text} from {type(ctx).__name__}"


NEW = Section("New", "new", "#new-tab-text {color: teal}", _build, _load, routes=(Route("new_echo", _echo),))


def test_a_section_added_to_the_list_gets_its_tab_its_load_and_its_route(tmp_path, monkeypatch):
    monkeypatch.setattr(app_module, "SECTIONS", (*app_module.SECTIONS, NEW))
    ctx = AppContext.create(settings_for(Path(tmp_path) / "rollouts"))
    try:
        demo = app_module.build_app(ctx)
    finally:
        ctx.store.close()
    page_tabs = next(b for b in demo.blocks.values() if isinstance(b, gr.Tabs))  # the page's, built first
    assert [t.label for t in page_tabs.children] == ["Run", "Arena", "Browse", "Play", "New"]
    assert LOADED == ["new"]
    route = next(fn for fn in demo.fns.values() if fn.api_name == "new_echo")
    assert route.fn("hi") == "hi from AppContext"  # bound to the app's context, as every section's routes
    assert any(fn.api_name == "run" for fn in demo.fns.values())  # the others' routes are still there
