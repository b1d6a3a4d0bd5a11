"""Browse's handlers: each turns an event into a new `BrowseState`, and `render` updates what that change touches.

The list and the status are cheap and always redrawn; the open rollout only when another one opens; the
leaderboard and the heatmap only while their view is shown; the compare only when its pair changes. Handlers are
top-level functions taking the section first (wired with viewer.wiring.bind) and returning dicts by component.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import gradio as gr

from rollouts.index import RolloutNotFound
from rollouts.jsonio import atomic_write
from rollouts.leaderboard import price_note
from rollouts.query import PAGE_SIZE
from rollouts.sources import SourceError
from viewer.browse_components import BrowseSection
from viewer.browse_state import VIEWS, BrowseState, state_from_query
from viewer.browse_views import (
    board_table,
    compare_header,
    detail_header,
    heatmap_table,
    list_table,
    page_title,
    plan_diff,
    status_markdown,
)
from viewer.chart import berth_chart, moved_ships, optimum_chart, step_chart
from viewer.convergence import convergence_figure
from viewer.markdown import escape_cell
from viewer.replay import record_messages
from viewer.summary import grade_panel, usage_summary
from viewer.wiring import base_url, unchanged

log = logging.getLogger(__name__)
APP_TITLE = "Berth-planning agent arena"
BOARD_NOTE = ("Mean reward with its 95% bootstrap interval; beat naive: the submitted plan is feasible and cheaper "
              "than the naive re-plan; checks to feasible: the median number of checks until the first feasible "
              "one (among rollouts that found one); ")
# Short enough that the header, the chart and the top of the transcript share the first screen beside the list.
DETAIL_CHART = {"height": 330, "cranes": False}


# -- from the page to a state ------------------------------------------------------------------------------------

def form_state(state: BrowseState, search: str, models: list[str], tasks: list[str], tiers: list[str],
               quays: list[str], sources: list[str], submitted: str, feasible: str, reward_min: float | None,
               reward_max: float | None, date_from: str, date_to: str, sort: str, order: str) -> BrowseState:
    """The state the bar's values ask for; a new search or filter starts again at page 1."""
    low = None if reward_min in (None, 0, 0.0) else float(reward_min)
    high = None if reward_max in (None, 1, 1.0) else float(reward_max)
    return state.with_(q=" ".join((search or "").split())[:200], models=tuple(models or ()),
                       tasks=tuple(tasks or ()), tiers=tuple(tiers or ()), quays=tuple(quays or ()),
                       sources=tuple(sources or ()), submitted=submitted or "any", feasible=feasible or "any",
                       reward_min=low, reward_max=high, date_from=(date_from or "").strip(),
                       date_to=(date_to or "").strip(), sort=sort or "started", descending=order != "ascending",
                       page=1)


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
    return render(section, state, state.with_(rollout=ids[row], compare="", view="list"), base=base_url(request))


def step_row(section: BrowseSection, step: int, state: BrowseState, ids: list[str],
             request: gr.Request = None) -> dict:
    """The arrow keys: open the next (or previous) row of the page."""
    if not ids:
        return unchanged(section.state)
    at = ids.index(state.rollout) + step if state.rollout in ids else 0
    return render(section, state, state.with_(rollout=ids[max(0, min(at, len(ids) - 1))], compare=""),
                  base=base_url(request))


def close_rollout(section: BrowseSection, state: BrowseState) -> dict:
    return render(section, state, state.with_(rollout="", compare="", view="list"))


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
    return render(section, state, state.with_(models=(models[row],), view="list", page=1), form=True)


def open_cell(section: BrowseSection, state: BrowseState, cells: dict, evt: gr.SelectData,
              request: gr.Request = None) -> dict:
    """A click on a heatmap cell opens that task's best rollout by that model."""
    row, column = (evt.index if isinstance(evt.index, list | tuple) else (None, None))[:2]
    episode_id = cells.get(f"{row},{column}")
    if not episode_id:
        return unchanged(section.state)
    return render(section, state, state.with_(rollout=episode_id, compare="", view="list"), base=base_url(request))


def same_tasks_changed(section: BrowseSection, state: BrowseState, same: bool) -> dict:
    board = section.index.board(state.filters(), same_tasks=bool(same))
    return {section.board: board_table(board), section.board_models: [str(m) for m in board["model"]],
            section.state: state.with_(same_tasks=bool(same))}


def view_selected(section: BrowseSection, state: BrowseState, evt: gr.SelectData) -> dict:
    view = VIEWS[evt.index] if isinstance(evt.index, int) and 0 <= evt.index < len(VIEWS) else "list"
    return render(section, state, state.with_(view=view))


def show_optimum(section: BrowseSection, state: BrowseState) -> dict:
    """The open rollout's last plan over the task's proven optimum (drawn when its accordion opens)."""
    try:
        record, _ = section.records.get(state.rollout)
    except (RolloutNotFound, SourceError):
        return unchanged(section.optimal)
    task = section.ctx.task_for(str(record.get("task_id") or ""), None)
    plans = plan_steps_of(record)
    last = plans[-1].get("plan") if plans else None
    return {section.optimal: optimum_chart(task, last, label=f"{record.get('model')}'s last plan")}


def show_draft(section: BrowseSection, state: BrowseState, position: float, steps: list[dict]) -> dict:
    task = _task(section, state.rollout)
    return {section.chart: step_chart(task, steps, int(position or 1) - 1, **DETAIL_CHART)}


def load_page(section: BrowseSection, request: gr.Request) -> dict:
    """The page's own URL at load: a Browse link opens the Browse tab on the view it asks for; any other link leaves
    Browse to fill itself when its tab is opened."""
    query = request.query_params if request is not None else {}
    if not (query.get("tab") == "browse" or query.get("rollout")):
        return unchanged(section.state)
    new = state_from_query(str(request.url.query))
    return {**render(section, None, new, form=True, base=base_url(request)), section.app_tabs: gr.Tabs(selected="browse")}


def apply_popstate(section: BrowseSection, query: str, state: BrowseState, request: gr.Request = None) -> dict:
    """Back or forward in the browser: the state that URL holds (the page's own query, read in the browser)."""
    new = state_from_query(query or "")
    return render(section, state, new.with_(columns=state.columns, same_tasks=state.same_tasks), form=True,
                  base=base_url(request))


def refresh_if_changed(section: BrowseSection, state: BrowseState, version: int) -> dict:
    """The timer: new rows (a rollout just played, a Hub load) redraw the list; otherwise nothing moves."""
    section.index.refresh_local()
    if section.index.version == version:
        return unchanged(section.version)
    return render(section, state, state, force_list=True)


def tab_selected(section: BrowseSection, state: BrowseState) -> dict:
    """Browse opened: rows at once (the local folder is re-read), then the timer keeps them fresh."""
    section.index.refresh_local(force=True)
    return {**render(section, state, state, force_list=True), section.timer: gr.Timer(active=True)}


def export_rows(section: BrowseSection, fmt: str, state: BrowseState) -> dict:
    path = section.index.export(state.filters(), section.export_dir, fmt=fmt, sort=state.sort,
                                descending=state.descending)
    return {section.export_file: gr.DownloadButton(value=str(path))}


# -- from a state to the page ------------------------------------------------------------------------------------

def render(section: BrowseSection, old: BrowseState | None, new: BrowseState, *, form: bool = False,
           force_list: bool = False, base: str | None = None) -> dict:
    out: dict = {section.state: new, section.url: new.to_query(), section.views: gr.Tabs(selected=new.view)}
    if form:
        out.update(form_values(section, new))
    if force_list or old is None or _list_key(old) != _list_key(new):
        out.update(list_view(section, new))
    if old is None or old.rollout != new.rollout:
        out.update(detail_view(section, new, base))
    if new.view == "board" and (old is None or old.view != "board" or _list_key(old) != _list_key(new)
                                or force_list):
        out.update(board_view(section, new))
    if old is None or (old.rollout, old.compare) != (new.rollout, new.compare):
        out.update(compare_view(section, new))
    return out


def _list_key(state: BrowseState) -> tuple:
    return (state.filters().key(), state.sort, state.descending, state.page, state.columns)


def form_values(section: BrowseSection, state: BrowseState) -> dict:
    """The bar showing a state that came from a URL or a click; the folded filters open when one of them is set."""
    more = bool(state.quays or state.sources or state.submitted != "any" or state.feasible != "any"
                or state.reward_min is not None or state.reward_max is not None or state.date_from or state.date_to
                or state.sort != "started" or not state.descending)
    return {section.more_row: gr.Row(visible=more), section.more: gr.Button("Filters ▴" if more else "Filters ▾"),
            section.search: state.q, section.f_model: gr.Dropdown(value=list(state.models)),
            section.f_task: gr.Dropdown(value=list(state.tasks)), section.f_tier: list(state.tiers),
            section.f_quay: gr.Dropdown(value=list(state.quays)), section.f_source: list(state.sources),
            section.f_submitted: state.submitted, section.f_feasible: state.feasible,
            section.f_reward_min: state.reward_min if state.reward_min is not None else 0,
            section.f_reward_max: state.reward_max if state.reward_max is not None else 1,
            section.f_from: state.date_from, section.f_to: state.date_to, section.sort_by: state.sort,
            section.order: "descending" if state.descending else "ascending"}


def list_view(section: BrowseSection, state: BrowseState) -> dict:
    index = section.index
    filters = state.filters()
    rows, total, page, pages = index.query(filters, sort=state.sort, descending=state.descending, page=state.page)
    first = (page - 1) * PAGE_SIZE + 1
    info = f"{first:,}–{first + len(rows) - 1:,} of {total:,} · page {page} of {pages}" if total else \
        "no rollouts match"
    problems = [*state.problems, *filters.problems]
    choices = index.options()
    return {section.table: list_table(rows, state.columns), section.page_ids: [str(e) for e in rows["episode_id"]],
            section.page_info: info, section.version: index.version,
            section.status: status_markdown(index.statuses(), shown=total, total=index.total()),
            section.filter_note: ("⚠️ " + " · ".join(escape_cell(p) for p in problems)) if problems else "",
            section.f_model: gr.Dropdown(choices=_with(choices["models"], state.models)),
            section.f_task: gr.Dropdown(choices=_with(choices["tasks"], state.tasks)),
            section.f_quay: gr.Dropdown(choices=_with(choices["quays"], state.quays))}


def _with(choices: list[str], chosen: tuple[str, ...]) -> list[str]:
    """The values a filter offers, including those a link chose that no row has (so it shows what was asked)."""
    return choices + [c for c in chosen if c not in choices]


def detail_view(section: BrowseSection, state: BrowseState, base: str | None) -> dict:
    if not state.rollout:
        return {section.detail: gr.Column(visible=False), section.message: "", section.head: "",
                section.title: APP_TITLE}
    try:
        record, row = section.records.get(state.rollout)
    except (RolloutNotFound, SourceError) as exc:
        return {section.detail: gr.Column(visible=False), section.head: "", section.title: APP_TITLE,
                section.message: f"⚠️ Rollout `{escape_cell(state.rollout)}`: {escape_cell(str(exc))}"}
    episode_id = str(record.get("episode_id") or state.rollout)
    task = section.ctx.task_for(str(record.get("task_id") or ""), None)
    plans = plan_steps_of(record)
    count = len(plans)
    note = "" if task else "This task is not in this Space's task pack, so its plans cannot be drawn."
    others = section.index.same_task(str(record.get("task_id") or ""), exclude=episode_id)
    picks = [(f"B: {r['model']} · {float(r['reward']):.3f} · {r['episode_id']}", str(r["episode_id"]))
             for r in others[["episode_id", "model", "reward"]].to_dict("records")]
    return {section.detail: gr.Column(visible=True), section.message: note,
            section.head: detail_header(record, row), section.title: page_title(record),
            section.share: section.ctx.share_link(f"tab=browse&rollout={episode_id}", base),
            section.export_json: gr.DownloadButton(value=str(_json_file(section, record, episode_id))),
            section.compare_pick: gr.Dropdown(choices=picks, value=state.compare or None,
                                              label=f"Compare A with B: {len(picks)} more rollouts of this task"),
            section.chart: step_chart(task, plans, count - 1, **DETAIL_CHART),
            section.plan_step: gr.Slider(minimum=1, maximum=max(count, 2), value=max(count, 1), step=1,
                                         visible=count > 1, label=f"Draft (1-{count})"),
            section.steps: plans, section.chat: record_messages(record, task), section.grade: grade_panel(record, task),
            section.usage: usage_summary(record), section.optimal: None,
            section.optimal_box: gr.Accordion(open=False, visible=bool((task or {}).get("reference")))}


def _json_file(section: BrowseSection, record: dict, episode_id: str) -> Any:
    path = section.export_dir / f"{episode_id}.json"
    if not path.is_file():
        atomic_write(path, json.dumps(record, ensure_ascii=False, indent=1).encode())
    return path


def board_view(section: BrowseSection, state: BrowseState) -> dict:
    filters = state.filters()
    board = section.index.board(filters, same_tasks=state.same_tasks)
    heat = section.index.heatmap(filters)
    curves = section.index.convergence(filters)
    cells = {f"{i},{j + 2}": episode for i, row in enumerate(heat.best) for j, episode in enumerate(row) if episode}
    return {section.board: board_table(board), section.board_models: [str(m) for m in board["model"]],
            section.board_note: BOARD_NOTE + escape_cell(price_note()),
            section.convergence: convergence_figure(curves=curves),
            section.heatmap: gr.Dataframe(heatmap_table(heat), column_widths=["84px", "230px",
                                                                              *["150px"] * len(heat.models)]),
            section.heatmap_cells: cells}


def compare_view(section: BrowseSection, state: BrowseState) -> dict:
    empty = {section.compare_chart_a: None, section.compare_chart_b: None, section.compare_diff: None,
             section.compare_chat_a: [], section.compare_chat_b: []}
    if not (state.rollout and state.compare):
        hint = ("Pick B above." if state.rollout else
                "Open a rollout in **Rollouts** first (it becomes A), then pick B here.")
        return {**empty, section.compare_head: hint}
    try:
        a, _ = section.records.get(state.rollout)
        b, _ = section.records.get(state.compare)
    except (RolloutNotFound, SourceError) as exc:
        return {**empty, section.compare_head: f"⚠️ {escape_cell(str(exc))}"}
    if a.get("task_id") != b.get("task_id"):
        return {**empty, section.compare_head: f"⚠️ A is on {escape_cell(a.get('task_id'))} and B on "
                                              f"{escape_cell(b.get('task_id'))}: compare needs two rollouts of "
                                              "the same task."}
    task = section.ctx.task_for(str(a.get("task_id") or ""), None)
    plan_a, plan_b = final_plan(a), final_plan(b)
    if task is None:
        return {**empty, section.compare_head: compare_header(a, b, 0) + "  \nThis task is not in this Space's "
                                                                         "task pack, so the plans cannot be drawn."}
    differ = moved_ships(task, plan_a, plan_b)
    label = "placed differently by A and B"

    def chart(record: dict, plan: Any, side: str) -> Any:
        return berth_chart(task, plan, highlight=differ, highlight_label=label, published=False, cranes=False,
                           title=f"{side}: {record.get('model')}")

    return {section.compare_head: compare_header(a, b, len(differ)),
            section.compare_chart_a: chart(a, plan_a, "A"), section.compare_chart_b: chart(b, plan_b, "B"),
            section.compare_diff: plan_diff(task, plan_a, plan_b),
            section.compare_chat_a: record_messages(a, task), section.compare_chat_b: record_messages(b, task)}


# -- helpers -------------------------------------------------------------------------------------------------------

def plan_steps_of(record: dict) -> list[dict]:
    """The plans to step through: every check and submit; the submitted plan alone when steps were not kept."""
    steps = [s for s in record.get("steps") or [] if isinstance(s, dict)]
    final = record.get("final") if isinstance(record.get("final"), dict) else {}
    if not steps and final.get("plan") is not None:
        steps = [{"turn": record.get("turns"), "tool": "submit_plan", "plan": final["plan"], "result": {}}]
    return steps


def final_plan(record: dict) -> Any:
    final = record.get("final") if isinstance(record.get("final"), dict) else {}
    if final.get("plan") is not None:
        return final["plan"]
    steps = plan_steps_of(record)
    return steps[-1].get("plan") if steps else None


def _task(section: BrowseSection, episode_id: str) -> dict | None:
    try:
        record, _ = section.records.get(episode_id)
    except (RolloutNotFound, SourceError):
        return None
    return section.ctx.task_for(str(record.get("task_id") or ""), None)
