"""The berth-planning agent arena: run a model on a PortSimEnv v1 task and watch it live; browse every rollout.

    python app.py            # http://127.0.0.1:7860, embedded berth server, offline with baseline:greedy

Configuration is by environment variables (README.md, ../shared/DESIGN.md): BERTH_ENV_URL, ROLLOUT_DIR,
ROLLOUT_DATASET, PUBLIC_ROLLOUTS, HF_TOKEN and the provider keys.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator

import gradio as gr

from rollouts.schema import valid_episode_id
from viewer.browse_section import build_browse_tab
from viewer.context import AppContext
from viewer.run_section import api_updates, build_run_tab

TITLE = "Berth-planning agent arena"
INTRO = (f"# ⚓ {TITLE}\n"
         "Language models re-plan a broken week of container-ship dockings at a Port of Barcelona quay "
         "([PortSimEnv v1](https://fineenvs-portsimenv.hf.space)). Pick a model and a task, watch it think, "
         "check drafts and submit; every rollout is kept, and **Browse** compares them. Task data: Port de "
         "Barcelona open data (CC BY-SA 4.0).")
CSS = """
#status {min-height: 1.5em}
#chat .message-wrap {font-size: 0.92rem}
"""


def build_app(ctx: AppContext | None = None) -> gr.Blocks:
    ctx = ctx or AppContext.create()
    with gr.Blocks(title=TITLE) as demo:
        gr.Markdown(INTRO)
        with gr.Tabs(selected="run") as tabs:
            with gr.Tab("Run", id="run"):
                run_tab = build_run_tab(ctx)
            with gr.Tab("Browse", id="browse"):
                browse_tab = build_browse_tab(ctx)
        watch = gr.Textbox(visible=False, elem_id="watch-episode")

        def on_load(request: gr.Request):
            query = dict(request.query_params) if request is not None else {}
            episode = (query.get("episode") or "").strip()
            tab = "browse" if query.get("tab") == "browse" or query.get("rollout") else "run"
            return gr.Tabs(selected=tab), episode, (query.get("rollout") or "").strip()

        loaded = demo.load(on_load, None, [tabs, watch, browse_tab.rollout_id], api_visibility="private")
        loaded.then(run_tab.attach, watch, run_tab.outputs, api_visibility="private")
        browse_tab.on_deep_link(loaded)

        # -- the API for scripts (gradio_client): run streams updates, rollout returns a record --------------
        async def run(model: str, task_id: str, max_turns: int = 12, max_tokens: int = 24000,
                      server: str = "embedded", request: gr.Request = None) -> AsyncIterator[dict]:
            """Play one episode; streams {episode_id, state, status, turn, reward, end_reason}, then the record's
            summary. Keys come from the Space's environment only."""
            async for update in api_updates(ctx, model, task_id, max_turns, max_tokens, server, request):
                yield update

        gr.api(run, api_name="run", concurrency_limit=None)

        def rollout(episode_id: str) -> dict:
            """The rollout record of a finished episode (or its live state while it runs)."""
            episode_id = (episode_id or "").strip()
            if not valid_episode_id(episode_id):
                raise gr.Error("malformed episode id")
            live = ctx.registry.get(episode_id)
            if live is not None and live.record is not None:
                return live.record
            record = ctx.store.load(episode_id)
            if record is not None:
                return record
            if live is not None:
                return {"episode_id": episode_id, "state": "running", "events": len(live.events)}
            raise gr.Error(f"no rollout {episode_id}")

        gr.api(rollout, api_name="rollout")

        def stop(episode_id: str) -> bool:
            """Stop a running episode; it ends as `stopped` and its rollout is kept. False if it was not running."""
            return ctx.registry.stop((episode_id or "").strip())

        gr.api(stop, api_name="stop")
    return demo


def launch(demo: gr.Blocks, **options):
    """Queue and launch; run history stays off, since it would keep typed API keys in the browser."""
    demo.queue(default_concurrency_limit=8, max_size=128)
    return demo.launch(css=CSS, footer_links=["api"], run_history=False, **options)


if __name__ == "__main__":
    # A Space stops the app with SIGTERM; as SystemExit it lets the store push what is waiting before exit.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # Start the embedded berth server before the first user arrives, unless runs go to a remote one.
    if not os.environ.get("BERTH_ENV_URL"):
        from berth_env.embedded import embedded_url

        embedded_url()
    demo = build_app()
    from agent.providers.registry import preload_and_freeze

    preload_and_freeze()
    launch(demo)
