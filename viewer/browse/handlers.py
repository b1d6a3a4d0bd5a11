"""Browse's handlers: each turns an event into a new `BrowseState`, and `render` updates what that change touches.

The list and the status are cheap and always redrawn; the open rollout only when another one opens; the
leaderboard and the heatmap only while their view is shown; the compare only when its pair changes. Handlers are
top-level functions taking the section first (wired with viewer.wiring.bind) and returning dicts by component.
"""

from __future__ import annotations

import logging
from typing import Any

import gradio as gr

from rollouts.archive import RolloutNotFound
from rollouts.board_text import board_notes, price_note
from rollouts.filters import BY_NAME, FILTERS, PAGE_SIZE
from rollouts.frontier import frontier
from rollouts.links import beat_query
from rollouts.matches import vote_tally
from rollouts.record import Record
from rollouts.sources import SourceError
from viewer.browse.compare_steps import gap_side_by_side, shown_step, side_draft, side_title, step_lines
from viewer.browse.components import BrowseSection
from viewer.browse.filter_form import read_form, show_filters
from viewer.browse.flags import flag_form
from viewer.browse.frontier_figure import frontier_figure, frontier_note
from viewer.browse.model_card import model_card
from viewer.browse.state import VIEWS, BrowseState, state_from_query
from viewer.browse.views import (
    arena_note,
    board_table,
    compare_header,
    detail_header,
    heatmap_table,
    list_table,
    page_title,
    plan_diff,
    status_markdown,
)
from viewer.chart import berth_chart, moved_ships, paired_charts
from viewer.convergence import convergence_figure
from viewer.downloads import SHARED, DownloadRefused
from viewer.markdown import escape_cell, fmt_num
from viewer.rollout_panel import cleared, draft, optimum, stored_rollout
from viewer.visitors import visitor_of
from viewer.wiring import base_url, unchanged

log = logging.getLogger(__name__)
APP_TITLE = "Berth-planning agent arena"
BOARD_NOTE = ("Mean reward with its 95% bootstrap interval; beat naive: the submitted plan is feasible and cheaper "
              "than the naive re-plan; checks to feasible: the median number of checks until the first feasible "
              "one (among rollouts that found one); ")


# -- from the page to a state ------------------------------------------------------------------------------------

def form_state(state: BrowseState, *values: Any) -> BrowseState:
    """The state the bar's values ask for (the filters in FILTERS order, then the sort and its order); a new search
    or filter starts again at page 1."""
    *filters, sort, order = values
    return state.with_(filters=read_form(filters), sort=sort or "started", descending=order != "ascending", page=1)


def form_changed(section: BrowseSection, state: BrowseState, *values: Any) -> dict:
    return render(section, state, form_state(state, *values))


def columns_changed(section: BrowseSection, state: BrowseState, columns: list[str]) -> dict:
    return render(section, state, state.with_(columns=tuple(columns or ())), force_list=True)


def toggle_more(section: BrowseSection, label: str) -> dict:
    opening = label.endswith("▾")
    return {section.more: gr.Button("Filters ▴" if opening else "Filters ▾"),
            section.more_row: gr.Row(visible=opening)}


def turn_page(section: BrowseSection, step: int, state: BrowseState) -> dict:
    return render(section, state, state.with_(page=max(1, state.page + step)))


def open_row(section: BrowseSection, state: BrowseState, ids: list[str], evt: gr.SelectData,
             request: gr.Request = None) -> dict:
    row = evt.index[0] if isinstance(evt.index, list | tuple) else evt.index
    if not isinstance(row, int) or not 0 <= row < len(ids):
        return unchanged(section.state)
    return render(section, state, state.with_(step=0, rollout=ids[row], compare="", view="list"), base=base_url(request),
                  visitor=visitor_of(request))


def step_row(section: BrowseSection, step: int, state: BrowseState, ids: list[str],
             request: gr.Request = None) -> dict:
    """The arrow keys: open the next (or previous) row of the page."""
    if not ids:
        return unchanged(section.state)
    at = ids.index(state.rollout) + step if state.rollout in ids else 0
    return render(section, state, state.with_(step=0, rollout=ids[max(0, min(at, len(ids) - 1))], compare=""),
                  base=base_url(request),
                  visitor=visitor_of(request))


def close_rollout(section: BrowseSection, state: BrowseState) -> dict:
    return render(section, state, state.with_(step=0, rollout="", compare="", view="list"))


def pick_compare(section: BrowseSection, state: BrowseState, other: str | None) -> dict:
    if not other:
        return unchanged(section.state)
    return render(section, state, state.with_(compare=other, view="compare"))


def show_compare(section: BrowseSection, state: BrowseState) -> dict:
    return render(section, state, state.with_(view="compare"))


def pick_model(section: BrowseSection, state: BrowseState, models: list[str], evt: gr.SelectData) -> dict:
    """A click on a leaderboard row lists that model's rollouts."""
    row = evt.index[0] if isinstance(evt.index, list | tuple) else evt.index
    if not isinstance(row, int) or not 0 <= row < len(models):
        return unchanged(section.state)
    filters = state.filters.with_(model=(models[row],))
    return render(section, state, state.with_(filters=filters, view="list", page=1), form=True)


def open_cell(section: BrowseSection, state: BrowseState, cells: dict, evt: gr.SelectData,
              request: gr.Request = None) -> dict:
    """A click on a heatmap cell opens that task's best rollout by that model."""
    row, column = (evt.index if isinstance(evt.index, list | tuple) else (None, None))[:2]
    episode_id = cells.get(f"{row},{column}")
    if not episode_id:
        return unchanged(section.state)
    return render(section, state, state.with_(step=0, rollout=episode_id, compare="", view="list"), base=base_url(request),
                  visitor=visitor_of(request))


def same_tasks_changed(section: BrowseSection, state: BrowseState, same: bool) -> dict:
    lines = section.ctx.archive.board(state.filters, same_tasks=bool(same))  # with the arena's figures
    return {section.board: board_table(lines), section.board_models: [line["model"] for line in lines],
            **frontier_view(section, lines), section.state: state.with_(same_tasks=bool(same))}


def frontier_view(section: BrowseSection, lines: list[dict]) -> dict:
    """The frontier of these board lines, and the card's choice of their models (the card itself cleared)."""
    figure = frontier(lines)
    return {section.frontier: frontier_figure(figure), section.frontier_note: frontier_note(figure),
            section.card_pick: gr.Dropdown(choices=[line["model"] for line in lines], value=None),
            section.card: ""}


def show_card(section: BrowseSection, state: BrowseState, model: str | None) -> dict:
    """The picked model's reproducibility card (rollouts.board_trust) over the board's rows."""
    if not model:
        return {section.card: ""}
    return {section.card: model_card(section.ctx.archive, state.filters, model, same_tasks=state.same_tasks)}


def view_selected(section: BrowseSection, state: BrowseState, evt: gr.SelectData) -> dict:
    view = VIEWS[evt.index] if isinstance(evt.index, int) and 0 <= evt.index < len(VIEWS) else "list"
    return render(section, state, state.with_(view=view))


def show_optimum(section: BrowseSection, state: BrowseState) -> dict:
    """The open rollout's last plan over the task's proven optimum (drawn when its accordion opens)."""
    try:
        view = section.ctx.records.find(state.rollout, running=False).record
    except (RolloutNotFound, SourceError):
        return unchanged(section.panel.optimal)
    return {section.panel.optimal: optimum(view, _task(section, view))}


def show_draft(section: BrowseSection, state: BrowseState, position: float, steps: list[dict],
               request: gr.Request = None) -> dict:
    """The slider moved: that draft drawn, and the URL and the share link name it (`step`)."""
    try:
        view = section.ctx.records.find(state.rollout, running=False).record
    except (RolloutNotFound, SourceError):
        return unchanged(section.panel.chart)
    new = state.with_(step=int(position or 0) if len(steps) > 1 else 0)
    return {section.panel.chart: draft(section.panel, _task(section, view), steps, position),
            section.state: new, section.url: new.to_query(),
            section.share: share_link(section, new, base_url(request))}


def share_link(section: BrowseSection, state: BrowseState, base: str | None) -> str:
    """The open rollout's share page, at the draft on the slider when one is chosen (`/r/<id>/step/<k>`)."""
    link = section.ctx.rollout_link(state.rollout, base)
    return f"{link}/step/{state.step}" if state.step else link


def load_page(section: BrowseSection, request: gr.Request) -> dict:
    """The page's own URL at load: a Browse link opens the Browse tab on the view it asks for; any other link leaves
    Browse to fill itself when its tab is opened."""
    query = request.query_params if request is not None else {}
    if not (query.get("tab") == "browse" or query.get("rollout")):
        return unchanged(section.state)
    new = state_from_query(str(request.url.query))
    return {**render(section, None, new, form=True, base=base_url(request),
                  visitor=visitor_of(request)), section.app_tabs: gr.Tabs(selected="browse")}


def apply_popstate(section: BrowseSection, query: str, state: BrowseState, request: gr.Request = None) -> dict:
    """Back or forward in the browser: the state that URL holds (the page's own query, read in the browser)."""
    new = state_from_query(query or "")
    return render(section, state, new.with_(columns=state.columns, same_tasks=state.same_tasks), form=True,
                  base=base_url(request),
                  visitor=visitor_of(request))


def refresh_if_changed(section: BrowseSection, state: BrowseState, version: int) -> dict:
    """The timer: new rows (a rollout just played, a Hub load) redraw the list; otherwise nothing moves."""
    archive = section.ctx.archive
    archive.refresh_local()
    if archive.version == version:
        return unchanged(section.version)
    return render(section, state, state, force_list=True)


def tab_selected(section: BrowseSection, state: BrowseState) -> dict:
    """Browse opened: rows at once (the local folder is re-read), then the timer keeps them fresh."""
    section.ctx.archive.refresh_local(force=True)
    return {**render(section, state, state, force_list=True), section.timer: gr.Timer(active=True)}


def export_rows(section: BrowseSection, fmt: str, state: BrowseState, request: gr.Request = None) -> dict:
    """The list as a file to download, within the downloads' bounds (viewer/downloads.py): a refusal is shown,
    saying why, and the button is left with nothing to fetch."""
    ctx = section.ctx
    try:
        path = ctx.downloads.make_in(lambda folder: ctx.archive.export(
            state.filters, folder, fmt=fmt, sort=state.sort, descending=state.descending), visitor=visitor_of(request))
    except DownloadRefused as exc:
        return {section.export_file: gr.DownloadButton(value=None), section.filter_note: f"⚠️ {escape_cell(str(exc))}"}
    return {section.export_file: gr.DownloadButton(value=str(path)), section.filter_note: problems_note(state)}


# -- from a state to the page ------------------------------------------------------------------------------------

def render(section: BrowseSection, old: BrowseState | None, new: BrowseState, *, form: bool = False,
           force_list: bool = False, base: str | None = None, visitor: str = SHARED) -> dict:
    out: dict = {section.state: new, section.url: new.to_query(), section.views: gr.Tabs(selected=new.view)}
    if form:
        out.update(form_values(section, new))
    if force_list or old is None or _list_key(old) != _list_key(new):
        out.update(list_view(section, new))
    if old is None or (old.rollout, old.step) != (new.rollout, new.step):
        out.update(detail_view(section, new, base, visitor))
    if new.view == "board" and (old is None or old.view != "board" or _list_key(old) != _list_key(new)
                                or force_list):
        out.update(board_view(section, new))
    # Drawn when shown (A is there at once, B once picked), not on every rollout opened in the list.
    if new.view == "compare" and (old is None or old.view != "compare"
                                  or (old.rollout, old.compare, old.step) != (new.rollout, new.compare, new.step)):
        out.update(compare_view(section, new))
    return out


def _list_key(state: BrowseState) -> tuple:
    return (state.filters.key(), state.sort, state.descending, state.page, state.columns)


def form_values(section: BrowseSection, state: BrowseState) -> dict:
    """The bar showing a state that came from a URL or a click; the folded filters open when one of them is set."""
    more = any(state.filters.is_set(f.name) for f in FILTERS if f.place == "more") or state.sort != "started" \
        or not state.descending
    return {section.more_row: gr.Row(visible=more), section.more: gr.Button("Filters ▴" if more else "Filters ▾"),
            **show_filters(section.filters, state.filters), section.sort_by: state.sort,
            section.order: "descending" if state.descending else "ascending"}


def list_view(section: BrowseSection, state: BrowseState) -> dict:
    archive, filters = section.ctx.archive, state.filters
    rows, total, page, pages = archive.query(filters, sort=state.sort, descending=state.descending, page=state.page)
    first = (page - 1) * PAGE_SIZE + 1
    info = f"{first:,}–{first + rows.num_rows - 1:,} of {total:,} · page {page} of {pages}" if total else \
        "no rollouts match"
    choices = archive.options()
    return {section.table: list_table(rows, state.columns),
            section.page_ids: [str(e) for e in rows.column("episode_id").to_pylist()],
            section.page_info: info, section.version: archive.version,
            section.status: status_markdown(archive.statuses(), shown=total, total=archive.total()),
            section.filter_note: problems_note(state),
            **{section.filters[name]: gr.Dropdown(choices=_with(values, filters[name]))
               for name, values in choices.items() if BY_NAME[name].kind == "choices"}}


def problems_note(state: BrowseState) -> str:
    """The line under the bar: what was wrong with the link's or the form's values, if anything."""
    problems = [*state.problems, *state.filters.problems]
    return ("⚠️ " + " · ".join(escape_cell(p) for p in problems)) if problems else ""


def _with(choices: list[str], chosen: tuple[str, ...]) -> list[str]:
    """The values a filter offers, including those a link chose that no row has (so it shows what was asked)."""
    return choices + [c for c in chosen if c not in choices]


def detail_view(section: BrowseSection, state: BrowseState, base: str | None, visitor: str = SHARED) -> dict:
    if not state.rollout:
        return {section.detail: gr.Column(visible=False), section.message: "", section.head: "",
                section.title: APP_TITLE}
    ctx = section.ctx
    try:
        found = ctx.records.find(state.rollout, running=False)
        view, row = found.record, found.row
    except (RolloutNotFound, SourceError) as exc:
        return {section.detail: gr.Column(visible=False), section.head: "", section.title: APP_TITLE,
                section.message: f"⚠️ Rollout `{escape_cell(state.rollout)}`: {escape_cell(str(exc))}"}
    task = _task(section, view)
    note = "" if task else "This task is not in this Space's task pack, so its plans cannot be drawn."
    download, refused = _record_download(ctx, state.rollout, view, visitor)
    others = ctx.archive.same_task(view.task_id, exclude=state.rollout)
    picks = [(f"B: {r['model']} · {float(r['reward'] or 0):.3f} · {r['episode_id']}", str(r["episode_id"]))
             for r in others]
    return {section.detail: gr.Column(visible=True), section.message: " ".join(filter(None, (note, refused))),
            section.head: detail_header(view, row) + _beat_line(ctx, view, task, base), section.title: page_title(view),
            section.share: share_link(section, state.with_(step=state.step if state.step <= len(view.drafts) else 0),
                                      base),
            section.export_json: download,
            section.compare_pick: gr.Dropdown(choices=picks, value=state.compare or None,
                                              label=f"Compare A with B: {len(picks)} more rollouts of this task"),
            **stored_rollout(section.panel, view, task, at=state.step),
            **(flag_form(ctx, section.flags, state.rollout, view) if section.flags else {})}


def _beat_line(ctx: Any, view: Record, task: dict | None, base: str | None) -> str:
    """"Try to beat this": Play on the rollout's task with its last plan loaded (where the plan can be drawn)."""
    if task is None or not view.plan_steps:
        return ""
    # On the header's last line: a line of its own would push the transcript out of a laptop's first screen.
    return f" · [▶ Try to beat this in Play]({ctx.share_link(beat_query(view.task_id, view.episode_id), base)})"


def _record_download(ctx: Any, episode_id: str, view: Record, visitor: str) -> tuple[gr.DownloadButton, str]:
    """The open rollout's JSON to download, or, past the downloads' bounds, a button with nothing to fetch and
    the line saying why."""
    try:
        return gr.DownloadButton(value=str(ctx.downloads.record_json(episode_id, view.data, visitor=visitor)), interactive=True), ""
    except DownloadRefused as exc:
        return gr.DownloadButton(value=None, interactive=False), f"⚠️ JSON download: {escape_cell(str(exc))}"


def board_view(section: BrowseSection, state: BrowseState) -> dict:
    archive, filters = section.ctx.archive, state.filters
    lines = archive.board(filters, same_tasks=state.same_tasks)
    heat = archive.heatmap(filters)
    cells = {f"{i},{j + 2}": episode for i, row in enumerate(heat.best) for j, episode in enumerate(row) if episode}
    matches = section.ctx.matches
    note = arena_note(archive.ratings(filters), vote_tally(matches.public_rows()) if matches else {})
    return {section.board: board_table(lines), section.board_models: [line["model"] for line in lines],
            **frontier_view(section, lines),
            section.board_note: BOARD_NOTE + escape_cell(price_note()) + "  \n"
                                + "".join(f"{escape_cell(n)}.  \n" for n in board_notes(lines)) + note,
            section.convergence: convergence_figure(curves=archive.convergence(filters)),
            section.heatmap: gr.Dataframe(heatmap_table(heat), column_widths=["84px", "230px",
                                                                              *["150px"] * len(heat.models)]),
            section.heatmap_cells: cells}


def compare_view(section: BrowseSection, state: BrowseState) -> dict:
    """A (the open rollout) at once, and B beside it once picked: both plans on one time axis, the ships placed
    differently highlighted in both, and their table."""
    a_side, b_side = section.compare_a, section.compare_b
    empty = {**cleared(a_side), **cleared(b_side), section.compare_diff: None,
             section.compare_step: gr.Slider(visible=False)}
    if not state.rollout:
        return {**empty, section.compare_head: "Open a rollout in **Rollouts** first (it becomes A), then pick B here."}
    try:
        a = section.ctx.records.find(state.rollout, running=False).record
        b = section.ctx.records.find(state.compare, running=False).record if state.compare else None
    except (RolloutNotFound, SourceError) as exc:
        return {**empty, section.compare_head: f"⚠️ {escape_cell(str(exc))}"}
    task, plan_a = _task(section, a), a.final_plan
    if b is None:  # A alone until B is picked
        chart = berth_chart(task, plan_a, published=False, cranes=False,
                            title=f"A: {a.model}") if task is not None else None
        return {**empty, **stored_rollout(a_side, a, task, chart=chart),
                section.compare_head: f"**A** {escape_cell(a.model)} · reward **{fmt_num(a.reward)}**"
                                      "  \nPick B above: another rollout of the same task."}
    if a.task_id != b.task_id:
        return {**empty, section.compare_head: f"⚠️ A is on {escape_cell(a.task_id)} and B on "
                                              f"{escape_cell(b.task_id)}: compare needs two rollouts of "
                                              "the same task."}
    if task is None:
        return {**empty, section.compare_head: compare_header(a, b, 0) + "  \nThis task is not in this Space's "
                                                                         "task pack, so the plans cannot be drawn."}
    # Lined up by draft number: draft k of A beside draft k of B (a side that sent fewer shows its last).
    k = shown_step(a, b, state.step)
    draft_a, draft_b = side_draft(a, k), side_draft(b, k)
    plan_a, plan_b = (d.plan if d is not None else v.final_plan for d, v in ((draft_a, a), (draft_b, b)))
    chart_a, chart_b = paired_charts(task, plan_a, plan_b,
                                     titles=(side_title("A", a, draft_a, k), side_title("B", b, draft_b, k)))
    most = max(len(a.drafts), len(b.drafts))
    head = "\n\n".join((compare_header(a, b, len(moved_ships(task, plan_a, plan_b))) + f" (at draft {k})",
                         step_lines(a, b, k, task), gap_side_by_side(a, b, task)))
    return {section.compare_head: head,
            **stored_rollout(a_side, a, task, chart=chart_a), **stored_rollout(b_side, b, task, chart=chart_b),
            section.compare_diff: plan_diff(task, plan_a, plan_b),
            section.compare_step: gr.Slider(minimum=1, maximum=max(most, 2), value=k, step=1, visible=most > 1,
                                            label=f"Draft, both sides (1-{most})")}


def compare_step_moved(section: BrowseSection, state: BrowseState, position: float) -> dict:
    """The compare's one slider: both sides at that draft, and the compare's address names it."""
    return render(section, state, state.with_(step=int(position or 0)))


def _task(section: BrowseSection, view: Record) -> dict | None:
    """The full task of a record (its plans drawn against it), when this Space has it."""
    return section.ctx.task_for(view.task_id, None)
