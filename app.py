"""The berth-planning agent arena: run a model on a PortSimEnv v1 task and watch it live; browse every rollout;
play a task by hand.

    python app.py            # http://127.0.0.1:7860, embedded berth server, offline with the baselines

This file composes the sections (viewer/) and the API for scripts; configuration is by environment variables
(README.md): BERTH_ENV_URL, ROLLOUT_DIR, ROLLOUT_DATASET, PUBLIC_ROLLOUTS, TASKS_DATASET, HF_TOKEN and the provider
keys.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

import gradio as gr

from viewer import api, browse_api, gradio_sessions, play_api
from viewer import browse_handlers as browse_on
from viewer.browse_components import BrowseSection
from viewer.browse_section import build_browse_section, wire_page_load
from viewer.context import AppContext
from viewer.play_section import build_play_section
from viewer.run_section import attach_episode, build_run_section
from viewer.wiring import bind

TITLE = "Berth-planning agent arena"
HEADER = (f"## ⚓ {TITLE}\n"
          "Watch language models re-plan a broken week of container-ship dockings at a Port of Barcelona quay.")
ABOUT = ("Each task is one week at quay 24B or 36A of the Port of Barcelona, from the port's open data: ships "
         "arrive late, sections close, cranes break, gales stop all moves. The model reads the situation, tests "
         "drafts with `check_plan` (10 per episode) and hands in one plan with `submit_plan`, graded against a "
         "proven optimum ([PortSimEnv v1](https://fineenvs-portsimenv.hf.space), played here on an embedded "
         "compatible server). **Run** plays a model live; **Browse** ranks, compares and shares every rollout; **Play** "
         "lets you try a task yourself, with the same tools and checks. "
         "Task data: Port de Barcelona open data portal, CC BY-SA 4.0.")
CSS = """
#header {padding: 0 0 2px 0}
#header h2 {margin: 0 0 2px 0}
#header p {margin: 0}
#status {min-height: 1.5em}
#chat .message-wrap {font-size: 0.92rem}
.berth-chart {overflow-x: auto}
.berth-chart .js-plotly-plot, .berth-chart .plot-container {min-width: 720px}
#run-buttons button {min-height: 42px}
.task-filters {gap: 6px !important; align-items: center}
.task-filters .wrap-inner {padding: 0 2px 0 8px !important}
.task-filters input {margin-left: 0 !important; padding-right: 16px !important; text-overflow: ellipsis; font-size: 0.9rem}
.random-task {max-width: 44px; min-height: 36px}
#play-buttons button {min-height: 42px; white-space: nowrap}
#browse-bar button {align-self: flex-end; max-height: 42px; margin-bottom: 6px}
#browse-bar .block {padding-top: 6px; padding-bottom: 6px}
#header {flex-grow: 3 !important}
#about {flex-grow: 1 !important; align-self: center}
#rollouts table, #board table, #heatmap table, #compare-diff table {font-family: var(--font); font-size: 0.85rem}
#rollouts th, #board th, #heatmap th, #compare-diff th {white-space: nowrap; word-break: keep-all}
#rollouts tbody tr {cursor: pointer}
#rollout-detail, #rollout-list, #run-view, #run-form, #play-view, #play-form {min-width: 0 !important; max-width: 100%}
#rollout-head, #compare-head {overflow-wrap: anywhere}
.berth-chart-compact {overflow-x: auto}
@media (max-width: 768px) {
  #browse-split {flex-direction: column-reverse}
  /* min-width: 0 above keeps wide charts from overflowing, but also stops Gradio's columns from wrapping */
  #run-row, #play-row {flex-direction: column}
}
@media (max-width: 640px) {
  #header h2 {font-size: 1.15rem}
  #header p {font-size: 0.85rem}
  #run-buttons {flex-wrap: nowrap}
  #play-table th, #play-table td {font-size: 12px}
}
"""
# Gradio scopes `css` to the app's content; the page margin belongs to an element around it.
HEAD = "<style>@media (max-width: 640px) { .gradio-container .main.app {padding-left: 10px; padding-right: 10px} }</style>"



def build_app(ctx: AppContext | None = None) -> gr.Blocks:
    ctx = ctx or AppContext.create()
    # Every API call without a session is a new session: it must not cost a render of the whole page.
    gradio_sessions.install()
    with gr.Blocks(title=TITLE) as demo:
        with gr.Row(equal_height=False, elem_id="header-row"):
            gr.Markdown(HEADER, elem_id="header")
            with gr.Accordion("What is this?", open=False, elem_id="about"):
                gr.Markdown(ABOUT)
        with gr.Tabs(selected="run") as tabs:
            with gr.Tab("Run", id="run"):
                run = build_run_section(ctx)
            with gr.Tab("Browse", id="browse") as browse_tab:
                browse = build_browse_section(ctx, tabs)
            with gr.Tab("Play", id="play", elem_id="play"):
                build_play_section(ctx)
        watch = gr.Textbox(visible=False, elem_id="watch-episode")
        loaded = demo.load(read_link, None, [tabs, watch], api_visibility="private")
        loaded.then(bind(attach_episode, run), [watch], run.frame_outputs, show_progress="hidden",
                    api_visibility="private")
        wire_page_load(browse, demo)
        browse_tab.select(bind(browse_on.tab_selected, browse), [browse.state], [*browse.outputs, browse.timer],
                          api_visibility="private", show_progress="hidden", queue=False)
        _api(ctx, browse)
    return demo


def read_link(request: gr.Request) -> tuple:
    """The page's own link: `?tab=play` opens Play, `?episode=<id>` re-attaches to an episode (Browse reads its
    own keys and opens itself)."""
    query = request.query_params if request is not None else {}
    tab = gr.Tabs(selected="play") if query.get("tab") == "play" else gr.skip()
    return tab, (query.get("episode") or "").strip()


def _api(ctx: AppContext, browse: BrowseSection) -> None:
    """The API for scripts (gradio_client): `run` streams updates, `rollout` returns a record, `stop` stops;
    Browse's rows, leaderboard and records; `play_start`, `play_check` and `play_submit` play a task by hand."""
    gr.api(bind(api.run, ctx), api_name="run", concurrency_limit=None)
    gr.api(bind(api.rollout, ctx), api_name="rollout")
    gr.api(bind(api.stop, ctx), api_name="stop")
    gr.api(bind(browse_api.browse_rollouts, browse), api_name="browse_rollouts")
    gr.api(bind(browse_api.browse_leaderboard, browse), api_name="browse_leaderboard")
    gr.api(bind(browse_api.browse_record, browse), api_name="browse_record")
    gr.api(bind(play_api.play_start, ctx), api_name="play_start", concurrency_limit=None)
    gr.api(bind(play_api.play_check, ctx), api_name="play_check", concurrency_limit=None)
    gr.api(bind(play_api.play_submit, ctx), api_name="play_submit", concurrency_limit=None)


def launch(demo: gr.Blocks, **options):
    """Queue and launch; run history stays off, since it would keep typed API keys in the browser."""
    demo.queue(default_concurrency_limit=8, max_size=128)
    return demo.launch(css=CSS, head=HEAD, footer_links=["api"], run_history=False, **options)


def use_jemalloc() -> None:
    """Arrow's default pool (mimalloc) keeps the memory it frees: with a million index rows the app held 840 MB at
    its peak, against 680 MB with jemalloc, which hands freed memory back (BENCHMARKS "A million rollouts")."""
    import pyarrow as pa

    with contextlib.suppress(NotImplementedError):  # a pyarrow built without it keeps its default
        pa.set_memory_pool(pa.jemalloc_memory_pool())


if __name__ == "__main__":
    # A Space stops the app with SIGTERM; as SystemExit it lets the store push what is waiting before exit.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    use_jemalloc()
    # Start the embedded berth server before the first user arrives, unless runs go to a remote one.
    if not os.environ.get("BERTH_ENV_URL"):
        from berth_env.embedded import embedded_url

        embedded_url()
    demo = build_app()
    from agent.providers.registry import preload_and_freeze

    preload_and_freeze()
    launch(demo)
