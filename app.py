"""The berth-planning agent arena: run a model on a PortSimEnv v1 task and watch it live; browse every rollout;
play a task by hand.

    python app.py            # http://127.0.0.1:7860, embedded berth server, offline with the baselines

This file composes the sections (viewer/) and the API for scripts, and serves them with the rollouts' share pages
(`/r/<episode_id>`, viewer/share/routes.py) in one process: a FastAPI app with the share routes, Gradio mounted on
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
from viewer.arena.section import SECTION as ARENA
from viewer.browse.section import SECTION as BROWSE
from viewer.context import AppContext, Settings
from viewer.downloads import RemoveWhenServed
from viewer.play.section import SECTION as PLAY
from viewer.run.section import SECTION as RUN
from viewer.sections import Page, Section
from viewer.share.board_files import BoardFiles
from viewer.share.routes import SharePages
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
# The page's tabs, in order; each builds, loads and lists its API routes through one contract (viewer/sections.py).
SECTIONS: tuple[Section, ...] = (RUN, ARENA, BROWSE, PLAY)
CSS = "".join([PAGE_CSS, rollout_panel.CSS, task_picker.CSS, *(section.css for section in SECTIONS)])
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
        with gr.Tabs(selected=SECTIONS[0].id) as tabs:
            page = Page(demo, tabs)
            built = []
            for section in SECTIONS:
                with gr.Tab(section.label, id=section.id, elem_id=section.elem_id) as tab:
                    built.append((section, section.build(ctx, page), tab))
        for section, value, tab in built:  # after every tab exists: a load may open any of them
            section.load(value, page, tab)
        api_routes(ctx)
    return demo


def api_routes(ctx: AppContext) -> None:
    """The API for scripts (gradio_client), each section's routes: Run's `run` streams updates, `rollout` returns a
    record, `stop` stops; `arena_start`, `arena_match`, `arena_vote` and `arena_stop` play, read, judge and stop a
    match of two models; Browse's rows, leaderboard and records; `play_start`, `play_check` and `play_submit` play
    a task by hand."""
    for section in SECTIONS:
        for route in section.routes:
            gr.api(bind(route.handler, ctx), api_name=route.name, concurrency_limit=route.concurrency_limit)


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
    server.include_router(BoardFiles(ctx, rasteriser=pages.raster).router)  # /board.json, .csv, .svg, .png
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
