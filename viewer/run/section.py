"""The Run section: pick a model and a task, see the task before running, watch the episode live.

Layout: the form on the left (model, task, Run and Stop first; server, limits and keys folded below), the task
preview or the live episode on the right (status line, chat, the berth chart of each draft, the grade). Episodes
run in background workers (live.runs), so a closed tab never ends one; `?episode=<id>` re-attaches.

Handlers are top-level functions taking the section first (wired with `viewer.wiring.bind`); they return dicts
keyed by component, so each says exactly what it changes.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import gradio as gr

from agent.limits import DEFAULT_MAX_TOKENS, DEFAULT_MAX_TURNS, valid_task_id
from agent.netguard import NOT_ALLOWED
from berth_env import check, parse_plan
from berth_env.baselines import published_plan
from catalog.task_api import TaskTooLarge
from catalog.tasks import CatalogError, embedded_catalog
from catalog.tasks import remote_catalog as read_remote_catalog
from rollouts.archive import RolloutNotFound
from rollouts.schema import valid_episode_id
from rollouts.sources import SourceError
from viewer.chart import preview_chart
from viewer.context import SERVER_CHOICES, AppContext
from viewer.frames import page_frames, replay_frame
from viewer.markdown import escape_md
from viewer.models import DEFAULT_MODEL, MODEL_INFO, PRESETS, build_key_fields, typed_keys
from viewer.request_check import FormError, budget_notice, start_episode
from viewer.rollout_panel import build_rollout_panel, draft
from viewer.run import api as run_api
from viewer.run.components import RunSection
from viewer.sections import Page, Route, Section
from viewer.task_picker import build_task_picker, show_catalog, wire_task_picker
from viewer.task_view import task_brief
from viewer.visitors import visitor_of
from viewer.wiring import bind, in_worker, unchanged

log = logging.getLogger(__name__)

DEFAULT_TASK = "dock-24B-w06x1-standard-0"
IDLE_STATUS = "Pick a model and a task, then **Run**."
CSS = """
#status {min-height: 1.5em}
#chat .message-wrap {font-size: 0.92rem}
#run-buttons button {min-height: 42px}
#run-view, #run-form {min-width: 0 !important; max-width: 100%}
@media (max-width: 768px) {
  /* min-width: 0 above keeps wide charts from overflowing, but also stops Gradio's columns from wrapping */
  #run-row {flex-direction: column}
}
@media (max-width: 640px) {
  #run-buttons {flex-wrap: nowrap}
}
"""
SCROLL_TO_EPISODE = """() => { if (window.innerWidth < 768) {
  document.querySelector('#status')?.scrollIntoView({behavior: 'smooth', block: 'start'}); } }"""


# -- building --------------------------------------------------------------------------------------------------

def build_run_section(ctx: AppContext, page: Page) -> RunSection:
    with gr.Row(equal_height=False, elem_id="run-row"):
        with gr.Column(scale=4, min_width=300, elem_id="run-form"):
            form = _build_form(ctx, DEFAULT_TASK)
        with gr.Column(scale=7, min_width=300, elem_id="run-view"):
            view = _build_view(ctx, form["task"].value)
    section = RunSection(ctx=ctx, **form, **view)
    _wire(section)
    return section


def _build_form(ctx: AppContext, default: str) -> dict[str, Any]:
    model = gr.Dropdown(PRESETS, value=DEFAULT_MODEL, allow_custom_value=True, label="Model", info=MODEL_INFO,
                        elem_id="model")
    model_note = gr.Markdown(visible=False, elem_id="model-note")
    picker = build_task_picker(ctx, default=default)
    with gr.Row(elem_id="run-buttons"):
        run_button = gr.Button("▶ Run", variant="primary", min_width=100, elem_id="run")
        stop_button = gr.Button("■ Stop", variant="secondary", interactive=False, min_width=100, elem_id="stop")
    budget_note = gr.Markdown(visible=False, elem_id="budget-note")
    episode_info = gr.Markdown(elem_id="episode-info")
    with gr.Accordion("Server and limits", open=False, elem_id="settings"):
        # With visitors' servers off (CUSTOM_SERVERS=0) and none allowed, the choice would only ever be refused.
        open_to_urls = ctx.settings.custom_servers_on or bool(ctx.settings.allowed_servers.strip())
        choices = [c for c in SERVER_CHOICES if open_to_urls or c[1] != "custom"]
        server = gr.Radio(choices, value="embedded", label="Berth server", elem_id="server")
        server_url = gr.Textbox(label="Server URL", placeholder="https://…", visible=False, elem_id="server-url")
        server_note = gr.Markdown(visible=False, elem_id="server-note")
        with gr.Row():
            max_turns = gr.Number(DEFAULT_MAX_TURNS, precision=0, minimum=1, maximum=60, label="Max turns", elem_id="max-turns")
            max_tokens = gr.Number(DEFAULT_MAX_TOKENS, precision=0, minimum=256, maximum=200000, label="Max tokens per turn",
                                   elem_id="max-tokens")
    with gr.Accordion("API keys: used for this run only, never stored", open=False, elem_id="keys") as keys:
        key_fields = build_key_fields()
        if ctx.settings.space_id:
            gr.LoginButton("Sign in with Hugging Face to use your own token for hf: models")
    return dict(model=model, model_note=model_note, picker=picker, task=picker.task, run_button=run_button,
                stop_button=stop_button, budget_note=budget_note, episode_info=episode_info, server=server, server_url=server_url,
                server_note=server_note, max_turns=max_turns, max_tokens=max_tokens, keys=keys, key_fields=key_fields)


def _build_view(ctx: AppContext, default: str) -> dict[str, Any]:
    status = gr.Markdown(IDLE_STATUS, elem_id="status")
    task = ctx.task_for(default, None)
    with gr.Column(elem_id="task-preview") as preview:
        preview_text = gr.Markdown(_brief(task, default), elem_id="preview-text")
        preview_plot = gr.Plot(preview_chart(task) if task else None, show_label=False,
                               elem_id="preview-chart", elem_classes=["berth-chart"])
    with gr.Column(visible=False, elem_id="live") as live:
        panel = build_rollout_panel("", chat_label="Episode", chat_height=430,
                                    slider_label="Draft: step through every plan the model sent")
    return dict(status=status, preview=preview, preview_text=preview_text, preview_chart=preview_plot, live=live,
                panel=panel, episode=gr.State(None))


def _wire(s: RunSection) -> None:
    private = {"api_visibility": "private"}
    preview_in, preview_out = [s.task, s.server, s.server_url], [s.preview, s.preview_text, s.preview_chart, s.live,
                                                                 s.status]
    for changed in wire_task_picker(s.picker)[:2]:  # a refilter or Random may pick another task
        changed.then(bind(show_preview, s), preview_in, preview_out, **private)
    s.task.input(bind(show_preview, s), preview_in, preview_out, **private)
    server_out = [s.server_url, s.picker.catalog, s.picker.split, s.task, s.server_note]
    gr.on([s.server.input, s.server_url.submit], bind(change_server, s), [s.server, s.server_url], server_out,
          **private)
    # The key fields go in by name (`**typed` in the handlers), one per provider that takes a key.
    form, keys = [s.model, s.task, s.max_turns, s.max_tokens, s.server, s.server_url], {"inputs_kwargs": s.key_fields}
    controls = [s.run_button, s.stop_button, s.model_note, s.server_note]
    # On a phone the episode is below the form: bring it into view when Run is pressed.
    started = s.run_button.click(bind(lock_controls, s), None, controls, js=SCROLL_TO_EPISODE, **private)
    # show_progress hidden: the status line says how the episode goes, and Gradio's progress dots would sit
    # under every finished tool call of the chat until the episode ends.
    running = started.then(bind(start_run, s), form, [*s.frame_outputs, s.model_note, s.server_note, s.keys],
                           concurrency_limit=None, show_progress="hidden", **keys, **private)
    running.then(bind(unlock_controls, s), None, [s.run_button, s.stop_button], **private)
    # What a run on the Space's keys may spend, before it starts, and again once one ends (less is left then).
    spend_in = [s.model, s.max_turns, s.max_tokens]
    gr.on([s.model.change, s.max_turns.change, s.max_tokens.change, *(f.change for f in s.key_fields.values())],
          bind(show_budget, s), spend_in, [s.budget_note], show_progress="hidden", **keys, **private)
    running.then(bind(show_budget, s), spend_in, [s.budget_note], show_progress="hidden", **keys, **private)
    s.stop_button.click(bind(stop_run, s), [s.episode], [s.status, s.stop_button], **private)
    s.panel.plan_step.release(bind(show_step, s), [s.panel.plan_step, s.panel.steps, s.episode], [s.panel.chart],
                              **private)


# -- handlers ----------------------------------------------------------------------------------------------------

def show_preview(section: RunSection, task_id: str, server_choice: str, url: str,
                 request: gr.Request = None) -> dict:
    """The picked task, before any run: what broke, what it costs, the published plan in red where it breaks.

    On a busy machine this answer can arrive after Run was clicked: then it fills the preview but leaves this
    page's running episode on screen (switching to the preview would hide the live chat for the whole run)."""
    try:
        server_url = section.ctx.server_url(server_choice, url)
    except ValueError:
        server_url = None
    task_id = task_id.strip() if isinstance(task_id, str) else ""
    if not valid_task_id(task_id):  # a raw call may send anything: it is neither looked up nor echoed
        task_id = "?"
    try:
        task = section.ctx.task_for(task_id, server_url) if task_id != "?" else None
    except TaskTooLarge:  # Run says why when it is clicked (viewer.request_check.check_request)
        task = None
    filled = {section.preview_text: _brief(task, task_id), section.preview_chart: preview_chart(task) if task else None}
    session = getattr(request, "session_hash", None)
    if session and section.ctx.registry.running_for(session):
        return filled
    return {**filled, section.preview: gr.Column(visible=True), section.live: gr.Column(visible=False),
            section.status: IDLE_STATUS}


def change_server(section: RunSection, choice: str, url: str) -> dict:
    """Another berth server: its task list (from its Task API) replaces the picker's."""
    out: dict = {section.server_url: gr.Textbox(visible=choice == "custom")}
    if choice == "custom" and not (url or "").strip():
        return {**out, section.server_note: gr.Markdown(visible=False)}
    try:
        target = section.ctx.server_url(choice, url)
        listed = None if target is None else read_remote_catalog(target, policy=section.ctx.policy)
    except (ValueError, CatalogError) as exc:  # a fixed text for a visitor's server (agent/netguard.py)
        text = str(exc).rstrip(".")
        note = f"⚠️ {escape_md(text[:1].upper() + text[1:])}." + (
            "" if text == NOT_ALLOWED else " Runs on this server will fail until it can be reached.")
        return {**out, section.server_note: gr.Markdown(note, visible=True)}
    count = len(embedded_catalog() if listed is None else listed)
    note = gr.Markdown(f"{count} tasks on {escape_md(target)}", visible=True) if target else \
        gr.Markdown(visible=False)
    return {**out, section.server_note: note,
            **show_catalog(section.picker, listed, f"{count} tasks on {target}" if target else None)}


def show_budget(section: RunSection, model: str, turns: float, tokens: float, request: gr.Request,
                oauth_token: gr.OAuthToken | None = None, **typed: str) -> dict:
    # A signed-in visitor's hf: run plays on their own token (typed_keys, as start_run reads it): no note.
    note = budget_notice(section.ctx, [model], turns, tokens, typed_keys(typed, oauth_token), visitor_of(request))
    return {section.budget_note: gr.Markdown(f"💳 {escape_md(note)}" if note else "", visible=bool(note))}


def lock_controls(section: RunSection) -> dict:
    return {section.run_button: gr.Button(interactive=False), section.model_note: gr.Markdown(visible=False),
            section.stop_button: gr.Button(interactive=True, variant="stop"),
            section.server_note: gr.Markdown(visible=False)}


def unlock_controls(section: RunSection) -> dict:
    return {section.run_button: gr.Button(interactive=True),
            section.stop_button: gr.Button(interactive=False, variant="secondary")}


async def start_run(section: RunSection, model: str, task_id: str, turns: float, tokens: float,
                    server_choice: str, url: str, request: gr.Request, oauth_token: gr.OAuthToken | None = None,
                    **typed: str) -> AsyncIterator[dict]:
    """Start an episode and stream its display; a request that cannot start says why beside the field to fix.
    `typed`: the key fields' values by provider (viewer.models.build_key_fields)."""
    keys = typed_keys(typed, oauth_token)
    owner = getattr(request, "session_hash", None) or "anonymous"
    try:
        started = await in_worker(start_episode, section.ctx, model, task_id, turns, tokens, server_choice,
                                          url, keys, owner, visitor_of(request))
    except FormError as exc:
        log.warning("run not started (%s): %s", exc.field, exc)
        yield _form_error(section, exc)
        return
    async for frame in page_frames(section, started.run, started.task, request, can_stop=True):
        yield frame


def _form_error(section: RunSection, exc: FormError) -> dict:
    text = f"⚠️ {escape_md(exc)}"
    if exc.field == "server":
        return {section.server_note: gr.Markdown(text, visible=True)}
    if exc.field in ("capacity", "limits"):
        return {section.status: text}
    out: dict = {section.model_note: gr.Markdown(text, visible=True)}
    if exc.needs_key:
        out[section.keys] = gr.Accordion(open=True)
    return out


def stop_run(section: RunSection, episode: dict | None, request: gr.Request) -> dict:
    """Stop this page's episode; the rollout is kept. Only the browser session that started it (or the holder of
    its stop token, kept in that page's state) may stop it: a watch link's page may not."""
    owner = getattr(request, "session_hash", None)
    episode = episode if isinstance(episode, dict) else {}
    episode_id, token = episode.get("id"), episode.get("stop_token")
    if isinstance(episode_id, str) and section.ctx.registry.stop(
            episode_id, owner=owner, token=token if isinstance(token, str) else None):
        return {section.status: "Stopping… the rollout is kept.", section.stop_button: gr.Button(interactive=False)}
    return unchanged(section.status)


def show_step(section: RunSection, index: float, steps: list[dict], episode: dict | None) -> dict:
    if not episode:
        return unchanged(section.panel.chart)
    try:
        task = section.ctx.task_for(episode["task_id"], episode.get("server"))
    except TaskTooLarge:
        task = None
    return {section.panel.chart: draft(section.panel, task, steps, index)}


async def attach_episode(section: RunSection, episode_id: str, request: gr.Request) -> AsyncIterator[dict]:
    """Re-attach to a running or finished episode (`?episode=<id>`); watching only, never stopping."""
    episode_id = (episode_id or "").strip()
    if not episode_id:  # an ordinary page load, not an `?episode=` link: change nothing
        yield unchanged(section.status)
        return
    if not valid_episode_id(episode_id):
        yield {section.status: "⚠️ That episode id is malformed."}
        return
    if not section.ctx.public(episode_id):  # a hidden side of a random match: as unknown until the vote
        yield {section.status: f"⚠️ No episode `{episode_id}` is running here or stored."}
        return
    found = section.ctx.records.find(episode_id)
    if found.run is not None:
        task = await in_worker(section.ctx.task_for, found.run.task_id, None)
        async for frame in page_frames(section, found.run, task, request):
            yield frame
        return
    try:
        stored = await in_worker(lambda: found.record)
    except RolloutNotFound:
        yield {section.status: f"⚠️ No episode `{episode_id}` is running here or stored."}
        return
    except (SourceError, ValueError) as exc:
        yield {section.status: f"⚠️ {escape_md(exc)}"}
        return
    yield await in_worker(replay_frame, section, stored, request)


# -- helpers -------------------------------------------------------------------------------------------------------

def _brief(task: dict | None, task_id: str) -> str:
    if task is None:
        return task_brief(None, task_id)
    try:
        result = check(task, parse_plan(task, published_plan(task)).entries)
        broken = (len(result.violations), len({v.get("ship") for v in result.violations}))
    except Exception:  # a remote task in a shape our grader does not read: the brief still has the rest
        broken = None
    return task_brief(task, broken=broken)


def wire_page_load(section: RunSection, page: Page, tab: gr.Tab) -> None:
    """`?episode=<id>` re-attaches to that episode (running or finished), watching only."""
    watch = gr.Textbox(visible=False, elem_id="watch-episode")
    loaded = page.demo.load(episode_link, None, [watch], api_visibility="private", show_progress="hidden", queue=False)
    loaded.then(bind(attach_episode, section), [watch], section.frame_outputs, show_progress="hidden",
                api_visibility="private")
    page.demo.load(bind(show_budget, section), [section.model, section.max_turns, section.max_tokens],
              [section.budget_note], inputs_kwargs=section.key_fields, api_visibility="private",
              show_progress="hidden")


def episode_link(request: gr.Request) -> str:
    query = request.query_params if request is not None else {}
    return (query.get("episode") or "").strip()


SECTION = Section("Run", "run", CSS, build_run_section, wire_page_load, routes=(
    Route("run", run_api.run, concurrency_limit=None), Route("rollout", run_api.rollout), Route("stop", run_api.stop)))

__all__ = ["CSS", "SECTION", "RunSection", "attach_episode", "build_run_section", "wire_page_load"]
