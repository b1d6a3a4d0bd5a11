"""The Browse tab: a leaderboard and a table over every rollout, one rollout in the Run tab's viewer, two compared.

Gradio wiring plus the small formatting of tables; the rows come from viewer/browse_index.py (index rows only, from
the local folder, our Hub dataset and upstream's Parquet), the rendering from the same renderers as the Run tab
(chat from the record's events, berth charts, grade panel, usage). A share link `?tab=browse&rollout=<id>` opens
one rollout: app.py's page load fills `rollout_id` and selects this tab, `on_deep_link` opens it.

Public API (for scripts, gradio_client): `browse_rollouts` (one page of filtered, sorted rows),
`browse_leaderboard` and `browse_record` (one record from any source). Every other handler is private.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr
import pandas as pd

from agent.tasks import task_for
from rollouts.index import REMOTE_WAIT_S, BrowseIndex, RolloutNotFound, SourceStatus, records_of
from rollouts.query import PAGE_SIZE, SORTABLE, SOURCES, Filters, options
from rollouts.schema import TIERS
from rollouts.sources import SourceError
from viewer.chart import berth_chart, side_by_side
from viewer.context import AppContext
from viewer.markdown import escape_cell, fmt_num
from viewer.replay import record_messages
from viewer.summary import grade_panel, usage_summary

TICK_S = 4.0        # how often an open page looks for new rows (a stat of the local index files)
RECORD_CACHE = 16   # records kept in memory: opening, comparing and the slider reuse them
SOURCE_ICONS = {"local": "📁", "hub": "🤗", "upstream": "📦"}
API_COLUMNS = ["episode_id", "started", "model", "model_name", "task_id", "difficulty", "quay", "num_ships", "reward",
               "submitted", "feasible", "cost", "optimal_cost", "naive_cost", "turns", "checks", "seconds",
               "input_tokens", "output_tokens", "end_reason", "errors", "run", "played_in", "source"]
TABLE_HEADERS = ["id", "started (UTC)", "model", "task", "tier", "quay", "reward", "submitted", "feasible", "cost",
                 "turns", "checks", "tokens", "seconds", "ended", "source"]
BOARD_HEADERS = ["model", "n", "mean reward", "95% CI", *TIERS, "feasible %", "optimal %", "no submit",
                 "median tokens", "median s"]
YES_NO = ["any", "yes", "no"]
URL_JS = """(rid) => {
  if (!rid) return;
  const u = new URL(window.location); u.searchParams.set('tab', 'browse'); u.searchParams.set('rollout', rid);
  window.history.replaceState(null, '', u);
}"""


@dataclass
class BrowseTab:
    rollout_id: gr.Textbox
    index: BrowseIndex
    open_rollout: Callable[..., Any]
    open_outputs: list[Any]
    full_view: Callable[..., Any]
    view_inputs: list[Any]
    view_outputs: list[Any]

    def on_deep_link(self, loaded: Any) -> None:
        """Chain onto the page load: open the linked rollout (if any) and fill the table and leaderboard."""
        loaded.then(self.open_rollout, [self.rollout_id], self.open_outputs, api_visibility="private",
                    show_progress="minimal")
        loaded.then(self.full_view, self.view_inputs, self.view_outputs, api_visibility="private",
                    show_progress="hidden")


# -- pure formatting -------------------------------------------------------------------------------------------


def table_frame(rows: pd.DataFrame) -> pd.DataFrame:
    """A page of index rows as the table shows them (plain text cells; model text is never rendered as HTML)."""
    def text(column: str) -> list[str]:
        return ["" if _missing(v) else str(v) for v in rows[column].tolist()]

    def number(column: str, digits: int | None = None) -> list[str]:
        out = []
        for v in rows[column].tolist():
            if _missing(v):
                out.append("")
            elif digits is None:
                out.append(f"{int(v):,}")
            else:
                out.append(f"{float(v):.{digits}f}")
        return out

    started = [s.replace("T", " ").removesuffix("Z")[:16] if s else "" for s in text("started")]
    return pd.DataFrame({
        "id": text("episode_id"), "started (UTC)": started, "model": text("model"), "task": text("task_id"),
        "tier": text("difficulty"), "quay": text("quay"), "reward": number("reward", 3),
        "submitted": ["✓" if v else "✗" for v in rows["submitted"].tolist()],
        "feasible": ["✓" if v else "✗" for v in rows["feasible"].tolist()],
        "cost": number("cost"), "turns": number("turns"), "checks": number("checks"), "tokens": number("tokens"),
        "seconds": number("seconds", 1), "ended": text("end_reason"), "source": text("source"),
    }, columns=TABLE_HEADERS)


def board_frame(board: pd.DataFrame) -> pd.DataFrame:
    """The leaderboard (rollouts.leaderboard columns) as the page shows it."""
    out = []
    for row in board.to_dict("records"):
        out.append([str(row["model"]), int(row["n"]), _fixed(row["mean_reward"]),
                    f"{_fixed(row['ci_low'])}–{_fixed(row['ci_high'])}",
                    *[_fixed(row[f"mean_{t}"]) for t in TIERS], _fixed(row["feasible_pct"], 0),
                    _fixed(row["optimal_pct"], 0), int(row["no_submit"]), _fixed(row["median_tokens"], 0),
                    _fixed(row["median_seconds"], 1)])
    return pd.DataFrame(out, columns=BOARD_HEADERS)


def status_markdown(statuses: list[SourceStatus], *, shown: int, total: int) -> str:
    """One line per source: how many rows it gave, or why it could not be read."""
    parts = [f"**{shown:,}** of {total:,} rollouts match the filters."]
    for status in statuses:
        icon = SOURCE_ICONS.get(status.name, "•")
        label = escape_cell(status.label)
        if status.loading and not status.loaded_at:
            text = f"{icon} {label}: loading…"
        elif status.error and not status.loaded_at:
            text = f"{icon} {label}: ⚠️ {escape_cell(status.error)}. The other sources are shown."
        else:
            text = f"{icon} {label}: {status.rows:,} rollouts"
            if status.error:
                text += f" (⚠️ {escape_cell(status.error)})"
            if status.note:
                text += f" · {escape_cell(status.note)}"
            if status.skipped:
                text += f" · ⚠️ {status.skipped:,} unreadable index line{'s' * (status.skipped != 1)} skipped"
            if status.loading:
                text += " · refreshing…"
        parts.append(text)
    return "  \n".join(parts)


def rollout_heading(record: dict, row: dict) -> str:
    task = record.get("task") if isinstance(record.get("task"), dict) else {}
    started = record.get("started") or row.get("started")
    bits = [f"### {escape_cell(record.get('model') or '?')} on {escape_cell(record.get('task_id') or '?')}",
            " · ".join(x for x in (
                f"rollout `{escape_cell(record.get('episode_id'))}`",
                f"tier {escape_cell(task.get('difficulty'))}" if task.get("difficulty") else "",
                f"started {escape_cell(started)}" if started else "",
                f"reward **{fmt_num(record.get('reward'))}**",
                f"ended: {escape_cell(record.get('end_reason') or '?')}",
                f"from {escape_cell(row.get('source') or '?')}",
                f"run {escape_cell(record.get('run'))}" if record.get("run") else "",
            ) if x)]
    return "\n".join(bits)


def plan_steps_of(record: dict) -> list[dict]:
    """The plans to step through: every check/submit; a submitted plan alone when the steps were not kept."""
    steps = [s for s in record.get("steps") or [] if isinstance(s, dict)]
    final = record.get("final") if isinstance(record.get("final"), dict) else {}
    if not steps and final.get("plan") is not None:
        steps = [{"turn": record.get("turns"), "tool": "submit_plan", "plan": final["plan"], "result": {}}]
    return steps


def step_chart(task: dict | None, steps: list[dict], index: int) -> Any:
    if task is None or not steps:
        return None
    index = max(0, min(index, len(steps) - 1))
    step = steps[index]
    previous = steps[index - 1].get("plan") if index > 0 else None
    verdict = "submitted" if step.get("tool") == "submit_plan" else "checked"
    turn = f" in turn {step.get('turn')}" if step.get("turn") is not None else ""
    return berth_chart(task, step.get("plan"), previous_plan=previous,
                       title=f"Plan {index + 1} of {len(steps)} ({verdict}{turn})")


def optimal_chart(task: dict | None) -> Any:
    reference = (task or {}).get("reference") or {}
    if task is None or not reference.get("optimal_plan"):
        return None
    return berth_chart(task, reference["optimal_plan"],
                       title=f"Reference optimal plan (cost {reference.get('optimal_cost')})")


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _fixed(value: Any, digits: int = 3) -> str:
    return "–" if _missing(value) else f"{float(value):.{digits}f}"


def _base_url(request: gr.Request | None) -> str | None:
    try:
        return str(request.request.base_url) if request is not None and request.request is not None else None
    except AttributeError:
        return None


def _pick_label(row: dict) -> str:
    return f"{row['model']} · reward {float(row['reward']):.3f} · {row['episode_id']}"


# -- the tab ---------------------------------------------------------------------------------------------------


class _Records:
    """A few recently opened records, so the slider and Compare do not fetch them again."""

    def __init__(self, index: BrowseIndex) -> None:
        self.index = index
        self._cache: OrderedDict[str, tuple[dict, dict]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, episode_id: str, wait: float = REMOTE_WAIT_S) -> tuple[dict, dict]:
        episode_id = (episode_id or "").strip()
        with self._lock:
            if episode_id in self._cache:
                self._cache.move_to_end(episode_id)
                return self._cache[episode_id]
        found = self.index.record(episode_id, wait=wait)
        with self._lock:
            self._cache[episode_id] = found
            while len(self._cache) > RECORD_CACHE:
                self._cache.popitem(last=False)
        return found


def make_index(ctx: AppContext) -> BrowseIndex:
    settings = ctx.settings
    return BrowseIndex.from_settings(getattr(ctx.store, "root", settings.rollout_dir), dataset=settings.dataset,
                                     public_rollouts=settings.public_rollouts, token=settings.hub_token)


def build_browse_tab(ctx: AppContext, index: BrowseIndex | None = None) -> BrowseTab:
    index = index or make_index(ctx)
    index.refresh_local(force=True)
    index.start_remote()  # the Hub sources load while the first visitor arrives
    records = _Records(index)
    first = options(index.frame)

    gr.Markdown("Every rollout played here, on our Hub dataset and upstream's published runs. Filter, compare "
                "models, open one rollout to replay it, or compare two on the same task.")
    with gr.Row(equal_height=True):
        status = gr.Markdown("Loading…", elem_id="browse-status")
        refresh = gr.Button("⟳ Refresh", size="sm", scale=0, min_width=110, elem_id="browse-refresh")
    with gr.Accordion("Filters", open=True):
        with gr.Row():
            f_model = gr.Dropdown(first["models"], value=[], multiselect=True, label="Model", elem_id="f-model",
                                  scale=2)
            f_task = gr.Dropdown(first["tasks"], value=[], multiselect=True, label="Task", elem_id="f-task",
                                 scale=2)
            f_tier = gr.CheckboxGroup(list(TIERS), value=[], label="Tier", elem_id="f-tier", scale=2)
            f_quay = gr.CheckboxGroup(first["quays"], value=[], label="Quay", elem_id="f-quay", scale=1)
        with gr.Row():
            # Rewards lie in [0, 1], so the full range is "any" (an empty Number would still read as 0).
            f_reward_min = gr.Number(0, label="Reward ≥", minimum=0, maximum=1, elem_id="f-reward-min",
                                     min_width=90)
            f_reward_max = gr.Number(1, label="Reward ≤", minimum=0, maximum=1, elem_id="f-reward-max",
                                     min_width=90)
            f_submitted = gr.Radio(YES_NO, value="any", label="Submitted", elem_id="f-submitted", min_width=150)
            f_feasible = gr.Radio(YES_NO, value="any", label="Feasible", elem_id="f-feasible", min_width=150)
            f_from = gr.Textbox(label="From (UTC date)", placeholder="2026-11-01", elem_id="f-from", min_width=120,
                                info="upstream rows have no date")
            f_to = gr.Textbox(label="To (UTC date)", placeholder="2026-11-30", elem_id="f-to", min_width=120)
            f_source = gr.CheckboxGroup(list(SOURCES), value=[], label="Source", elem_id="f-source", min_width=200)
        filter_note = gr.Markdown(elem_id="filter-note")
    filters_in = [f_model, f_task, f_tier, f_quay, f_reward_min, f_reward_max, f_submitted, f_feasible, f_from, f_to,
                  f_source]

    gr.Markdown("### Leaderboard")
    same_tasks = gr.Checkbox(False, label="Compare models on the same tasks only (tasks every listed model played)",
                             elem_id="same-tasks")
    board = gr.Dataframe(pd.DataFrame(columns=BOARD_HEADERS), interactive=False, elem_id="board", wrap=True,
                         max_height=420, datatype="str")

    gr.Markdown("### Rollouts")
    with gr.Row(equal_height=False):
        sort_by = gr.Dropdown([(label, key) for key, label in SORTABLE.items()], value="started", label="Sort by",
                              elem_id="sort-by", min_width=120)
        order = gr.Radio(["descending", "ascending"], value="descending", label="Order", elem_id="sort-order")
        prev_page = gr.Button("◀ Previous", size="sm", elem_id="page-prev", min_width=100)
        page = gr.Number(1, precision=0, minimum=1, label="Page", elem_id="page", min_width=80)
        next_page = gr.Button("Next ▶", size="sm", elem_id="page-next", min_width=100)
        page_info = gr.Markdown(elem_id="page-info")
    click_mode = gr.Radio([("opens the rollout", "open"), ("picks it as B for Compare", "compare")], value="open",
                          label="Clicking a row", elem_id="click-mode")
    table = gr.Dataframe(pd.DataFrame(columns=TABLE_HEADERS), interactive=False, elem_id="rollouts",
                         max_height=560, datatype="str")
    version = gr.State(-1)

    gr.Markdown("### One rollout")
    with gr.Row(equal_height=True):
        rollout_id = gr.Textbox(label="Rollout id", placeholder="episode id, e.g. 1f3a9c2b7d10",
                                elem_id="rollout-id", scale=3)
        open_button = gr.Button("Open", elem_id="open-rollout", scale=0, min_width=90)
    message = gr.Markdown(elem_id="rollout-message")
    heading = gr.Markdown(elem_id="rollout-head")
    share = gr.Textbox(label="Share link", interactive=False, buttons=["copy"], elem_id="share-link",
                       visible=False)
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            chat = gr.Chatbot(label="Transcript", height=620, elem_id="browse-chat", sanitize_html=True,
                              render_markdown=True, feedback_options=None, group_consecutive_messages=False,
                              buttons=["copy"])
        with gr.Column(scale=2):
            grade = gr.Markdown(elem_id="browse-grade")
            usage = gr.Markdown(elem_id="browse-usage")
    with gr.Row(equal_height=False):
        with gr.Column():
            chart = gr.Plot(label="The model's plans", elem_id="browse-chart")
            plan_step = gr.Slider(minimum=1, maximum=2, value=1, step=1, visible=False, label="Plan",
                                  elem_id="browse-plan-step")
        with gr.Column():
            optimal = gr.Plot(label="Reference optimal plan", elem_id="browse-optimal")
    steps = gr.State([])
    current = gr.State(None)

    gr.Markdown("### Compare two rollouts of the same task")
    with gr.Row(equal_height=True):
        compare_pick = gr.Dropdown([], label="Another rollout of this task", elem_id="compare-pick", scale=3,
                                   allow_custom_value=False)
        compare_id = gr.Textbox(label="Rollout B id", elem_id="compare-id", scale=2)
        compare_button = gr.Button("Compare", elem_id="compare", scale=0, min_width=100)
    compare_message = gr.Markdown(elem_id="compare-message")
    compare_chart = gr.Plot(label="A over B (ships placed differently in orange)", elem_id="compare-chart")
    with gr.Row(equal_height=False):
        grade_a = gr.Markdown(elem_id="compare-grade-a")
        grade_b = gr.Markdown(elem_id="compare-grade-b")
    timer = gr.Timer(TICK_S)

    # -- the table and the leaderboard -------------------------------------------------------------------------

    def read_filters(values: tuple) -> Filters:
        names = ("models", "tasks", "tiers", "quays", "reward_min", "reward_max", "submitted", "feasible",
                 "date_from", "date_to", "sources")
        return Filters.parse(**dict(zip(names, values, strict=True)))

    def table_view(*values: Any) -> tuple:
        """Status, filter note, table, page, page info, version, and the choice lists (from every row)."""
        *filter_values, sort, direction, page_number = values
        filters = read_filters(tuple(filter_values))
        rows, matched, page_number, pages = index.query(filters, sort=sort or "started",
                                                        descending=direction != "ascending",
                                                        page=_int(page_number, 1))
        frame = index.frame
        note = ("⚠️ " + " · ".join(escape_cell(p) for p in filters.problems)) if filters.problems else ""
        first_row = (page_number - 1) * PAGE_SIZE + 1
        info = (f"rows {first_row:,}–{first_row + len(rows) - 1:,} of {matched:,} · page {page_number} of {pages}"
                if matched else "no rollouts match")
        choices = options(frame)
        return (status_markdown(index.statuses(), shown=matched, total=len(frame)), note, table_frame(rows),
                page_number, info, index.version, gr.Dropdown(choices=choices["models"]),
                gr.Dropdown(choices=choices["tasks"]), gr.CheckboxGroup(choices=choices["quays"]))

    def board_view(*values: Any) -> pd.DataFrame:
        *filter_values, same = values
        return board_frame(index.board(read_filters(tuple(filter_values)), same_tasks=bool(same)))

    table_inputs = [*filters_in, sort_by, order, page]
    table_outputs = [status, filter_note, table, page, page_info, version, f_model, f_task, f_quay]
    board_inputs = [*filters_in, same_tasks]

    def full_view(*values: Any) -> tuple:
        *table_values, same = values
        return (*table_view(*table_values), board_view(*table_values[: len(filters_in)], same))

    view_inputs = [*table_inputs, same_tasks]
    view_outputs = [*table_outputs, board]

    def first_page(*values: Any) -> tuple:
        *rest, _page = values
        return table_view(*rest, 1)

    for component in filters_in:
        triggers = ([component.submit, component.blur] if isinstance(component, gr.Textbox | gr.Number)
                    else [component.input])
        event = gr.on(triggers, first_page, table_inputs, table_outputs, api_visibility="private",
                      show_progress="hidden")
        event.then(board_view, board_inputs, board, api_visibility="private", show_progress="hidden")
    same_tasks.input(board_view, board_inputs, board, api_visibility="private", show_progress="hidden")
    gr.on([sort_by.input, order.input], first_page, table_inputs, table_outputs, api_visibility="private",
          show_progress="hidden")
    page.submit(table_view, table_inputs, table_outputs, api_visibility="private", show_progress="hidden")

    def turn_page(step: int) -> Callable[..., tuple]:
        def handler(*values: Any) -> tuple:
            *rest, page_number = values
            return table_view(*rest, _int(page_number, 1) + step)
        return handler

    prev_page.click(turn_page(-1), table_inputs, table_outputs, api_visibility="private", show_progress="hidden")
    next_page.click(turn_page(+1), table_inputs, table_outputs, api_visibility="private", show_progress="hidden")

    def do_refresh(*values: Any) -> tuple:
        index.refresh(remote=True, wait=REMOTE_WAIT_S)
        return full_view(*values)

    refresh.click(do_refresh, view_inputs, view_outputs, api_visibility="private")

    def tick(seen: int, *values: Any) -> tuple:
        index.refresh_local()
        if index.version == seen:
            return tuple(gr.skip() for _ in view_outputs)
        return full_view(*values)

    timer.tick(tick, [version, *view_inputs], view_outputs, api_visibility="private", show_progress="hidden")

    # -- one rollout ---------------------------------------------------------------------------------------------

    open_outputs = [message, heading, share, chat, chart, plan_step, steps, optimal, grade, usage, compare_pick,
                    current]

    def cleared(text: str) -> tuple:
        return (text, "", gr.Textbox(value="", visible=False), [], None, gr.Slider(visible=False), [], None, "", "",
                gr.Dropdown(choices=[], value=None), None)

    def open_rollout(episode_id: str, request: gr.Request = None) -> tuple:
        episode_id = (episode_id or "").strip()
        if not episode_id:
            return tuple(gr.skip() for _ in open_outputs)
        try:
            record, row = records.get(episode_id)
        except RolloutNotFound as exc:
            return cleared(f"⚠️ {escape_cell(str(exc))}")
        except SourceError as exc:
            return cleared(f"⚠️ Rollout `{escape_cell(episode_id)}` could not be fetched: {escape_cell(str(exc))}")
        task = task_for(str(record.get("task_id") or ""))
        plans = plan_steps_of(record)
        count = len(plans)
        link = ctx.share_link(f"tab=browse&rollout={episode_id}", _base_url(request))
        notes = []
        if task is None:
            notes.append("This task is not in this Space's task pack, so its plans cannot be drawn.")
        others = index.same_task(str(record.get("task_id") or ""), exclude=episode_id)
        picks = [(_pick_label(r), r["episode_id"]) for r in records_of(others, ["episode_id", "model", "reward"])]
        return ("\n\n".join(notes), rollout_heading(record, row), gr.Textbox(value=link, visible=True),
                record_messages(record, task), step_chart(task, plans, count - 1),
                gr.Slider(minimum=1, maximum=max(count, 2), value=max(count, 1), step=1, visible=count > 1,
                          label=f"Plan (1-{count}): step through every plan the model sent"),
                plans, optimal_chart(task), grade_panel(record, task), usage_summary(record),
                gr.Dropdown(choices=picks, value=None), {"id": episode_id, "task_id": record.get("task_id")})

    opened = gr.on([open_button.click, rollout_id.submit], open_rollout, rollout_id, open_outputs,
                   api_visibility="private")
    opened.then(None, rollout_id, None, js=URL_JS, api_visibility="private")

    def show_step(position: float, plans: list[dict], state: dict | None) -> Any:
        if not state or not plans:
            return gr.skip()
        return step_chart(task_for(str(state.get("task_id") or "")), plans, _int(position, 1) - 1)

    plan_step.release(show_step, [plan_step, steps, current], chart, api_visibility="private")

    # -- compare -------------------------------------------------------------------------------------------------

    compare_outputs = [compare_message, compare_chart, grade_a, grade_b]

    def compare(a_id: str, b_id: str) -> tuple:
        a_id, b_id = (a_id or "").strip(), (b_id or "").strip()
        if not a_id or not b_id:
            return "Open a rollout (A), then pick or enter a second one (B) of the same task.", None, "", ""
        if a_id == b_id:
            return "A and B are the same rollout: pick another one.", None, "", ""
        try:
            a, _ = records.get(a_id)
            b, _ = records.get(b_id)
        except (RolloutNotFound, SourceError) as exc:
            return f"⚠️ {escape_cell(str(exc))}", None, "", ""
        task_a, task_b = a.get("task_id"), b.get("task_id")
        if task_a != task_b:
            return (f"⚠️ A is on {escape_cell(task_a)} and B on {escape_cell(task_b)}: compare needs two rollouts "
                    "of the same task.", None, "", "")
        task = task_for(str(task_a or ""))
        names = (f"A: {a.get('model')}", f"B: {b.get('model')}")
        figure = None
        note = f"**A** {escape_cell(a.get('model'))} (`{escape_cell(a_id)}`) · **B** {escape_cell(b.get('model'))} " \
               f"(`{escape_cell(b_id)}`) on {escape_cell(task_a)}"
        if task is None:
            note += " · this task is not in this Space's pack, so the plans cannot be drawn"
        else:
            figure = side_by_side(task, _final_plan(a), _final_plan(b), titles=names)
        return (note, figure, f"#### A · {escape_cell(a.get('model'))}\n" + grade_panel(a, task),
                f"#### B · {escape_cell(b.get('model'))}\n" + grade_panel(b, task))

    gr.on([compare_button.click, compare_id.submit], compare, [rollout_id, compare_id], compare_outputs,
          api_visibility="private")

    def pick_b(b_id: str | None, a_id: str) -> tuple:
        if not b_id:
            return gr.skip(), *(gr.skip() for _ in compare_outputs)
        return b_id, *compare(a_id, b_id)

    compare_pick.input(pick_b, [compare_pick, rollout_id], [compare_id, *compare_outputs], api_visibility="private")

    def row_clicked(mode: str, a_id: str, evt: gr.SelectData) -> tuple:
        values = evt.row_value or []
        clicked = str(values[0]).strip() if values else ""
        if not clicked:
            return gr.skip(), gr.skip(), ""
        if mode == "compare" and (a_id or "").strip():
            return gr.skip(), clicked, "compare"
        return clicked, gr.skip(), "open"

    action = gr.State("")
    clicked = table.select(row_clicked, [click_mode, rollout_id], [rollout_id, compare_id, action],
                           api_visibility="private")

    def open_if(what: str, episode_id: str, request: gr.Request = None) -> tuple:
        return open_rollout(episode_id, request) if what == "open" else tuple(gr.skip() for _ in open_outputs)

    def compare_if(what: str, a_id: str, b_id: str) -> tuple:
        return compare(a_id, b_id) if what == "compare" else tuple(gr.skip() for _ in compare_outputs)

    clicked.then(open_if, [action, rollout_id], open_outputs, api_visibility="private").then(
        None, rollout_id, None, js=URL_JS, api_visibility="private")
    clicked.then(compare_if, [action, rollout_id, compare_id], compare_outputs, api_visibility="private")

    # -- the API -------------------------------------------------------------------------------------------------

    def browse_rollouts(model: str = "", task: str = "", tier: str = "", quay: str = "",
                        reward_min: float | None = None, reward_max: float | None = None, submitted: str = "any",
                        feasible: str = "any", date_from: str = "", date_to: str = "", source: str = "",
                        sort: str = "started", descending: bool = True, page: int = 1,
                        page_size: int = PAGE_SIZE, refresh: bool = False) -> dict:
        """One page of rollouts (index rows) matching the filters. Lists are comma-separated; submitted and feasible
        are any/yes/no; dates are UTC days (YYYY-MM-DD, inclusive); source is local, hub or upstream. refresh:
        re-read the Hub sources first (waiting up to 15 s); `sources` says what each source gave or why not."""
        if refresh:
            index.refresh(remote=True, wait=REMOTE_WAIT_S)
        filters = Filters.parse(models=model, tasks=task, tiers=tier, quays=quay, reward_min=reward_min,
                                reward_max=reward_max, submitted=submitted, feasible=feasible, date_from=date_from,
                                date_to=date_to, sources=source)
        if sort not in SORTABLE:
            raise gr.Error(f"sort must be one of {', '.join(SORTABLE)}")
        size = min(max(_int(page_size, PAGE_SIZE), 1), 500)
        rows, matched, page_used, pages = index.query(filters, sort=sort, descending=bool(descending),
                                                      page=_int(page, 1), size=size)
        return {"total": matched, "page": page_used, "pages": pages, "page_size": size,
                "problems": list(filters.problems), "rows": records_of(rows, API_COLUMNS),
                "sources": [{"name": s.name, "label": s.label, "rows": s.rows, "error": s.error, "note": s.note,
                             "loading": s.loading} for s in index.statuses()]}

    def browse_leaderboard(model: str = "", task: str = "", tier: str = "", quay: str = "",
                           reward_min: float | None = None, reward_max: float | None = None,
                           submitted: str = "any", feasible: str = "any", date_from: str = "", date_to: str = "",
                           source: str = "", same_tasks: bool = False) -> list[dict]:
        """Per model over the filtered rollouts: n, mean reward with its 95% bootstrap CI, mean per tier, feasible %,
        optimal %, ended without submit, median tokens and seconds. same_tasks: only tasks every model played."""
        filters = Filters.parse(models=model, tasks=task, tiers=tier, quays=quay, reward_min=reward_min,
                                reward_max=reward_max, submitted=submitted, feasible=feasible, date_from=date_from,
                                date_to=date_to, sources=source)
        board = index.board(filters, same_tasks=bool(same_tasks))
        return records_of(board, list(board.columns))

    def browse_record(episode_id: str) -> dict:
        """The full record of one rollout from any source (this Space's folder, the Hub dataset, upstream)."""
        try:
            record, row = records.get(episode_id)
        except (RolloutNotFound, SourceError) as exc:
            raise gr.Error(str(exc)) from None
        return {**record, "browse_source": row.get("source")}

    gr.api(browse_rollouts, api_name="browse_rollouts")
    gr.api(browse_leaderboard, api_name="browse_leaderboard")
    gr.api(browse_record, api_name="browse_record")

    return BrowseTab(rollout_id, index, open_rollout, open_outputs, full_view, view_inputs, view_outputs)


def _final_plan(record: dict) -> Any:
    final = record.get("final") if isinstance(record.get("final"), dict) else {}
    if final.get("plan") is not None:
        return final["plan"]
    steps = plan_steps_of(record)
    return steps[-1].get("plan") if steps else None


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default
