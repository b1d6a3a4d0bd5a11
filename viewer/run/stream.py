"""Starting an episode from the Run form or the API, and turning its events into what the page or a script sees.

`check_request` is every check a run request gets (one model, or an arena match's two on one task), raising
`FormError` naming the field to fix (on the Space's keys, within the spending budget's bounds: live.budget);
`budget_notice` says before a run what it may spend of that budget; `start_episode` checks and starts one episode in
the background (live.runs).
`EpisodeFrames` follows an episode and builds its display, frame by frame, as dicts keyed by the components of one
`EpisodeSlots` (the Run section's, or one side of an arena match); `page_frames` yields them for one episode;
`api_updates` yields small JSON updates for `gradio_client`. Episodes run in their own workers, so a closed tab or
client never ends one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import gradio as gr

from agent.limits import DEFAULT_MAX_TOKENS, DEFAULT_MAX_TURNS, InputTooLarge, check_input, valid_task_id
from agent.providers.registry import MissingKey, parse_spec, playable, provider_class
from agent.request import EpisodeRequest, Limits
from agent.spec import ModelSpec, SpecError
from catalog.task_api import TaskTooLarge
from catalog.tasks import closest_tasks
from live.budget import BudgetExceeded, on_space_keys
from live.runs import CapacityError, EpisodeRun, stop_token
from rollouts.record import Record
from viewer.chart import preview_chart
from viewer.context import AppContext
from viewer.live import LiveView
from viewer.rollout_panel import RolloutPanel, draft, draft_slider, shown_optimum, stored_rollout
from viewer.summary import grade_panel
from viewer.visitors import visitor_of
from viewer.wiring import base_url, in_worker

# Redraw the page at most this often while tokens stream; the chat diff is small, the chart only on new plans.
FRAME_S = 0.05
IDLE_TICK_S = 1.0  # the status line's clock still ticks when nothing arrives
API_FRAME_S = 0.25


KEY_MAX_CHARS = 1000  # the longest provider keys are about 200 characters


def excerpt(text: str, limit: int = 60) -> str:
    """A short excerpt of user input for an error message (the whole of it may be a megabyte); `repr` escapes
    control and direction-changing characters."""
    text = " ".join(str(text)[: limit * 4].split())
    return repr(text if len(text) <= limit else text[:limit] + "…")


class FormError(ValueError):
    """A run request that cannot start; `field` is the form field to fix (`model`, `task`, `server`, `limits`,
    `capacity`; an arena match's `model_a` or `model_b`).

    The message is plain text; the page escapes it.
    """

    def __init__(self, field: str, message: str, *, needs_key: bool = False) -> None:
        super().__init__(message)
        self.field, self.needs_key = field, needs_key


@dataclass
class Started:
    run: EpisodeRun
    task: dict | None
    server_url: str | None


@dataclass
class Checked:
    """A run request that passed every check: what to start, one EpisodeRequest per model field (agent.request:
    the spec parsed here, once, and handed as it is to the registry and the loop)."""

    requests: list[EpisodeRequest]
    task: dict | None
    server_url: str | None

    @property
    def task_id(self) -> str:
        return self.requests[0].task_id

    @property
    def models(self) -> list[str]:
        """The specs as given, trimmed."""
        return [request.model for request in self.requests]


def start_episode(ctx: AppContext, model: str, task_id: str, turns: Any, tokens: Any, server_choice: str,
                  url: str, keys: dict[str, str], owner: str, visitor: str | None = None) -> Started:
    """Check the request (`check_request`), then start the episode in the background; every problem is a
    FormError. `owner` may stop it; `visitor` (viewer.visitors) is whom the per-visitor cap counts. Blocking (it may
    resolve the server's name): call it from a worker thread."""
    checked = check_request(ctx, {"model": model}, task_id, turns, tokens, server_choice, url, keys)
    try:
        run = ctx.registry.start(checked.requests[0], owner=owner, visitor=visitor)
    except CapacityError as exc:
        raise FormError("capacity", str(exc)) from None
    return Started(run, checked.task, checked.server_url)


def check_request(ctx: AppContext, models: dict[str, Any], task_id: Any, turns: Any, tokens: Any,
                  server_choice: Any, url: Any, keys: dict[str, Any]) -> Checked:
    """Every check a run request gets, for one model or several on one task (`models`: form field -> spec, so an
    error names the field to fix); FormError otherwise.

    Every check happens here, whichever door the request came through (the form, the API, a raw call of a
    handler, the arena), and before anything starts: a request refused here leaves no rollout. Each field first
    meets the one size limit on what a visitor sends (agent.limits.check_input), then its own rules.
    """
    _check_sizes({**{field: ("the model spec", model) for field, model in models.items()},
                  "task": ("the task id", task_id), "limits": ("the limits", [turns, tokens]),
                  "server": ("the server", [server_choice, url]), "keys": ("the API keys", keys)})
    task_id = task_id.strip() if isinstance(task_id, str) else ""
    if not task_id:
        raise FormError("task", "Pick a task first.")
    if not valid_task_id(task_id):
        raise FormError("task", f"Task id {excerpt(task_id)} must be 1-128 letters, digits, '.', '-' or '_'.")
    keys = _checked_keys(keys)
    specs = [_checked_spec(field, model, keys) for field, model in models.items()]
    try:
        server_url = ctx.server_url(server_choice if isinstance(server_choice, str) else "",
                                    url if isinstance(url, str) else "")
    except ValueError as exc:  # netguard.ServerRefused: a fixed text, never the server's own words
        text = str(exc).rstrip(".")
        raise FormError("server", f"{text[:1].upper()}{text[1:]}.") from None
    try:
        task = ctx.task_for(task_id, server_url)
    except TaskTooLarge as exc:  # the server has it, but it is too large to play here
        text = str(exc)
        raise FormError("task", f"{text[:1].upper()}{text[1:]}.") from None
    if task is None:
        near = "" if server_url else f" The closest it offers: {', '.join(closest_tasks(task_id))}."
        raise FormError("task", f"Task {excerpt(task_id)} is not one this server offers.{near} Pick one from the "
                                "task list.")
    max_turns, max_tokens = _checked_limits(ctx, specs, keys, turns, tokens)
    limits = Limits(max_turns, max_tokens)
    requests = [EpisodeRequest(spec, task_id, limits, server_url, ctx.policy, keys, source="space",
                               baseline_pace_s=ctx.settings.baseline_pace_s) for spec in specs]
    return Checked(requests, task, server_url)


def _checked_limits(ctx: AppContext, specs: list[ModelSpec], keys: dict[str, str], turns: Any,
                    tokens: Any) -> tuple[int, int]:
    """Max turns and tokens a turn: within the loop's range, and on the Space's keys within the Space's bounds
    (live.budget; left out, they are the defaults as far as those bounds allow)."""
    budget = ctx.registry.budget
    spending = budget is not None and any(on_space_keys(model, keys) for model in specs)
    default_turns, default_tokens = budget.defaults() if spending else (DEFAULT_MAX_TURNS, DEFAULT_MAX_TOKENS)
    try:
        max_turns, max_tokens = int(turns or default_turns), int(tokens or default_tokens)
        if not 1 <= max_turns <= 60 or not 256 <= max_tokens <= 200000:
            raise ValueError
    except (TypeError, ValueError):
        raise FormError("limits", "Max turns must be 1-60 and max tokens 256-200000.") from None
    if spending:
        try:
            budget.check_bounds(max_turns, max_tokens)
        except BudgetExceeded as exc:
            raise FormError("limits", str(exc)) from None
    return max_turns, max_tokens


def budget_notice(ctx: AppContext, models: list[Any], turns: Any, tokens: Any, keys: dict[str, Any],
                  visitor: str) -> str | None:
    """What these models may spend of the Space's budget and what is left today (live.budget), for the form
    before the run starts; None when none of them plays on the Space's keys. Never raises."""
    budget = ctx.registry.budget
    if budget is None:
        return None
    keys = {k: v.strip() for k, v in (keys or {}).items() if isinstance(v, str) and v.strip()}
    models = [m.strip() for m in models if isinstance(m, str) and m.strip()]
    try:
        default_turns, default_tokens = budget.defaults()
        limits = {"max_turns": int(turns or default_turns), "max_tokens": int(tokens or default_tokens)}
    except (TypeError, ValueError, OverflowError):
        return None
    if min(limits.values()) < 1:  # the run's own checks refuse it
        return None
    return budget.notice(visitor, [(model, {**limits, "keys": keys}) for model in models])


def _checked_spec(field: str, model: Any, keys: dict[str, str]) -> ModelSpec:
    """The spec, trimmed and parsed, once it has its key (typed or the Space's) and somewhere to send requests."""
    model = model.strip() if isinstance(model, str) else ""
    try:
        spec, _ = playable(model, keys)
    except MissingKey:
        api = provider_class(parse_spec(model).provider)
        raise FormError(field, f"{excerpt(model)} needs an {api.key_name}: paste one under API keys below (used for "
                               f"this run only), or set {api.key_env} on the Space.", needs_key=True) from None
    except SpecError as exc:
        raise FormError(field, str(exc)) from None
    return spec


def _check_sizes(fields: dict[str, tuple[str, Any]]) -> None:
    for field, (what, value) in fields.items():
        try:
            check_input(value, what)
        except InputTooLarge as exc:
            first_model = next((f for f in fields if f.startswith("model")), "model")
            raise FormError(first_model if field == "keys" else field, str(exc), needs_key=field == "keys") from None


def _checked_keys(keys: dict[str, Any]) -> dict[str, str]:
    """Typed keys: text of a bounded length, printable (a key goes into a request header). Never quoted back."""
    checked = {}
    for provider, key in (keys or {}).items():
        key = key.strip() if isinstance(key, str) else ""
        if len(key) > KEY_MAX_CHARS or not key.isprintable():
            raise FormError("model", f"The {_key_name(provider)} must be at most {KEY_MAX_CHARS} "
                                     "printable characters.", needs_key=True)
        checked[provider] = key
    return checked


def _key_name(provider: str) -> str:
    """A provider's key in a sentence ("Anthropic API key"), as the provider declares it."""
    try:
        return provider_class(provider).key_name
    except SpecError:
        return "API key"


def episode_markdown(ctx: AppContext, run: EpisodeRun, request: gr.Request | None) -> str:
    link = ctx.share_link(f"episode={run.episode_id}", base_url(request))
    lines = [f"Episode `{run.episode_id}` · [watch link]({link})"]
    if run.finished:
        if run.save_error:
            lines.append(f"⚠️ {run.save_error}")
        elif run.saved is not None:
            status = ctx.store.status()
            waiting = status.get("waiting") or 0
            where = ("saved locally" if not status.get("dataset")
                     else f"saved locally, {waiting} waiting to push" if waiting else "saved and pushed to the Hub")
            share = ctx.rollout_link(run.episode_id, base_url(request))
            lines.append(f"Rollout {where} · [share link]({share})")
    return "\n\n".join(lines)


OPTIMUM_LABEL = "the model's last plan"


@dataclass
class EpisodeSlots:
    """Where one episode shows: a rollout panel and the lines around it. The Run section is one (it has these
    names); each side of an arena match is another, without the task preview, and without the episode's links
    while its model's name is hidden."""

    ctx: AppContext
    panel: RolloutPanel
    status: Any
    episode_info: Any = None  # the episode's id and links; None: not shown
    episode: Any = None  # a gr.State of {"id", "task_id", "server", "stop_token"}; None: not kept
    preview: Any = None  # the task preview, hidden once an episode shows; None: there is none
    live: Any = None  # the episode's column, shown once an episode shows


class EpisodeFrames:
    """One episode's display, frame by frame, into one set of slots: `first()`, then `await next()` until
    `finished` (a frame when one is due, else None). `masked`: the model's name never reaches the page (an arena
    match in random mode), nor its token counts, which would tell a baseline from a model.

    Frames are built in worker threads: charts and the chat are CPU work, and on the event loop they would hold up
    every other visitor's page (a watcher's link would sit "in queue" while a long reasoning stream renders).

    `drawn` is the chart and the draft slider as the last frame left them. A stream that yields anything after this
    episode's last frame (the arena's verdict) sends them again with it: Gradio's page applies each frame to its
    copy of the previous one in place, and a frame that leaves the chart out turns that copy into an empty update
    before a plot still loading has read it (a `?match=` link's charts came up empty)."""

    def __init__(self, slots: Any, run: EpisodeRun, task: dict | None, request: gr.Request | None, *,
                 can_stop: bool = False, masked: bool = False) -> None:
        self.slots, self.run, self.task, self.request = slots, run, task, request
        self.can_stop, self.masked = can_stop, masked
        self.view = LiveView(task, show_tokens=not masked and not run.model.startswith("baseline:"))
        self.position, self.last_frame, self.dirty, self.finished = 0, 0.0, False, False
        self.drawn: dict = {}

    def first(self) -> dict:
        return self._keep(first_frame(self.slots, self.run, self.task, self.request, self.can_stop))

    def _keep(self, frame: dict) -> dict:
        panel = self.slots.panel
        self.drawn.update({part: frame[part] for part in (panel.chart, panel.plan_step) if part in frame})
        return frame

    async def next(self) -> dict | None:
        batch, finished = self.run.wait(self.position, 0)
        self.position += len(batch)
        if batch:
            await in_worker(self.view.extend, masked_events(batch) if self.masked else batch)
        self.dirty = self.dirty or bool(batch)
        now = time.monotonic()
        if finished or (self.dirty and now - self.last_frame >= FRAME_S) or now - self.last_frame >= IDLE_TICK_S:
            self.last_frame, self.dirty, self.finished = now, False, finished
            return self._keep(await in_worker(live_frame, self.slots, self.view, self.task, self.run,
                                              self.request, final=finished))
        return None


def masked_events(events: list[dict]) -> list[dict]:
    """The events without the model's name (the episode's start and its record name it)."""
    out = []
    for event in events:
        if event.get("type") == "episode_started":
            event = {**event, "model": ""}
        elif event.get("type") == "episode_finished" and isinstance(event.get("record"), dict):
            event = {**event, "record": masked_record(event["record"])}
        out.append(event)
    return out


def masked_record(record: dict) -> dict:
    return {**record, "model": ""}


async def page_frames(slots: Any, run: EpisodeRun, task: dict | None, request: gr.Request | None, *,
                      can_stop: bool = False) -> AsyncIterator[dict]:
    """The display of one episode (the Run section's, or any EpisodeSlots), from its first event to its grade.
    `can_stop`: this page started it, so its state keeps the stop token (a page that only watches never gets one)."""
    frames = EpisodeFrames(slots, run, task, request, can_stop=can_stop)
    yield await in_worker(frames.first)
    while not frames.finished:
        frame = await frames.next()
        if frame is not None:
            yield frame
        if not frames.finished:
            await asyncio.sleep(FRAME_S / 2)


def first_frame(slots: Any, run: EpisodeRun, task: dict | None, request: gr.Request | None,
                can_stop: bool) -> dict:
    panel = slots.panel
    frame = {panel.chat: [], slots.status: "starting…", panel.chart: preview_chart(task) if task else None,
             **_episode_shown(slots)}
    for part, empty in ((panel.plan_step, gr.Slider(visible=False)), (panel.steps, []), (panel.grade, ""),
                        (panel.optimal, gr.Plot(visible=False))):
        if part is not None:  # a panel built without some parts (rollout_panel.PARTS)
            frame[part] = empty
    if slots.episode_info is not None:
        frame[slots.episode_info] = episode_markdown(slots.ctx, run, request)
    if slots.episode is not None:
        frame[slots.episode] = {"id": run.episode_id, "task_id": run.task_id, "server": None,
                                "stop_token": stop_token(run.episode_id) if can_stop else None}
    return frame


def _episode_shown(slots: Any) -> dict:
    """The episode's column shown and the task preview hidden (when the slots have them)."""
    shown = {}
    if slots.preview is not None:
        shown[slots.preview] = gr.Column(visible=False)
    if slots.live is not None:
        shown[slots.live] = gr.Column(visible=True)
    return shown


def live_frame(slots: Any, view: LiveView, task: dict | None, run: EpisodeRun,
               request: gr.Request | None, *, final: bool) -> dict:
    panel = slots.panel
    # Every frame shows the episode, not only the first: two frames yielded in a blink (a finished episode opened by
    # its link) sometimes reach the page as one, and the first one's switch from the preview was lost with it.
    frame: dict = {panel.chat: view.messages, slots.status: view.status(), **_episode_shown(slots)}
    # The last frame draws the last plan again: the page must end on the submitted plan even if a busy browser
    # lost or reordered an earlier chart (seen once on a loaded machine: the chart stayed on the previous draft).
    if view.new_plan or (final and view.steps):
        view.new_plan = False
        count = len(view.steps)
        frame[panel.chart] = draft(panel, task, view.steps, count)
        if panel.plan_step is not None:
            frame.update({panel.plan_step: draft_slider(panel, count), panel.steps: list(view.steps)})
    if final:
        finished = Record(view.record or run.record or {})
        if panel.grade is not None:
            frame[panel.grade] = grade_panel(finished, task)
        if panel.optimal is not None:
            frame[panel.optimal] = shown_optimum(finished, task, OPTIMUM_LABEL)
        if slots.episode_info is not None:
            frame[slots.episode_info] = episode_markdown(slots.ctx, run, request)
    return frame


def replay_frame(slots: Any, rollout: Record | Mapping[str, Any], request: gr.Request | None, *,
                 masked: bool = False) -> dict:
    """The display of a finished, stored episode (a watch link opened after it ended, an arena match replayed);
    `masked` as for EpisodeFrames."""
    ctx, stored = slots.ctx, Record.of(rollout)
    task = ctx.task_for(stored.task_id, None)
    view = LiveView(task, show_tokens=not masked and not stored.baseline)
    view.extend(stored.events())
    episode_id = stored.episode_id
    frame = {**stored_rollout(slots.panel, masked_record(dict(stored.data)) if masked else stored, task,
                              optimum_label=OPTIMUM_LABEL),
             slots.status: view.status(), **_episode_shown(slots)}
    if slots.episode_info is not None:
        share = ctx.rollout_link(episode_id, base_url(request))
        frame[slots.episode_info] = f"Episode `{episode_id}` (finished) · [share link]({share})"
    if slots.episode is not None:
        frame[slots.episode] = {"id": episode_id, "task_id": stored.task_id, "server": None}
    return frame


async def api_updates(ctx: AppContext, model: str, task_id: str, max_turns: int, max_tokens: int, server: str,
                      request: gr.Request | None) -> AsyncIterator[dict]:
    """The `run` API: the same episode as the Run tab, as small JSON updates for scripts; each carries the
    episode's stop token, which `/stop` asks for (the episode id alone only lets one watch)."""
    owner = getattr(request, "session_hash", None) or "api"
    try:
        started = await in_worker(start_episode, ctx, model, task_id, max_turns, max_tokens,
                                          server or "embedded", "", {}, owner, visitor_of(request))
    except FormError as exc:
        raise gr.Error(str(exc)) from None
    run = started.run
    view = LiveView(None)
    position, last = 0, 0.0
    while True:
        batch, finished = run.wait(position, 0)
        position += len(batch)
        view.extend(batch)
        now = time.monotonic()
        # A script gets an update at every step of the episode (a turn, a call, a result), and at most four a
        # second while tokens stream.
        step = any(e["type"] not in ("text_delta", "reasoning_delta", "tool_args_delta") for e in batch)
        if finished or step or (batch and now - last >= API_FRAME_S):
            last = now
            yield _api_update(run, view, position, batch, finished)
            if finished:
                return
        await asyncio.sleep(FRAME_S / 2)


def _api_update(run: EpisodeRun, view: LiveView, position: int, batch: list[dict], finished: bool) -> dict:
    update = {"episode_id": run.episode_id, "stop_token": stop_token(run.episode_id),
              "state": "finished" if finished else "running",
              "status": view.status(), "events": position, "last": batch[-1]["type"] if batch else None}
    if finished:
        finished = Record(run.record or {})
        update.update(reward=finished.reward, end_reason=finished.end_reason or None,
                      feasible=finished.feasible if finished.grade else None, cost=finished.cost,
                      errors=finished.errors, saved=run.save_error is None)
    return update
