"""The Play section: a person plays a task by hand, through the same tools and server a model uses.

Layout: the picker, Check and Submit, the verdict of the last check and the plan table on the left (one row per
ship, filled with the published plan); the task's brief, its situation (as the model reads it) and the berth chart
on the right, then the grade beside the optimum once submitted. Editing the table moves the ships on the chart at
once, without their verdicts: rule breaks are drawn only for a plan sent to `check_plan` (the 10-check budget is
the point, as it is for a model). The episode opens on the first Check or Submit (live.hand_play) and its rollout,
model `human` (or `human:<Hub username>`), is saved like any other.

Handlers are top-level functions taking the section first (wired with `viewer.wiring.bind`); they return dicts
keyed by component.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import gradio as gr

from agent.limits import InputTooLarge, check_input
from berth_env.baselines import published_plan
from berth_env.texts import situation_text
from live.hand_play import HandEpisode, PlayError, human_model
from rollouts.record import Record
from viewer.chart import optimum_chart
from viewer.context import AppContext
from viewer.markdown import escape_cell, escape_md, fmt_num
from viewer.play import api as play_api
from viewer.play.plan_table import DATATYPES, HEADERS, TableError, json_rows, plan_json, plan_rows, rows_plan
from viewer.play.planner import AIDS, build_planner, edited_plan, planner_value
from viewer.play.planner import CSS as PLANNER_CSS
from viewer.play.start_plans import StartPlan, published_start, start_plan
from viewer.sections import Page, Route, Section
from viewer.summary import grade_panel
from viewer.task_picker import TaskPicker, build_task_picker, wire_task_picker
from viewer.task_view import task_brief
from viewer.visitors import visitor_of
from viewer.wiring import base_url, bind, unchanged

log = logging.getLogger(__name__)

DEFAULT_TASK = "dock-24B-w06x1-standard-0"
HOW_TO = ("**Drag a ship** on the chart along the hours or the quay (or select it and use the arrow keys, Shift "
          "for 6 hours, or the nudge buttons; + / − change its cranes). What breaks shows as you edit, in red; the "
          "table below is the same plan. **Check** tells you what it costs (10 checks); **Submit** is graded once "
          "against the proven optimum (reward 1.0).")
VIOLATIONS_SHOWN = 6
CSS = """
#play-buttons button {min-height: 42px; white-space: nowrap}
#play-view, #play-form {min-width: 0 !important; max-width: 100%}
@media (max-width: 768px) {
  /* min-width: 0 above keeps wide charts from overflowing, but also stops Gradio's columns from wrapping */
  #play-row {flex-direction: column}
  /* On a phone the two columns become one list: the picker, then the chart (where the planning happens), then
     Check and Submit, the table, and the task's brief. */
  #play-form, #play-view {display: contents}
  #play-planner {order: 1}
  #play-buttons, #play-verdict, #play-restart, #play-table, #play-json-box {order: 2}
  #play-brief, #play-situation-box, #play-grade, #play-optimal {order: 3}
}
@media (max-width: 640px) {
  #play-table th, #play-table td {font-size: 12px}
}
""" + PLANNER_CSS


@dataclass
class PlaySection:
    ctx: AppContext
    picker: TaskPicker
    task: gr.Dropdown  # the picker's task dropdown
    check_button: gr.Button
    submit_button: gr.Button
    restart_button: gr.Button
    verdict: gr.Markdown  # the last check's or the submit's answer, or what to fix
    table: gr.Dataframe
    plan_json: gr.Textbox
    load_json: gr.Button
    brief: gr.Markdown
    situation: gr.Markdown
    planner: gr.HTML  # the berth chart as the editor (planner.py); its value holds the draft
    grade: gr.Markdown
    optimal: gr.Plot
    episode: gr.State  # {"id", "task_id"} of this page's open episode, or None
    origin: gr.State  # where the draft started: {"task_id", "from", "model"?} (start_plans.StartPlan.player)

    @property
    def task_outputs(self) -> list[Any]:
        """Everything showing another task (or starting over) changes."""
        return [self.brief, self.situation, self.table, self.plan_json, self.planner, self.verdict, self.grade,
                self.optimal, self.check_button, self.submit_button, self.episode, self.origin]


# -- building --------------------------------------------------------------------------------------------------

def build_play_section(ctx: AppContext, page: Page) -> PlaySection:
    with gr.Row(equal_height=False, elem_id="play-row"):
        with gr.Column(scale=4, min_width=300, elem_id="play-form"):
            picker = build_task_picker(ctx, default=DEFAULT_TASK, prefix="play-", task_elem_id="play-task")
            task = ctx.task_for(picker.task.value or "", None)
            with gr.Row(elem_id="play-buttons"):
                check_button = gr.Button(_check_label(10), variant="primary", min_width=100, elem_id="play-check")
                submit_button = gr.Button("Submit", variant="secondary", min_width=100, elem_id="play-submit")
            verdict = gr.Markdown(HOW_TO, elem_id="play-verdict")
            restart_button = gr.Button("↺ Start over from the published plan", size="sm", elem_id="play-restart")
            table = gr.Dataframe(_rows(task), headers=HEADERS, datatype=DATATYPES, type="array", interactive=True,
                                 static_columns=[0], max_height=440, label="Your plan", show_label=True,
                                 elem_id="play-table", column_widths=["30%", "22%", "28%", "20%"])
            with gr.Accordion("Plan as JSON: the table's, to copy, or paste one in", open=False,
                              elem_id="play-json-box"):
                plan_json = gr.Textbox(_plan_text(task), lines=4, max_lines=12, show_label=False, elem_id="play-json",
                                       placeholder='[{"ship": 0, "berth_hour": 0, "section": 4, "cranes": 1}, …]')
                load_json = gr.Button("Put it in the table", size="sm", elem_id="play-load-json")
            if ctx.settings.space_id:  # off a Space a LoginButton cannot work (gradio-and-hub notes)
                gr.LoginButton("Sign in with Hugging Face to play under your name")
        with gr.Column(scale=7, min_width=300, elem_id="play-view"):
            # The chart first: it is where the planning happens; what changed this week is under it.
            planner = build_planner(lambda task_id: ctx.task_for(task_id, None), picker.task.value or "")
            brief = gr.Markdown(_brief(task, picker.task.value), elem_id="play-brief")
            with gr.Accordion("The situation, as a model reads it", open=False, elem_id="play-situation-box"):
                situation = gr.Markdown(_situation(task), elem_id="play-situation")
            grade = gr.Markdown(elem_id="play-grade")
            optimal = gr.Plot(visible=False, show_label=False, elem_id="play-optimal", elem_classes=["berth-chart"])
    section = PlaySection(ctx, picker, picker.task, check_button, submit_button, restart_button, verdict, table,
                          plan_json, load_json, brief, situation, planner, grade, optimal, gr.State(None),
                          gr.State(None))
    _wire(section)
    return section


def _wire(s: PlaySection) -> None:
    private = {"api_visibility": "private"}
    shown = [s.task, s.episode]
    for changed in wire_task_picker(s.picker)[:2]:
        changed.then(bind(show_task, s), shown, s.task_outputs, **private)
    s.task.input(bind(show_task, s), shown, s.task_outputs, **private)
    s.restart_button.click(bind(start_over, s), shown, s.task_outputs, **private)
    s.table.input(bind(follow_table, s), [s.task, s.table, s.planner], [s.planner, s.verdict, s.plan_json],
                  show_progress="hidden", **private)
    s.planner.edit(bind(follow_planner, s), [s.task, s.planner], [s.table, s.plan_json, s.verdict],
                   show_progress="hidden", **private)
    s.load_json.click(bind(load_plan_json, s), [s.task, s.plan_json, s.planner], [s.table, s.planner, s.verdict],
                      **private)
    played = [s.task, s.table, s.planner, s.episode, s.origin]
    s.check_button.click(bind(check_table, s), played, [s.verdict, s.check_button, s.episode], **private)
    s.submit_button.click(bind(submit_table, s), played,
                          [s.verdict, s.grade, s.optimal, s.check_button, s.submit_button, s.episode], **private)


# -- handlers ----------------------------------------------------------------------------------------------------

def show_task(section: PlaySection, task_id: str, episode: dict | None, request: gr.Request) -> dict:
    """Another task picked: its brief, situation, published plan and chart. An episode open on another task ends
    (saved as `stopped` if it was played); the same task picked again changes nothing."""
    if episode and episode.get("task_id") == (task_id or "").strip():
        return unchanged(section.brief)
    return _fresh(section, task_id, _owner(request))


def start_over(section: PlaySection, task_id: str, episode: dict | None, request: gr.Request) -> dict:
    """The published plan back in the table and a fresh budget; an open episode ends (`stopped`)."""
    return _fresh(section, task_id, _owner(request))


def follow_table(section: PlaySection, task_id: str, rows: Any, draft: str | None) -> dict:
    """The table was edited: the chart follows, with the draft's rule problems and without its cost."""
    task = section.ctx.task_for((task_id or "").strip(), None)
    if task is None:
        return unchanged(section.planner)
    try:
        plan = _table_plan(task, rows)
    except (TableError, InputTooLarge) as exc:
        return {section.verdict: f"⚠️ {escape_md(exc)}"}
    return {section.planner: _redrawn(task, plan, draft), section.verdict: HOW_TO,
            section.plan_json: plan_json(plan)}


def follow_planner(section: PlaySection, task_id: str, draft: str | None) -> dict:
    """A ship was moved on the chart: the table and the JSON box follow. The plan is read like any plan a visitor
    sends (the one size limit, the plan parser); one that cannot be read changes nothing and says why."""
    task = section.ctx.task_for((task_id or "").strip(), None)
    try:
        edited_task, plan, _ = edited_plan(draft)
        if task is None or edited_task != task.get("task_id"):
            return unchanged(section.table)
        rows = plan_rows(task, plan)
    except (TableError, InputTooLarge, ValueError) as exc:
        return {section.verdict: f"⚠️ That draft cannot be read: {escape_md(exc)}"}
    return {section.table: rows, section.plan_json: plan_json(rows_plan(task, rows))}


def load_plan_json(section: PlaySection, task_id: str, text: str, draft: str | None) -> dict:
    task = section.ctx.task_for((task_id or "").strip(), None)
    if task is None:
        return {section.verdict: "⚠️ Pick a task first."}
    try:
        check_input(text, "the pasted plan")
        rows = json_rows(task, text)
        plan = rows_plan(task, rows)
    except (TableError, InputTooLarge) as exc:
        return {section.verdict: f"⚠️ That plan cannot be read: {escape_md(exc)}"}
    return {section.table: rows, section.planner: _redrawn(task, plan, draft),
            section.verdict: "The pasted plan is on the chart and in the table. **Check** it or **Submit** it."}


def check_table(section: PlaySection, task_id: str, rows: Any, draft: str | None, episode: dict | None,
                origin: dict | None, request: gr.Request, profile: gr.OAuthProfile | None = None) -> dict:
    """Send the draft to check_plan (opening the episode on the first call): the cost, or what breaks."""
    try:
        task, plan, played = _play(section, task_id, rows, draft, episode, origin, request, profile)
        result = section.ctx.plays.check(played.episode_id, played.owner, plan)
    except (TableError, InputTooLarge, PlayError) as exc:
        return {section.verdict: f"⚠️ {escape_md(exc)}"}
    number = len(Record(played.record).checks)
    out = {section.verdict: check_markdown(task, result, number, played.max_checks),
           section.check_button: gr.Button(_check_label(played.checks_left), interactive=played.checks_left > 0),
           section.episode: {"id": played.episode_id, "task_id": played.task_id}}
    return out


def submit_table(section: PlaySection, task_id: str, rows: Any, draft: str | None, episode: dict | None,
                 origin: dict | None, request: gr.Request, profile: gr.OAuthProfile | None = None) -> dict:
    """Send the draft to submit_plan: the grade beside the optimum, and the rollout saved."""
    try:
        task, plan, played = _play(section, task_id, rows, draft, episode, origin, request, profile)
        result = section.ctx.plays.submit(played.episode_id, played.owner, plan)
    except (TableError, InputTooLarge, PlayError) as exc:
        return {section.verdict: f"⚠️ {escape_md(exc)}"}
    if not played.done:  # the server refused the plan's form; the episode goes on
        return {section.verdict: f"⚠️ Not graded: {escape_md(result.get('error') or result)}",
                section.episode: {"id": played.episode_id, "task_id": played.task_id}}
    link = section.ctx.share_link(f"tab=browse&rollout={played.episode_id}", base_url(request))
    share = section.ctx.rollout_link(played.episode_id, base_url(request))
    saved = (f"⚠️ {escape_md(played.save_error)}" if played.save_error else
             f"Saved as rollout `{played.episode_id}` · [open it in Browse]({link}) · [share link]({share}) · your "
             "plan beside the proven optimum is under the chart; **Start over** plays the task again")
    return {section.verdict: f"🏁 **Submitted** · reward **{fmt_num(result.get('reward'))}** · "
                             f"{_verdict_words(result)}\n\n{saved}",
            section.grade: grade_panel(played.record, task),
            section.optimal: gr.Plot(optimum_chart(task, plan, label="your plan"), visible=True),
            section.check_button: gr.Button(interactive=False), section.submit_button: gr.Button(interactive=False),
            section.episode: None}


# -- pieces ------------------------------------------------------------------------------------------------------

def _redrawn(task: dict, plan: list, draft: str | None) -> str:
    """The editor's value for `plan`, keeping the start plan and the locks of the draft it replaces."""
    start, start_name, locked = published_plan(task), "the published plan", []
    try:
        old = json.loads(draft) if isinstance(draft, str) and draft else {}
    except ValueError:
        old = {}
    if isinstance(old, dict) and old.get("task_id") == task.get("task_id") and isinstance(old.get("start"), list):
        start, start_name = old["start"], str(old.get("start_name") or start_name)[:80]
        locked = [s for s in old.get("locked") or [] if isinstance(s, int)]
    return planner_value(task, plan, start=start, start_name=start_name, locked=locked)


def check_markdown(task: dict, result: dict, number: int, max_checks: int) -> str:
    """The server's check_plan answer for a person: the cost when feasible, else the violations one per line."""
    left = result.get("checks_left")
    budget = f"check {number} of {max_checks}" + (f", {left} left" if isinstance(left, int) else "")
    if "error" in result:
        return f"⚠️ {escape_md(result['error'])} ({budget})"
    ships = task.get("ships") or []
    lines = [f"{'✅' if result.get('feasible') else '❌'} **{_verdict_words(result)}** · {budget}"]
    for violation in (result.get("violations") or [])[:VIOLATIONS_SHOWN]:
        ship = violation.get("ship")
        name = ships[ship].get("name", "") if isinstance(ship, int) and 0 <= ship < len(ships) else ""
        lines.append(f"- ship {escape_cell(ship)} {escape_cell(name)}: {escape_cell(violation.get('problem'))}")
    hidden = len(result.get("violations") or []) - VIOLATIONS_SHOWN
    if hidden > 0:
        lines.append(f"- … and {hidden} more: red on the chart (hover a ship)")
    lines += [f"- entry: {escape_cell(problem)}" for problem in result.get("entry_problems") or []]
    return "\n".join(lines)


def _verdict_words(result: dict) -> str:
    if result.get("feasible"):
        return f"feasible · cost {fmt_num(result.get('cost'))}"
    count = len(result.get("violations") or [])
    return f"infeasible · {count} violation{'' if count == 1 else 's'}" if count else "infeasible"


def _play(section: PlaySection, task_id: str, rows: Any, draft: str | None, episode: dict | None,
          origin: dict | None, request: gr.Request, profile: gr.OAuthProfile | None) -> tuple[dict, list, HandEpisode]:
    """The task, the draft's plan (the chart's; the table's when the chart never opened), and this page's open
    episode on it (opened now if there is none)."""
    task_id = (task_id or "").strip()
    task = section.ctx.task_for(task_id, None)
    if task is None:
        raise PlayError("Pick a task first.")
    plan = _draft_plan(task, rows, draft)
    owner, plays = _owner(request), section.ctx.plays
    if episode and episode.get("task_id") == task_id:
        try:
            return task, plan, plays.get(episode["id"], owner)
        except PlayError:
            pass  # closed while idle: a new episode, with a fresh budget
    plays.abandon(owner)
    start = origin if isinstance(origin, dict) and origin.get("task_id") == task_id else {"from": "published"}
    model = human_model(getattr(profile, "username", None), improving=start.get("model"))
    player = {"aids": list(AIDS), "start": {k: v for k, v in start.items() if k != "task_id"}}
    return task, plan, plays.start(task_id, owner=owner, visitor=visitor_of(request), model=model, player=player)


def _draft_plan(task: dict, rows: Any, draft: str | None) -> list:
    """The plan on the chart when it holds one of this task (read by the plan parser), else the table's."""
    try:
        edited_task, plan, _ = edited_plan(draft) if draft else ("", None, [])
    except ValueError as exc:
        raise TableError(f"the chart's draft cannot be read: {exc}") from None
    if plan is not None and edited_task == task.get("task_id"):
        return rows_plan(task, plan_rows(task, plan))
    return _table_plan(task, rows)


def _table_plan(task: dict, rows: Any) -> list:
    """The table's plan; InputTooLarge for a table over the one limit on what a visitor sends, before reading it."""
    check_input(rows, "the plan table")
    return rows_plan(task, rows)


def _fresh(section: PlaySection, task_id: str, owner: str, start: StartPlan | None = None, note: str = "") -> dict:
    section.ctx.plays.abandon(owner)
    task_id = (task_id or "").strip()
    task = section.ctx.task_for(task_id, None)
    start = start or (published_start(task) if task else None)
    rows = plan_rows(task, start.plan) if task and start else []
    return {section.brief: _brief(task, task_id), section.situation: _situation(task), section.table: rows,
            section.plan_json: plan_json(rows_plan(task, rows)) if rows else "",
            section.planner: planner_value(task, start.plan, start=start.plan, start_name=start.name)
            if task and start else "",
            section.origin: {"task_id": task_id, **start.player} if start else None,
            section.verdict: note or HOW_TO, section.grade: "",
            section.optimal: gr.Plot(visible=False),
            section.check_button: gr.Button(_check_label(10), interactive=task is not None),
            section.submit_button: gr.Button(interactive=task is not None), section.episode: None}


def _rows(task: dict | None) -> list[list[Any]]:
    return plan_rows(task, published_plan(task)) if task else []


def _plan_text(task: dict | None) -> str:
    """The paste box's first text: the table's plan (the published one) as JSON."""
    return plan_json(rows_plan(task, _rows(task))) if task else ""


def _brief(task: dict | None, task_id: str | None) -> str:
    return task_brief(task, task_id or "", explain=False)  # HOW_TO, beside the table, says what to do


def _situation(task: dict | None) -> str:
    return escape_md(situation_text(task)) if task else ""


def _check_label(left: int) -> str:
    return f"Check ({left} left)"


def _owner(request: gr.Request | None) -> str:
    return getattr(request, "session_hash", None) or "anonymous"


def wire_page_load(section: PlaySection, page: Page, tab: gr.Tab) -> None:
    """`?tab=play` opens this tab; `&task=<id>&from=<episode id | naive>` opens it on that task with that plan
    on the chart ("Try to beat this")."""
    page.demo.load(open_if_linked, None, [page.tabs], api_visibility="private", show_progress="hidden", queue=False)
    page.demo.load(bind(open_linked_plan, section), None, [section.task, *section.task_outputs],
              api_visibility="private", show_progress="hidden")


def open_linked_plan(section: PlaySection, request: gr.Request) -> dict:
    """A "Try to beat this" link: its task picked and the plan it names on the chart; what is wrong with the link
    said where the verdict goes, the published plan shown instead."""
    query = request.query_params if request is not None else {}
    task_id, source = str(query.get("task") or "").strip()[:200], str(query.get("from") or "").strip()[:64]
    if query.get("tab") != "play" or not task_id:
        return unchanged(section.brief)
    task = section.ctx.task_for(task_id, None)
    if task is None:
        return {section.verdict: f"⚠️ The link names task `{escape_cell(task_id)}`, which this Space does not serve."}
    try:
        start, note = start_plan(section.ctx.records, task, source), ""
    except ValueError as exc:
        start, note = None, f"⚠️ That link's plan cannot be loaded ({escape_md(exc)}): the published plan is shown."
    if start is not None and start.episode_id:
        note = (f"Started from **{escape_md(start.name)}**: improve it on the chart and submit it; your rollout is "
                f"saved as `{escape_cell(human_model(improving=start.model))}`.")
    return {section.task: gr.Dropdown(value=task_id), **_fresh(section, task_id, _owner(request), start, note)}


def open_if_linked(request: gr.Request) -> Any:
    query = request.query_params if request is not None else {}
    return gr.Tabs(selected="play") if query.get("tab") == "play" else gr.skip()


SECTION = Section("Play", "play", CSS, build_play_section, wire_page_load, elem_id="play", routes=(
    Route("play_start", play_api.play_start, concurrency_limit=None),
    Route("play_check", play_api.play_check, concurrency_limit=None),
    Route("play_submit", play_api.play_submit, concurrency_limit=None)))

__all__ = ["CSS", "SECTION", "PlaySection", "build_play_section", "wire_page_load"]
