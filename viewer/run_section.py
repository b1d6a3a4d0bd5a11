"""The Run tab: pick a model and a task, watch the episode live, see the plan as a berth chart and the grade.

Gradio wiring only: what to show comes from viewer/live.py and the renderers; episodes run in viewer/runs.py's
workers, so a closed tab never ends one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import gradio as gr

from agent.providers.registry import MissingKey, check_endpoint, parse_spec, resolve_key
from agent.runs import CapacityError, EpisodeRun
from agent.spec import SpecError
from agent.tasks import (
    TIER_ORDER,
    CatalogError,
    TaskChoice,
    embedded_catalog,
    filter_choices,
    random_choice,
    task_for,
)
from agent.tasks import remote_catalog as read_remote_catalog
from rollouts.schema import valid_episode_id
from viewer.chart import berth_chart, side_by_side
from viewer.context import SERVER_CHOICES, AppContext
from viewer.live import LiveView
from viewer.summary import grade_panel

PRESETS = [
    "baseline:greedy",
    "baseline:naive",
    "openai:gpt-6.1-sol",
    "anthropic:claude-sonnet-5-5",
    "hf:zai-org/GLM-5.3-Flash:baseten",
    "hf:Qwen/Qwen3.8-2.4T-A95B:together",
    "hf:zai-org/GLM-5.3:together",
    "hf:Qwen/Qwen3.8-27B:cerebras|ovhcloud",
]
DEFAULT_MODEL = "baseline:greedy"
DEFAULT_TASK = "dock-24B-w06x1-standard-0"
# Redraw the page at most this often while tokens stream; the chat diff is small, the chart only on new plans.
FRAME_S = 0.05
IDLE_TICK_S = 1.0  # the status line's clock still ticks when nothing arrives
BASELINE_PACE_S = 0.015  # a baseline writes about 60 words a second in the Space, so its turns can be followed


@dataclass
class RunTab:
    outputs: list[Any]
    attach: Any  # the handler that re-attaches to an episode, for `?episode=` links


def _chart(task: dict | None, steps: list[dict], index: int) -> Any:
    if not steps:
        return None
    if task is None:
        return None
    index = max(0, min(index, len(steps) - 1))
    step = steps[index]
    previous = steps[index - 1]["plan"] if index > 0 else None
    verdict = "submitted" if step.get("tool") == "submit_plan" else "checked"
    return berth_chart(task, step.get("plan"), previous_plan=previous,
                       title=f"Plan {index + 1} of {len(steps)} ({verdict} in turn {step.get('turn')})")


def _beside_optimum(task: dict | None, steps: list[dict]) -> Any:
    """The model's last plan over the task pack's proven optimum, ships placed differently highlighted."""
    reference = (task or {}).get("reference") or {}
    if task is None or not reference.get("optimal_plan"):
        return gr.Plot(visible=False)
    if not steps:
        return gr.Plot(value=berth_chart(task, reference["optimal_plan"],
                                         title=f"Reference optimal plan (cost {reference.get('optimal_cost')})"),
                       visible=True)
    figure = side_by_side(task, steps[-1].get("plan"), reference["optimal_plan"],
                          titles=("the model's last plan", f"reference optimum (cost {reference.get('optimal_cost')})"))
    return gr.Plot(value=figure, visible=True)


def _episode_markdown(ctx: AppContext, episode_id: str, run: EpisodeRun | None, base_url: str | None) -> str:
    link = ctx.share_link(f"episode={episode_id}", base_url)
    lines = [f"Episode `{episode_id}` · [watch link]({link})"]
    if run is not None and run.finished:
        if run.save_error:
            lines.append(f"⚠️ {run.save_error}")
        elif run.saved is not None:
            status = ctx.store.status()
            waiting = status.get("waiting") or 0
            where = ("saved locally" if not status.get("dataset")
                     else f"saved locally, {waiting} waiting to push" if waiting else "saved and pushed to the Hub")
            share = ctx.share_link(f"tab=browse&rollout={episode_id}", base_url)
            lines.append(f"Rollout {where} · [share link]({share})")
    return "\n\n".join(lines)


def _base_url(request: gr.Request | None) -> str | None:
    try:
        return str(request.request.base_url) if request is not None and request.request is not None else None
    except AttributeError:
        return None


async def follow_episode(ctx: AppContext, run: EpisodeRun, task: dict | None, request: gr.Request | None,
                         server_url: str | None = None) -> AsyncIterator[tuple]:
    """Stream one episode's display: chat, status, chart, slider, steps, grade, optimal plan, episode info."""
    view = LiveView(task)
    position = 0
    last_frame = 0.0
    base_url = _base_url(request)
    info = _episode_markdown(ctx, run.episode_id, run, base_url)
    episode = {"id": run.episode_id, "task_id": run.task_id, "server": server_url}
    yield (view.messages, "starting…", None, gr.Slider(visible=False), [], "", gr.Plot(visible=False), info,
           episode)
    dirty = False
    while True:
        batch, finished = run.wait(position, 0)
        position += len(batch)
        view.extend(batch)
        dirty = dirty or bool(batch)
        now = time.monotonic()
        if finished or (dirty and now - last_frame >= FRAME_S) or now - last_frame >= IDLE_TICK_S:
            last_frame, dirty = now, False
            yield _frame(ctx, view, task, run, base_url, final=finished)
            if finished:
                return
        await asyncio.sleep(FRAME_S / 2)


def _frame(ctx: AppContext, view: LiveView, task: dict | None, run: EpisodeRun, base_url: str | None, *,
           final: bool) -> tuple:
    chart = slider = gr.skip()
    steps = gr.skip()
    if view.new_plan:
        view.new_plan = False
        count = len(view.steps)
        chart = _chart(task, view.steps, count - 1)
        slider = gr.Slider(minimum=1, maximum=max(count, 2), value=count, step=1, visible=count > 1,
                           label=f"Plan (1-{count}): step through every plan the model sent")
        steps = list(view.steps)
    grade = optimal = info = gr.skip()
    if final:
        record = view.record or run.record or {}
        grade = grade_panel(record, task)
        optimal = _beside_optimum(task, view.steps)
        info = _episode_markdown(ctx, run.episode_id, run, base_url)
    return view.messages, view.status(), chart, slider, steps, grade, optimal, info, gr.skip()


def build_run_tab(ctx: AppContext) -> RunTab:
    choices = embedded_catalog()
    catalog = gr.State([c.task_id for c in choices])
    default_task = DEFAULT_TASK if any(c.task_id == DEFAULT_TASK for c in choices) else choices[0].task_id
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=340):
            model = gr.Dropdown(PRESETS, value=DEFAULT_MODEL, allow_custom_value=True, label="Model spec",
                                info="provider:model[@effort]; baseline:greedy needs no key", elem_id="model")
            with gr.Row():
                tier = gr.Dropdown(["all", *TIER_ORDER], value="all", label="Tier", min_width=100)
                quay = gr.Dropdown(["all", "24B", "36A"], value="all", label="Quay", min_width=100)
            task = gr.Dropdown([(c.label, c.task_id) for c in choices], value=default_task, label="Task",
                               allow_custom_value=True, elem_id="task")
            random_button = gr.Button("🎲 Random task", size="sm")
            server = gr.Radio(SERVER_CHOICES, value="embedded", label="Server", elem_id="server")
            custom_url = gr.Textbox(label="Server URL", placeholder="https://…", visible=False)
            catalog_note = gr.Markdown(visible=False)
            with gr.Row():
                max_turns = gr.Number(12, precision=0, minimum=1, maximum=60, label="Max turns",
                                      elem_id="max-turns")
                max_tokens = gr.Number(24000, precision=0, minimum=256, maximum=200000,
                                       label="Max tokens per turn", elem_id="max-tokens")
            with gr.Accordion("API keys: used for this run only, never stored", open=False):
                key_anthropic = gr.Textbox(type="password", label="Anthropic API key", elem_id="key-anthropic")
                key_openai = gr.Textbox(type="password", label="OpenAI API key", elem_id="key-openai")
                key_hf = gr.Textbox(type="password", label="Hugging Face token (hf:)", elem_id="key-hf")
                key_vllm = gr.Textbox(type="password", label="vLLM server key (vllm:)", elem_id="key-vllm")
                if ctx.settings.space_id:
                    gr.LoginButton("Sign in with Hugging Face to use your own token for hf: models")
            with gr.Row():
                run_button = gr.Button("Run", variant="primary", elem_id="run")
                stop_button = gr.Button("Stop", variant="stop", elem_id="stop")
            episode_info = gr.Markdown(elem_id="episode-info")
        with gr.Column(scale=2):
            status = gr.Markdown("Pick a model and a task, then Run.", elem_id="status")
            chat = gr.Chatbot(label="Episode", height=640, elem_id="chat", sanitize_html=True,
                              render_markdown=True, feedback_options=None, group_consecutive_messages=False,
                              buttons=["copy_all"])
    chart = gr.Plot(label="Berth chart (sections × hours)", elem_id="chart")
    plan_step = gr.Slider(minimum=1, maximum=2, value=1, step=1, visible=False, label="Plan", elem_id="plan-step")
    grade = gr.Markdown(elem_id="grade")
    optimal = gr.Plot(visible=False, label="The model's last plan beside the reference optimum", elem_id="optimal")
    steps = gr.State([])
    episode = gr.State(None)
    outputs = [chat, status, chart, plan_step, steps, grade, optimal, episode_info, episode]

    # -- the form -----------------------------------------------------------------------------------------
    def refilter(tier_value: str, quay_value: str, ids: list[str], current: str):
        listed = _choices_for(ids)
        shown = filter_choices(listed, tier=None if tier_value == "all" else tier_value,
                               quay=None if quay_value == "all" else quay_value)
        value = current if any(c.task_id == current for c in shown) else (shown[0].task_id if shown else None)
        return gr.Dropdown(choices=[(c.label, c.task_id) for c in shown], value=value)

    tier.change(refilter, [tier, quay, catalog, task], task, api_visibility="private")
    quay.change(refilter, [tier, quay, catalog, task], task, api_visibility="private")

    def pick_random(tier_value: str, quay_value: str, ids: list[str]):
        shown = filter_choices(_choices_for(ids), tier=None if tier_value == "all" else tier_value,
                               quay=None if quay_value == "all" else quay_value)
        choice = random_choice(shown)
        return gr.Dropdown(value=choice.task_id) if choice else gr.skip()

    random_button.click(pick_random, [tier, quay, catalog], task, api_visibility="private")

    def change_server(choice: str, url: str):
        show_url = gr.Textbox(visible=choice == "custom")
        try:
            target = ctx.server_url(choice, url) if choice != "custom" or url.strip() else None
        except ValueError as exc:
            return show_url, gr.skip(), gr.skip(), gr.Markdown(f"⚠️ {exc}", visible=True)
        if target is None:
            listed = embedded_catalog()
            note = gr.Markdown(visible=False)
        else:
            try:
                listed = read_remote_catalog(target)
            except CatalogError as exc:
                return show_url, gr.skip(), gr.skip(), gr.Markdown(
                    f"⚠️ {exc}. Runs on this server will fail until it can be reached; the task list below is "
                    "the embedded one.", visible=True)
            _remember(listed)
            note = gr.Markdown(f"{len(listed)} tasks on {target}", visible=True)
        ids = [c.task_id for c in listed]
        return show_url, ids, gr.Dropdown(choices=[(c.label, c.task_id) for c in listed],
                                          value=ids[0] if ids else None), note

    server.change(change_server, [server, custom_url], [custom_url, catalog, task, catalog_note],
                  api_visibility="private")
    custom_url.submit(change_server, [server, custom_url], [custom_url, catalog, task, catalog_note],
                      api_visibility="private")

    # -- running ------------------------------------------------------------------------------------------
    async def start_run(model_spec: str, task_id: str, turns: float, tokens: float, server_choice: str, url: str,
                  anthropic_key: str, openai_key: str, hf_key: str, vllm_key: str, request: gr.Request,
                  oauth_token: gr.OAuthToken | None = None):
        keys = {"anthropic": anthropic_key, "openai": openai_key, "hf": hf_key, "vllm": vllm_key}
        if not keys["hf"] and oauth_token is not None:
            keys["hf"] = oauth_token.token
        run_, task_, server_url = _start(ctx, model_spec, task_id, turns, tokens, server_choice, url, keys,
                                         request)
        async for frame in follow_episode(ctx, run_, task_, request, server_url):
            yield frame

    run_button.click(start_run, [model, task, max_turns, max_tokens, server, custom_url, key_anthropic, key_openai,
                           key_hf, key_vllm], outputs, api_visibility="private", concurrency_limit=None)

    def stop_run(episode: dict | None):
        if episode and ctx.registry.stop(episode["id"]):
            return "Stopping… the rollout is kept."
        return gr.skip()

    stop_button.click(stop_run, episode, status, api_visibility="private")

    def show_step(index: float, all_steps: list[dict], episode: dict | None):
        if not episode:
            return gr.skip()
        return _chart(task_for(episode["task_id"], episode.get("server")), all_steps, int(index) - 1)

    plan_step.release(show_step, [plan_step, steps, episode], chart, api_visibility="private")

    async def attach_episode(episode_id: str, request: gr.Request):
        """Re-attach to a running or finished episode (`?episode=<id>`)."""
        episode_id = (episode_id or "").strip()
        if not episode_id:  # an ordinary page load, not an `?episode=` link
            yield tuple(gr.skip() for _ in outputs)
            return
        if not valid_episode_id(episode_id):
            yield ([], "⚠️ That episode id is malformed.", *([gr.skip()] * 7))
            return
        run_ = ctx.registry.get(episode_id)
        if run_ is not None:
            task_ = task_for(run_.task_id, None)
            async for frame in follow_episode(ctx, run_, task_, request):
                yield frame
            return
        record = ctx.store.load(episode_id)
        if record is None:
            yield ([], f"⚠️ No episode `{episode_id}` is running here or stored.", *([gr.skip()] * 7))
            return
        yield replay_frame(ctx, record, request)

    return RunTab(outputs, attach_episode)


def replay_frame(ctx: AppContext, record: dict, request: gr.Request | None) -> tuple:
    """The Run tab's display for a finished, stored episode."""
    from viewer.replay import record_events

    task = task_for(record.get("task_id", ""), None)
    view = LiveView(task)
    view.extend(record_events(record))
    steps = list(record.get("steps") or [])
    count = len(steps)
    optimal = _beside_optimum(task, steps)
    episode_id = record.get("episode_id", "")
    share = ctx.share_link(f"tab=browse&rollout={episode_id}", _base_url(request))
    return (view.messages, view.status(), _chart(task, steps, count - 1),
            gr.Slider(minimum=1, maximum=max(count, 2), value=max(count, 1), step=1, visible=count > 1),
            steps, grade_panel(record, task), optimal,
            f"Episode `{episode_id}` (finished) · [share link]({share})",
            {"id": episode_id, "task_id": record.get("task_id", ""), "server": None})


# -- helpers ----------------------------------------------------------------------------------------------

_REMOTE: dict[str, TaskChoice] = {}


def _remember(choices: list[TaskChoice]) -> None:
    for choice in choices:
        _REMOTE[choice.task_id] = choice


def _choices_for(ids: list[str]) -> list[TaskChoice]:
    known = {c.task_id: c for c in embedded_catalog()}
    known.update({k: v for k, v in _REMOTE.items() if k not in known})
    return [known[i] for i in ids if i in known]


def _start(ctx: AppContext, model_spec: str, task_id: str, turns: float, tokens: float, server_choice: str,
           url: str, keys: dict[str, str], request: gr.Request | None) -> tuple[EpisodeRun, dict | None, str | None]:
    """Check the form, then start the episode in the background; every problem is a clear message."""
    model_spec = (model_spec or "").strip()
    task_id = (task_id or "").strip()
    if not task_id:
        raise gr.Error("Pick a task first.")
    try:
        spec = parse_spec(model_spec)
        resolve_key(spec, keys)
        check_endpoint(spec)
        server_url = ctx.server_url(server_choice, url)
    except MissingKey as exc:
        raise gr.Error(f"{exc}.") from None
    except (SpecError, ValueError) as exc:
        raise gr.Error(str(exc)) from None
    owner = getattr(request, "session_hash", None) or "anonymous"
    try:
        max_turns = int(turns or 12)
        max_tokens = int(tokens or 24000)
        if not 1 <= max_turns <= 60 or not 256 <= max_tokens <= 200000:
            raise ValueError
    except (TypeError, ValueError):
        raise gr.Error("Max turns must be 1-60 and max tokens 256-200000.") from None
    try:
        run = ctx.registry.start(model_spec, task_id, owner=owner, env_url=server_url, max_turns=max_turns,
                                 max_tokens=max_tokens, keys={k: v for k, v in keys.items() if v},
                                 source="space", baseline_pace_s=BASELINE_PACE_S)
    except CapacityError as exc:
        raise gr.Error(str(exc)) from None
    return run, task_for(task_id, server_url), server_url


API_FRAME_S = 0.25


async def api_updates(ctx: AppContext, model: str, task_id: str, max_turns: int, max_tokens: int, server: str,
                      request: gr.Request | None) -> AsyncIterator[dict]:
    """The `run` API: the same episode as the Run tab, as small JSON updates for scripts."""
    run, _task, _server_url = _start(ctx, model, task_id, max_turns, max_tokens, server or "embedded", "", {},
                                     request)
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
            update = {"episode_id": run.episode_id, "state": "finished" if finished else "running",
                      "status": view.status(), "events": position, "last": batch[-1]["type"] if batch else None}
            if finished:
                record = run.record or {}
                grade = (record.get("final") or {}).get("grade") or {}
                update.update(reward=record.get("reward"), end_reason=record.get("end_reason"),
                              feasible=grade.get("feasible"), cost=grade.get("cost"),
                              errors=record.get("errors") or [], saved=run.save_error is None)
            yield update
            if finished:
                return
        await asyncio.sleep(FRAME_S / 2)
