"""The Browse section: every rollout played here, on our Hub dataset and upstream's published runs.

One row of search and filters (more behind a toggle), then three views: the list beside the open rollout, the
leaderboard with a task × model heatmap, and a compare of two rollouts of one task. Everything on screen is one
`BrowseState` (viewer/browse/state.py) that round-trips through the page's URL, so a link shows the same view and
the browser's back and forward buttons walk through it. Handlers (viewer/browse/handlers.py) turn an event into a
new state and `render` updates only what the change touches.

The rows come from the app's archive (rollouts.archive: index rows only, from every source); a rollout is shown
with the panel every section shows one with (viewer/rollout_panel.py).
"""

from __future__ import annotations

from typing import Any

import gradio as gr
import pandas as pd

from rollouts.filters import SORTABLE
from viewer.browse import api as browse_api
from viewer.browse import flags as flagging
from viewer.browse import handlers as on
from viewer.browse.components import BrowseSection
from viewer.browse.filter_form import build_filters, changes
from viewer.browse.state import BrowseState
from viewer.browse.views import board_layout, list_columns, list_widths, more_columns
from viewer.context import AppContext
from viewer.rollout_panel import build_rollout_panel
from viewer.sections import Page, Route, Section
from viewer.wiring import bind

CSS = """
#browse-bar button {align-self: flex-end; max-height: 42px; margin-bottom: 6px}
#browse-bar .block {padding-top: 6px; padding-bottom: 6px}
#rollouts table, #board table, #heatmap table, #compare-diff table {font-family: var(--font); font-size: 0.85rem}
#rollouts th, #board th, #heatmap th, #compare-diff th {white-space: nowrap; word-break: keep-all}
#rollouts tbody tr {cursor: pointer}
#rollout-detail, #rollout-list {min-width: 0 !important; max-width: 100%}
#rollout-head, #compare-head {overflow-wrap: anywhere}
/* A wide table scrolls sideways inside its box, the column that names its rows fixed at the left (Gradio 6.31's
   table leaves `pinned_columns` unused): the model in the list and the board, the task in the heatmap (its tier
   scrolls away under it), the ship in a compare. A thicker bar than Gradio's 4 px says there is more. */
#rollouts .first-column, #board .first-column, #compare-diff .first-column,
#heatmap .header-cell:nth-child(2), #heatmap .body-cell:nth-child(2) {position: sticky; left: 0; z-index: 3;
  background: var(--table-odd-background-fill)}
#rollouts .row-odd .first-column, #board .row-odd .first-column, #compare-diff .row-odd .first-column,
#heatmap .row-odd .body-cell:nth-child(2) {background: var(--table-even-background-fill)}
#rollouts .virtual-table-viewport::-webkit-scrollbar, #board .virtual-table-viewport::-webkit-scrollbar,
#heatmap .virtual-table-viewport::-webkit-scrollbar {height: 8px}
@media (max-width: 768px) {
  #browse-split {flex-direction: column-reverse}
}
""" + flagging.FLAG_CSS
# Fixed widths: with a rollout open beside it, the list scrolls sideways rather than squeezing the task ids.
# Short enough that the header, the chart and the top of the transcript share the first screen beside the list.
DETAIL_CHART = {"height": 330, "cranes": False}
# The page's own URL follows the state (pushState), and the back/forward buttons bring an old state back through a
# hidden box; a JS-only handler, so no round trip for either.
PUSH_URL_JS = """(query) => {
  if (!query || window.__browsePopping) { window.__browsePopping = false; return; }
  const url = new URL(window.location); const next = new URLSearchParams(query);
  if (url.search.replace(/^\\?/, '') === next.toString()) return;
  url.search = next.toString(); window.history.pushState({browse: true}, '', url);
}"""
LISTEN_POPSTATE_JS = """() => {
  if (window.__browseListening) return; window.__browseListening = true;
  window.addEventListener('popstate', () => {
    window.__browsePopping = true;
    document.querySelector('#browse-popstate')?.click();
  });
  // The arrow keys walk the list: the next or previous row opens.
  document.addEventListener('keydown', (event) => {
    if (!['ArrowDown', 'ArrowUp'].includes(event.key)) return;
    const list = document.querySelector('#rollouts'); if (!list || !list.contains(document.activeElement)) return;
    event.preventDefault();
    document.querySelector(event.key === 'ArrowDown' ? '#browse-next-row' : '#browse-previous-row')?.click();
  });
}"""
# The hidden buttons' events read the page's URL in the browser before calling the handler.
READ_LOCATION_JS = "(query, state) => [window.location.search, state]"
# Copy the share link; on a page served without TLS the clipboard API is missing, so fall back to a selection.
COPY_JS = """(link) => {
  const done = () => { const b = document.querySelector('#copy-link'); if (b) { b.innerText = '✓ Copied';
    setTimeout(() => { b.innerText = '📋 Copy'; }, 1500); } };
  if (navigator.clipboard && window.isSecureContext) { navigator.clipboard.writeText(link).then(done); return; }
  const box = document.querySelector('#share-link input'); box.removeAttribute('disabled'); box.select();
  document.execCommand('copy'); box.setAttribute('disabled', ''); done();
}"""
SET_TITLE_JS = "(title) => { if (title) document.title = title; }"
DOWNLOAD_JS = "() => { document.querySelector('#export-file')?.click(); }"  # the hidden DownloadButton


def wire_page_load(section: BrowseSection, page: Page, tab: gr.Tab) -> None:
    """At page load (alongside the other sections'): a Browse link opens the Browse tab showing the view it asks
    for; opening the tab fills it.

    The tab switch and the rows arrive in one update: a table filled while its tab is hidden measures no height
    and draws a single row.
    """
    page.demo.load(bind(on.load_page, section), None, [*section.outputs, section.app_tabs], api_visibility="private",
              show_progress="hidden", queue=False).then(None, js=LISTEN_POPSTATE_JS)
    tab.select(bind(on.tab_selected, section), [section.state], [*section.outputs, section.timer],
               api_visibility="private", show_progress="hidden", queue=False)


def build_browse_section(ctx: AppContext, page: Page) -> BrowseSection:
    app_tabs = page.tabs
    ctx.archive.refresh_local(force=True)  # what the folder holds as the page is built
    parts: dict[str, Any] = {}
    parts.update(_build_bar())
    with gr.Tabs(selected="list", elem_id="browse-views") as views:
        with gr.Tab("Rollouts", id="list"):
            parts.update(_build_list())
        with gr.Tab("Leaderboard", id="board"):
            parts.update(_build_board())
        with gr.Tab("Compare", id="compare"):
            parts.update(_build_compare())
    parts.update(_build_hidden())
    section = BrowseSection(ctx=ctx, app_tabs=app_tabs, views=views, **parts)
    _wire(section)
    return section


def _build_bar() -> dict[str, Any]:
    with gr.Row(equal_height=True, elem_id="browse-bar"):
        filters = build_filters("bar")
        more = gr.Button("Filters ▾", size="sm", scale=0, min_width=90, elem_id="more-filters")
        export_csv = gr.Button("⬇ CSV", size="sm", scale=0, min_width=70, elem_id="export-csv")
        export_parquet = gr.Button("⬇ Parquet", size="sm", scale=0, min_width=90, elem_id="export-parquet")
    with gr.Row(visible=False, elem_id="more-filter-row") as more_row:
        filters.update(build_filters("more"))
        sort_by = gr.Dropdown([(label, key) for key, label in SORTABLE.items()], value="started", label="Sort by",
                              min_width=110, elem_id="sort-by")
        order = gr.Radio(["descending", "ascending"], value="descending", label="Order", min_width=170,
                         elem_id="sort-order")
        columns = gr.Dropdown([(label, key) for key, label in more_columns().items()], value=[], multiselect=True,
                              label="More columns", min_width=160, elem_id="more-columns")
    filter_note = gr.Markdown(elem_id="filter-note")
    export_file = gr.DownloadButton("download", visible="hidden", elem_id="export-file")
    return dict(filters=filters, more=more, more_row=more_row, sort_by=sort_by, order=order, columns=columns,
                export_csv=export_csv, export_parquet=export_parquet, export_file=export_file,
                filter_note=filter_note)


def _build_list() -> dict[str, Any]:
    with gr.Row(equal_height=False, elem_id="browse-split"):
        with gr.Column(scale=5, min_width=320, elem_id="rollout-list"):
            status = gr.Markdown("Loading…", elem_id="browse-status")
            table = gr.Dataframe(pd.DataFrame(columns=list(list_columns().values())), interactive=False,
                                 elem_id="rollouts", max_height=620, datatype="str", wrap=False,
                                 column_widths=list_widths())
            with gr.Row(equal_height=True, elem_id="pager"):
                prev_page = gr.Button("◀", size="sm", scale=0, min_width=44, elem_id="page-prev")
                page_info = gr.Markdown(elem_id="page-info")
                next_page = gr.Button("▶", size="sm", scale=0, min_width=44, elem_id="page-next")
        with gr.Column(scale=7, min_width=320, visible=False, elem_id="rollout-detail") as detail:
            parts = _build_detail()
    message = gr.Markdown(elem_id="rollout-message")
    return dict(status=status, table=table, page_ids=gr.State([]), prev_page=prev_page, page_info=page_info,
                next_page=next_page, detail=detail, message=message, **parts)


def _build_detail() -> dict[str, Any]:
    head = gr.Markdown(elem_id="rollout-head")
    with gr.Row(equal_height=True, elem_id="detail-actions"):
        back = gr.Button("← list", size="sm", scale=0, min_width=70, elem_id="back-to-list")
        share = gr.Textbox(show_label=False, scale=4, min_width=200, elem_id="share-link", container=False,
                           interactive=False, max_lines=1)
        copy = gr.Button("📋 Copy", size="sm", scale=0, min_width=80, elem_id="copy-link")
        export_json = gr.DownloadButton("⬇ JSON", size="sm", scale=0, min_width=80, elem_id="export-json")
        to_compare = gr.Button("⇄ Compare", size="sm", scale=0, min_width=96, elem_id="to-compare")
        flag = gr.Button(flagging.TOGGLE, size="sm", scale=0, min_width=84, elem_id="flag-open")
    flags = flagging.build_flag_box(flag)  # above the chart: a first look at the rollout sees what visitors flagged
    panel = build_rollout_panel("browse-", chart_first=True, fold_optimum=True, usage=True, chat_label="Transcript",
                                chart_options=DETAIL_CHART)
    return dict(head=head, back=back, share=share, copy=copy, export_json=export_json, to_compare=to_compare,
                panel=panel, flags=flags)


def _build_board() -> dict[str, Any]:
    gr.Markdown("Per model over the rollouts the filters let through. Click a model to list its rollouts; click a "
                "column's ⋮ to sort by it; pick a model under the board for its reproducibility card; click a cell "
                "of the heatmap to open that task's best rollout by that model.", elem_id="board-help")
    same_tasks = gr.Checkbox(False, label="Only the tasks every listed model played", elem_id="same-tasks")
    headers, types, widths = board_layout()  # rollouts.board.FIGURES, as the page shows them
    board = gr.Dataframe(pd.DataFrame(columns=headers), interactive=False, elem_id="board", max_height=420,
                         datatype=types, column_widths=widths)
    board_note = gr.Markdown(elem_id="board-note")
    frontier = gr.Plot(show_label=False, elem_id="frontier")
    frontier_note = gr.Markdown(elem_id="frontier-note")
    card_pick = gr.Dropdown([], value=None, label="Reproducibility card: how a model's episodes were played, and "
                            "whether its numbers are verified", elem_id="card-pick")
    card = gr.Markdown(elem_id="model-card")
    heatmap = gr.Dataframe(interactive=False, elem_id="heatmap", max_height=560, label="Mean reward by task and "
                           "model (tasks grouped by tier)", datatype="str")
    convergence = gr.Plot(show_label=False, elem_id="convergence")
    return dict(board=board, board_note=board_note, board_models=gr.State([]), same_tasks=same_tasks,
                frontier=frontier, frontier_note=frontier_note, card_pick=card_pick, card=card,
                heatmap=heatmap, heatmap_cells=gr.State({}), convergence=convergence)


def _build_compare() -> dict[str, Any]:
    compare_pick = gr.Dropdown([], value=None, label="Compare the open rollout (A) with B, another rollout of "
                               "its task", elem_id="compare-pick")
    compare_head = gr.Markdown(elem_id="compare-head")
    compare_step = gr.Slider(minimum=1, maximum=2, value=1, step=1, visible=False, label="Draft, both sides",
                             elem_id="compare-step")
    sides = {}
    with gr.Row(equal_height=False):
        for side in ("a", "b"):
            with gr.Column(min_width=300):
                # Two charts side by side fit their columns (no minimum width): each one shows the whole week.
                sides[side] = build_rollout_panel(f"compare-{side}-", parts=("chart", "chat"),
                                                  chat_label=side.upper(), chat_height=480, compact=True)
    compare_diff = gr.Dataframe(interactive=False, elem_id="compare-diff", label="Ships placed differently",
                                datatype="str", max_height=420)
    return dict(compare_pick=compare_pick, compare_head=compare_head, compare_a=sides["a"], compare_b=sides["b"],
                compare_diff=compare_diff, compare_step=compare_step)


def _build_hidden() -> dict[str, Any]:
    hidden = {"visible": "hidden", "container": False, "show_label": False}
    return dict(state=gr.State(BrowseState()), version=gr.State(-1),
                url=gr.Textbox(elem_id="browse-url", **hidden), title=gr.Textbox(elem_id="browse-title", **hidden),
                link=gr.Textbox(elem_id="browse-link", **hidden),
                popstate=gr.Button("popstate", visible="hidden", elem_id="browse-popstate"),
                next_row=gr.Button("next", visible="hidden", elem_id="browse-next-row"),
                previous_row=gr.Button("previous", visible="hidden", elem_id="browse-previous-row"),
                timer=gr.Timer(5.0, active=False))


def _wire(s: BrowseSection) -> None:
    # Straight to the handler, not through the queue: these are quick, and a visitor is waiting on each click.
    private = {"api_visibility": "private", "show_progress": "hidden", "queue": False}
    out = s.outputs
    gr.on([*changes(s.filters), s.sort_by.input, s.order.input], bind(on.form_changed, s), [s.state, *s.form], out,
          **private)
    s.columns.input(bind(on.columns_changed, s), [s.state, s.columns], out, **private)
    s.more.click(bind(on.toggle_more, s), [s.more], [s.more, s.more_row], **private)
    s.prev_page.click(bind(on.turn_page, s, -1), [s.state], out, **private)
    s.next_page.click(bind(on.turn_page, s, +1), [s.state], out, **private)
    s.table.select(bind(on.open_row, s), [s.state, s.page_ids], out, **private)
    s.next_row.click(bind(on.step_row, s, +1), [s.state, s.page_ids], out, **private)
    s.previous_row.click(bind(on.step_row, s, -1), [s.state, s.page_ids], out, **private)
    s.back.click(bind(on.close_rollout, s), [s.state], out, **private)
    s.panel.plan_step.release(bind(on.show_draft, s), [s.state, s.panel.plan_step, s.panel.steps],
                              [s.panel.chart, s.state, s.url, s.share], **private)
    s.panel.plan_step.release(bind(flagging.draft_moved, s), [s.state, s.panel.plan_step], s.flags.outputs,
                              **private)
    box = s.flags
    box.toggle.click(bind(flagging.toggle_form, s), [box.toggle], [box.toggle, box.form], **private)
    box.button.click(bind(flagging.flag_clicked, s), [s.state, box.kind, box.step, box.label, box.note],
                     [*box.outputs, box.note], **private)
    box.hide_button.click(bind(flagging.hide_clicked, s), [s.state, box.hide_id], [*box.outputs, box.hide_id],
                          **private)
    s.compare_pick.input(bind(on.pick_compare, s), [s.state, s.compare_pick], out, **private)
    s.to_compare.click(bind(on.show_compare, s), [s.state], out, **private)
    s.compare_step.release(bind(on.compare_step_moved, s), [s.state, s.compare_step], out, **private)
    s.copy.click(None, [s.share], None, js=COPY_JS, **private)
    s.panel.optimal_box.expand(bind(on.show_optimum, s), [s.state], [s.panel.optimal], **private)
    s.board.select(bind(on.pick_model, s), [s.state, s.board_models], out, **private)
    s.heatmap.select(bind(on.open_cell, s), [s.state, s.heatmap_cells], out, **private)
    s.same_tasks.input(bind(on.same_tasks_changed, s), [s.state, s.same_tasks],
                       [s.board, s.board_models, s.frontier, s.frontier_note, s.card_pick, s.card, s.state],
                       **private)
    s.card_pick.input(bind(on.show_card, s), [s.state, s.card_pick], [s.card], **private)
    s.views.select(bind(on.view_selected, s), [s.state], out, **private)
    # Back twice in a row: the last URL is the one to show.
    s.popstate.click(bind(on.apply_popstate, s), [s.link, s.state], out, js=READ_LOCATION_JS,
                     trigger_mode="always_last", **private)
    s.timer.tick(bind(on.refresh_if_changed, s), [s.state, s.version], out, **private)
    s.url.change(None, [s.url], None, js=PUSH_URL_JS, **private)
    s.title.change(None, [s.title], None, js=SET_TITLE_JS, **private)
    for fmt, button in (("csv", s.export_csv), ("parquet", s.export_parquet)):
        button.click(bind(on.export_rows, s, fmt), [s.state], [s.export_file, s.filter_note], **private).then(
            None, js=DOWNLOAD_JS, **private)


SECTION = Section("Browse", "browse", CSS, build_browse_section, wire_page_load, routes=(
    Route("browse_rollouts", browse_api.browse_rollouts), Route("browse_leaderboard", browse_api.browse_leaderboard),
    Route("browse_record", browse_api.browse_record), Route("browse_model_card", browse_api.browse_model_card),
    Route("flag_step", flagging.flag_step), Route("hide_flag", flagging.hide_flag)))
