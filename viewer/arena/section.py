"""The Arena section (`?tab=arena`): two models, one task, side by side; the grader names the winner, then a
visitor says which agent they would trust with the port.

Layout: the form on top (model A and B, or a random pair whose names stay hidden until the vote; the shared task
picker; Run and Stop; keys folded below), then the verdict and the vote, then the two sides (`#arena-a`,
`#arena-b`: side by side on a laptop, stacked on a phone), each with its head, status line, berth chart with a
slider over its drafts, chat and grade, filled as the Run tab fills its own (viewer/run/stream.py). `?match=<id>`
watches a running match or replays a finished one. Both episodes are ordinary rollouts, saved and browsable.

Handlers are top-level functions taking the section first (wired with `viewer.wiring.bind`); they return dicts
keyed by component.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import gradio as gr

from live.match_runs import SKIP, VoteRefused
from rollouts.matches import VOTE_CHOICES
from rollouts.schema import valid_episode_id
from viewer.arena import api as arena_api
from viewer.arena.components import ArenaSection, ArenaSide
from viewer.arena.match import begin_match, match_frames, random_pool, revealed_frame, stored_match_frame
from viewer.arena.view import RULE, VOTE_LABELS
from viewer.context import AppContext
from viewer.markdown import escape_md
from viewer.models import MODEL_INFO, PRESETS, build_key_fields, typed_keys
from viewer.request_check import FormError, budget_notice
from viewer.rollout_panel import build_rollout_panel, draft
from viewer.sections import Page, Route, Section
from viewer.task_picker import build_task_picker, wire_task_picker
from viewer.visitors import visitor_of
from viewer.wiring import bind, in_worker, unchanged

log = logging.getLogger(__name__)

DEFAULT_TASK = "dock-24B-w06x1-standard-0"
DEFAULT_PAIR = ("baseline:greedy", "baseline:hasty")
INTRO = ("**Two agents, one task, side by side.** When both have ended the grader names the winner: "
         f"{RULE}. Then say which one you would trust with the port. A random pair is drawn from the models this "
         "Space can run; their names stay hidden until you vote.")
FIELD_NAMES = {"model_a": "Model A", "model_b": "Model B", "task": "Task"}
CHART = {"height": 330, "cranes": False}  # two charts side by side: short, without the crane panel
CSS = """
#arena-intro p {margin: 0}
#arena-buttons button, #arena-vote button {min-height: 42px}
#arena-form > .column, #arena-a, #arena-b {min-width: 0 !important; max-width: 100%}
#arena-verdict h3 {margin: 4px 0 2px 0}
#arena-a-head h3, #arena-b-head h3 {margin: 2px 0; overflow-wrap: anywhere}
@media (max-width: 640px) {
  #arena-intro p {font-size: 0.85rem; line-height: 1.35}
}
@media (max-width: 768px) {
  /* min-width: 0 above keeps the charts in their columns, but also stops Gradio's columns from wrapping */
  #arena-form, #arena-sides {flex-direction: column}
  #arena-vote {flex-wrap: wrap}
  #arena-vote button {flex: 1 1 40%}
}
"""
# On a phone the match is below the form: bring the verdict line (and the sides under it) into view.
SCROLL_TO_MATCH = """() => { if (window.innerWidth < 768) {
  document.querySelector('#arena-verdict')?.scrollIntoView({behavior: 'smooth', block: 'start'}); } }"""
# A match link lands there too, once the match is on the page (an ordinary page load stays at the form).
LAND_ON_MATCH = f"(match) => {{ if (match) ({SCROLL_TO_MATCH})(); }}"


# -- building --------------------------------------------------------------------------------------------------

def build_arena_section(ctx: AppContext, page: Page) -> ArenaSection:
    app_tabs = page.tabs
    gr.Markdown(INTRO, elem_id="arena-intro")
    parts: dict[str, Any] = {}
    with gr.Row(equal_height=False, elem_id="arena-form"):
        with gr.Column(scale=5, min_width=300):
            with gr.Row(equal_height=True):
                parts["model_a"] = gr.Dropdown(PRESETS, value=DEFAULT_PAIR[0], allow_custom_value=True,
                                               label="Model A", info=MODEL_INFO, elem_id="arena-model-a")
                parts["model_b"] = gr.Dropdown(PRESETS, value=DEFAULT_PAIR[1], allow_custom_value=True,
                                               label="Model B", info="or any other spec", elem_id="arena-model-b")
            parts["random"] = gr.Checkbox(False, label="Random pair (names hidden until you vote)",
                                          elem_id="arena-random")
            with gr.Accordion("API keys: used for this match only, never stored", open=False,
                              elem_id="arena-keys") as keys:
                parts["key_fields"] = build_key_fields("arena-")
        with gr.Column(scale=5, min_width=300):
            parts["picker"] = build_task_picker(ctx, default=DEFAULT_TASK, prefix="arena-",
                                                task_elem_id="arena-task")
            with gr.Row(elem_id="arena-buttons"):
                parts["run_button"] = gr.Button("▶ Run both", variant="primary", min_width=100, elem_id="arena-run")
                parts["stop_button"] = gr.Button("■ Stop both", interactive=False, min_width=100,
                                                 elem_id="arena-stop")
    parts["budget_note"] = gr.Markdown(visible=False, elem_id="arena-budget-note")
    parts["note"] = gr.Markdown(elem_id="arena-note")
    parts.update(_build_match())
    section = ArenaSection(ctx=ctx, app_tabs=app_tabs, task=parts["picker"].task, keys=keys, **parts)
    _wire(section)
    return section


def _build_match() -> dict[str, Any]:
    verdict = gr.Markdown(elem_id="arena-verdict")
    with gr.Row(visible=False, equal_height=True, elem_id="arena-vote") as vote_row:
        buttons = {choice: gr.Button(VOTE_LABELS[choice], min_width=90, elem_id=f"arena-vote-{choice}")
                   for choice in VOTE_CHOICES}
        skip = gr.Button("Skip: show the names", variant="secondary", min_width=90, visible=False,
                         elem_id="arena-skip")
    ballot = gr.Markdown(elem_id="arena-ballot")
    with gr.Row(equal_height=False, visible=False, elem_id="arena-sides") as sides_row:
        a, b = _build_side("a"), _build_side("b")
    link = gr.Markdown(elem_id="arena-link")
    return dict(verdict=verdict, vote_row=vote_row, vote_buttons=buttons, skip=skip, ballot=ballot, link=link,
                sides_row=sides_row, a=a, b=b, match=gr.State(None),
                watch=gr.Textbox(visible=False, elem_id="arena-watch"))


def _build_side(side: str) -> ArenaSide:
    with gr.Column(min_width=300, elem_id=f"arena-{side}") as column:
        head = gr.Markdown(f"### {side.upper()}", elem_id=f"arena-{side}-head")
        status = gr.Markdown(elem_id=f"arena-{side}-status")
        panel = build_rollout_panel(f"arena-{side}-", parts=("chart", "drafts", "chat", "grade"), chart_first=True,
                                    chat_label=f"{side.upper()}: the episode", chat_height=420, chart_options=CHART,
                                    compact=True)
        info = gr.Markdown(elem_id=f"arena-{side}-info")
    return ArenaSide(side, column, head, status, info, panel)


def _wire(s: ArenaSection) -> None:
    private = {"api_visibility": "private"}
    wire_task_picker(s.picker)
    s.random.input(bind(pick_random, s), [s.random], [s.model_a, s.model_b], **private)
    # The key fields go in by name (`**typed` in the handlers), one per provider that takes a key.
    form, keys = [s.model_a, s.model_b, s.random, s.task], {"inputs_kwargs": s.key_fields}
    locked = [s.run_button, s.stop_button, s.note, s.vote_row, s.ballot, s.verdict, s.sides_row]
    started = s.run_button.click(bind(lock_controls, s), None, locked, **private)
    started.then(None, js=SCROLL_TO_MATCH, **private)  # once the verdict line says the match is starting
    # show_progress hidden: each side's status line says how its episode goes.
    running = started.then(bind(start_match, s), form, [*s.match_outputs, s.note, s.keys], concurrency_limit=None,
                           show_progress="hidden", **keys, **private)
    running.then(bind(unlock_controls, s), None, [s.run_button, s.stop_button], **private).then(
        None, js=SCROLL_TO_MATCH, **private)  # the verdict and the vote, on a phone
    s.stop_button.click(bind(stop_match, s), [s.match], [s.verdict, s.stop_button], **private)
    # What a match on the Space's keys may spend, before it starts, and again once one ends (less is left then).
    spend_in = [s.model_a, s.model_b, s.random]
    gr.on([s.model_a.change, s.model_b.change, s.random.change, *(f.change for f in s.key_fields.values())],
          bind(show_budget, s), spend_in, [s.budget_note], show_progress="hidden", **keys, **private)
    running.then(bind(show_budget, s), spend_in, [s.budget_note], show_progress="hidden", **keys, **private)
    for choice, button in s.vote_buttons.items():
        button.click(bind(cast_vote, s, choice), [s.match], s.match_outputs, **private)
    s.skip.click(bind(cast_vote, s, SKIP), [s.match], s.match_outputs, **private)
    for side in s.sides:
        side.panel.plan_step.release(bind(show_step, s, side), [side.panel.plan_step, side.panel.steps, s.match],
                                     [side.panel.chart], **private)


# -- handlers ----------------------------------------------------------------------------------------------------

def pick_random(section: ArenaSection, random: bool) -> dict:
    """A random pair leaves the model fields out (they keep what was typed, for the next named match)."""
    return {section.model_a: gr.Dropdown(interactive=not random), section.model_b: gr.Dropdown(interactive=not random)}


def show_budget(section: ArenaSection, model_a: str, model_b: str, random: bool, request: gr.Request,
                oauth_token: gr.OAuthToken | None = None, **typed: str) -> dict:
    """The match's share of the Space's budget (viewer.run.stream.budget_notice): a random pair plays on the
    Space's keys and holds its pool's two dearest models (viewer.arena.match.begin_match), so the note is theirs."""
    keys, models = typed_keys(typed, oauth_token), [model_a, model_b]  # a signed-in visitor's own token
    budget = section.ctx.registry.budget
    if random is True and budget is not None:
        keys, models = {}, budget.dearest(random_pool())
    note = budget_notice(section.ctx, models, None, None, keys, visitor_of(request))
    return {section.budget_note: gr.Markdown(f"💳 {escape_md(note)}" if note else "", visible=bool(note))}


def lock_controls(section: ArenaSection) -> dict:
    return {section.run_button: gr.Button(interactive=False), section.stop_button: gr.Button(interactive=True,
                                                                                              variant="stop"),
            section.note: "", section.vote_row: gr.Row(visible=False), section.ballot: "",
            section.verdict: "⏳ Starting both episodes…",
            # Shown now, so that a phone has somewhere to scroll to before the first frame arrives.
            section.sides_row: gr.Row(visible=True)}


def unlock_controls(section: ArenaSection) -> dict:
    return {section.run_button: gr.Button(interactive=True),
            section.stop_button: gr.Button(interactive=False, variant="secondary")}


async def start_match(section: ArenaSection, model_a: str, model_b: str, random: bool, task_id: str,
                      request: gr.Request, oauth_token: gr.OAuthToken | None = None,
                      **typed: str) -> AsyncIterator[dict]:
    """Start both episodes and stream them side by side to the verdict; a request that cannot start says why.
    `typed`: the key fields' values by provider (viewer.models.build_key_fields)."""
    keys = typed_keys(typed, oauth_token)
    owner = getattr(request, "session_hash", None) or "anonymous"
    try:
        match = await in_worker(begin_match, section.ctx, model_a, model_b, task_id, random, keys, owner,
                                visitor_of(request))
    except FormError as exc:
        log.warning("match not started (%s): %s", exc.field, exc)
        where = FIELD_NAMES.get(exc.field, "")
        text = escape_md(exc) if str(exc).startswith(where) else f"{where}: {escape_md(exc)}"
        out: dict = {section.note: f"⚠️ {text}", section.verdict: "",
                     section.sides_row: gr.Row(visible=False)}
        if exc.needs_key:
            out[section.keys] = gr.Accordion(open=True)
        yield out
        return
    async for frame in match_frames(section, match, request, can_stop=True):
        yield frame


def stop_match(section: ArenaSection, match: dict | None, request: gr.Request) -> dict:
    """Stop both episodes of this page's match; both rollouts are kept. Only the page that started it may (or
    the holder of its stop token)."""
    match = match if isinstance(match, dict) else {}
    match_id, token = match.get("id"), match.get("stop_token")
    owner = getattr(request, "session_hash", None)
    if isinstance(match_id, str) and section.ctx.matches.stop(match_id, owner=owner,
                                                              token=token if isinstance(token, str) else None):
        return {section.verdict: "Stopping both episodes… both rollouts are kept.",
                section.stop_button: gr.Button(interactive=False)}
    return unchanged(section.verdict)


def cast_vote(section: ArenaSection, choice: str, match: dict | None, request: gr.Request) -> dict:
    """A vote (or a skip) on the match on this page: counted once per visitor, then the names if they were
    hidden."""
    match_id = match.get("id") if isinstance(match, dict) else None
    if not isinstance(match_id, str):
        return {section.ballot: "Start a match first."}
    try:
        live = section.ctx.matches.vote(match_id, choice, visitor=visitor_of(request))
    except VoteRefused as exc:
        return {section.ballot: f"⚠️ {escape_md(exc)}"}
    if section.ctx.matches.get(match_id) is None and live.row is not None:  # counted on its ballot
        return stored_match_frame(section, live.row, request)
    return revealed_frame(section, live, request)


def show_step(section: ArenaSection, side: ArenaSide, index: float, steps: list[dict], match: dict | None) -> dict:
    if not isinstance(match, dict) or not match.get("task_id"):
        return unchanged(side.panel.chart)
    task = section.ctx.task_for(str(match["task_id"]), None)
    return {side.panel.chart: draft(side.panel, task, steps, index)}


async def attach_match(section: ArenaSection, match_id: str, request: gr.Request) -> AsyncIterator[dict]:
    """`?match=<id>`: watch a running match (never stopping it) or replay a finished one side by side."""
    match_id = (match_id or "").strip()
    if not match_id:  # an ordinary page load
        yield unchanged(section.verdict)
        return
    if not valid_episode_id(match_id):
        yield {section.verdict: "⚠️ That match id is malformed: ids are 1-64 letters, digits, '-' or '_'."}
        return
    live = section.ctx.matches.get(match_id)
    if live is not None:
        async for frame in match_frames(section, live, request):
            yield frame
        return
    row = await in_worker(section.ctx.matches.book.get, match_id)
    if row is None:
        yield {section.verdict: f"⚠️ No match `{match_id}` is running here or stored in this Space's folder."}
        return
    yield await in_worker(stored_match_frame, section, row, request)


def wire_page_load(section: ArenaSection, page: Page, tab: gr.Tab) -> None:
    """`?tab=arena` opens this tab; `?match=<id>` opens it on that match."""
    loaded = page.demo.load(match_link, None, [section.watch, section.app_tabs], api_visibility="private",
                       show_progress="hidden", queue=False)
    attached = loaded.then(bind(attach_match, section), [section.watch], section.match_outputs,
                           show_progress="hidden", api_visibility="private")
    attached.then(None, [section.watch], None, js=LAND_ON_MATCH, api_visibility="private")
    page.demo.load(bind(show_budget, section), [section.model_a, section.model_b, section.random],
              [section.budget_note], inputs_kwargs=section.key_fields, api_visibility="private",
              show_progress="hidden")


def match_link(request: gr.Request) -> tuple[str, Any]:
    query = request.query_params if request is not None else {}
    match_id = (query.get("match") or "").strip()
    opens = query.get("tab") == "arena" or bool(match_id)
    return match_id, gr.Tabs(selected="arena") if opens else gr.skip()


SECTION = Section("Arena", "arena", CSS, build_arena_section, wire_page_load, elem_id="arena", routes=(
    Route("arena_start", arena_api.arena_start, concurrency_limit=None),
    Route("arena_match", arena_api.arena_match, concurrency_limit=None),
    Route("arena_vote", arena_api.arena_vote, concurrency_limit=None), Route("arena_stop", arena_api.arena_stop)))

__all__ = ["CSS", "SECTION", "ArenaSection", "build_arena_section", "wire_page_load"]
