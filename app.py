"""The berth-planning agent arena: run a model on a PortSimEnv v1 task and watch it live; browse every rollout;
play a task by hand.

    python app.py            # http://127.0.0.1:7860, embedded berth server, offline with the baselines

This file composes the sections (viewer/) and the API for scripts, and serves them with the rollouts' share pages
(`/r/<episode_id>`, viewer/share_routes.py) in one process: a FastAPI app with the share routes, Gradio mounted on
it at `/`, run by uvicorn. Configuration is by environment variables (README.md): BERTH_ENV_URL, ROLLOUT_DIR,
ROLLOUT_DATASET, PUBLIC_ROLLOUTS, TASKS_DATASET, ARENA_URL, HF_TOKEN and the provider keys; GRADIO_SERVER_NAME and
GRADIO_SERVER_PORT say where to listen, as they do for Gradio.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import AsyncIterator
from typing import Any

import gradio as gr
import uvicorn
from fastapi import FastAPI

from rollouts import settings
from viewer import gradio_sessions, rollout_panel, task_picker
from viewer.arena import api as arena_api
from viewer.arena import section as arena
from viewer.browse import api as browse_api
from viewer.browse import section as browse
from viewer.context import AppContext, Settings
from viewer.downloads import RemoveWhenServed
from viewer.play import api as play_api
from viewer.play import section as play
from viewer.run import api as run_api
from viewer.run import section as run
from viewer.share_routes import SharePages
from viewer.wiring import bind

TITLE = "Berth-planning agent arena"
HEADER = (f"## ⚓ {TITLE}\n"
          "Watch language models re-plan a broken week of container-ship dockings at a Port of Barcelona quay.")
ABOUT = ("Each task is one week at quay 24B or 36A of the Port of Barcelona, from the port's open data: ships "
         "arrive late, sections close, cranes break, gales stop all moves. The model reads the situation, tests "
         "drafts with `check_plan` (10 per episode) and hands in one plan with `submit_plan`, graded against a "
         "proven optimum ([PortSimEnv v1](https://fineenvs-portsimenv.hf.space), played here on an embedded "
         "compatible server). **Run** plays a model live; **Arena** races two side by side, the grader naming the "
         "winner; **Browse** ranks, compares and shares every rollout; **Play** "
         "lets you try a task yourself, with the same tools and checks. "
         "Task data: Port de Barcelona open data portal, CC BY-SA 4.0.")
# The page's own lines; each section brings its own (its CSS), as do the shared task picker and the rollout panel.
PAGE_CSS = """
#header {padding: 0 0 2px 0; flex-grow: 3 !important}
#header h2 {margin: 0 0 2px 0}
#header p {margin: 0}
#about {flex-grow: 1 !important; align-self: center}
@media (max-width: 640px) {
  #header h2 {font-size: 1.15rem}
  #header p {font-size: 0.85rem}
}
"""
CSS = "".join([PAGE_CSS, rollout_panel.CSS, task_picker.CSS, run.CSS, arena.CSS, browse.CSS, play.CSS])
# Gradio scopes `css` to the app's content; the page margin belongs to an element around it.
HEAD = ("<style>@media (max-width: 640px) { .gradio-container .main.app {padding-left: 10px; padding-right: 10px} }"
        "</style>" + rollout_panel.FIT_CHARTS)



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
                run_section = run.build_run_section(ctx)
            with gr.Tab("Arena", id="arena", elem_id="arena"):
                arena_section = arena.build_arena_section(ctx, tabs)
            with gr.Tab("Browse", id="browse") as browse_tab:
                browse_section = browse.build_browse_section(ctx, tabs)
            with gr.Tab("Play", id="play", elem_id="play"):
                play_section = play.build_play_section(ctx)
        run.wire_page_load(run_section, demo)
        arena.wire_page_load(arena_section, demo)
        browse.wire_page_load(browse_section, demo, browse_tab)
        play.wire_page_load(play_section, demo, tabs)
        api_routes(ctx)
    return demo


def api_routes(ctx: AppContext) -> None:
    """The API for scripts (gradio_client): `run` streams updates, `rollout` returns a record, `stop` stops;
    `arena_start`, `arena_match`, `arena_vote` and `arena_stop` play, read, judge and stop a match of two models;
    Browse's rows, leaderboard and records; `play_start`, `play_check` and `play_submit` play a task by hand."""
    gr.api(bind(run_api.run, ctx), api_name="run", concurrency_limit=None)
    gr.api(bind(run_api.rollout, ctx), api_name="rollout")
    gr.api(bind(run_api.stop, ctx), api_name="stop")
    gr.api(bind(arena_api.arena_start, ctx), api_name="arena_start", concurrency_limit=None)
    gr.api(bind(arena_api.arena_match, ctx), api_name="arena_match", concurrency_limit=None)
    gr.api(bind(arena_api.arena_vote, ctx), api_name="arena_vote", concurrency_limit=None)
    gr.api(bind(arena_api.arena_stop, ctx), api_name="arena_stop")
    gr.api(bind(browse_api.browse_rollouts, ctx), api_name="browse_rollouts")
    gr.api(bind(browse_api.browse_leaderboard, ctx), api_name="browse_leaderboard")
    gr.api(bind(browse_api.browse_record, ctx), api_name="browse_record")
    gr.api(bind(play_api.play_start, ctx), api_name="play_start", concurrency_limit=None)
    gr.api(bind(play_api.play_check, ctx), api_name="play_check", concurrency_limit=None)
    gr.api(bind(play_api.play_submit, ctx), api_name="play_submit", concurrency_limit=None)


def serve(demo: gr.Blocks, ctx: AppContext, **options: Any) -> FastAPI:
    """The app as one ASGI app: the share pages' routes first, then Gradio mounted at `/` (the documented way to
    serve routes beside a Gradio app; routes registered before the mount are matched first). The queue, the styles,
    the footer and the rest are what `demo.launch` was given before; run history stays off, since it would keep
    typed API keys in the browser. `options` go to `gr.mount_gradio_app`."""
    pages = SharePages(ctx)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        pages.close()  # the raster helper process

    server = FastAPI(lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    server.state.share_pages = pages
    server.include_router(pages.router)
    server.add_middleware(RemoveWhenServed, downloads=ctx.downloads)  # a download goes once fetched
    demo.queue(default_concurrency_limit=8, max_size=128)
    # As launch() would on a Space: the app installable there (a manifest and icons), not elsewhere.
    options.setdefault("pwa", gr.utils.get_space() is not None)
    gr.mount_gradio_app(server, demo, path="/", css=CSS, head=HEAD, footer_links=["api"], run_history=False,
                        show_error=False, **options)
    # The mounted app is the one serving, as launch() records it: demo.close() then ends its event streams.
    demo.server_app = demo.app = next(route.app for route in server.routes
                                      if isinstance(getattr(route, "app", None), gr.routes.App))
    return server


def address() -> tuple[str, int]:
    """Where `python app.py` listens: GRADIO_SERVER_NAME and GRADIO_SERVER_PORT when set, as for Gradio's own
    launch; else port 7860 on 127.0.0.1, or on every interface on a Space (its proxy must reach the app)."""
    on_space = settings.SPACE_ID.is_set() or settings.SYSTEM.get() == "spaces"
    host = settings.GRADIO_SERVER_NAME.get() or ("0.0.0.0" if on_space else "127.0.0.1")
    return host, settings.GRADIO_SERVER_PORT.get()


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
    if not settings.BERTH_ENV_URL.is_set():
        from berth_env.embedded import embedded_url

        embedded_url()
    host, port = address()
    context = AppContext.create(Settings.from_env(listen=(host, port)))  # links on this address, never on `Host`
    demo = build_app(context)
    from agent.providers.registry import preload_and_freeze

    preload_and_freeze()
    print(f"* Running on local URL:  http://{'127.0.0.1' if host == '0.0.0.0' else host}:{port}", flush=True)
    # Open event streams (a page watching a run) must not hold a stop for long: uvicorn waits 5 s at most.
    uvicorn.run(serve(demo, context), host=host, port=port, log_level="warning", timeout_graceful_shutdown=5)
