"""The app, launched for real on a free local port, for the app and browser tests and the stream benchmark.

`launched_app(folder, records=..., **settings)` builds `app.build_app(ctx)` over an AppContext on `folder/rollouts`
(no Hub dataset, no upstream source and the embedded berth server unless `settings` say otherwise), saves
`records` before it starts, serves it as `python app.py` does (`app.serve`: the share pages' routes with Gradio
mounted beside them) from a uvicorn server in a thread, and stops it on the way out.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testkit.servers import free_port

START_TIMEOUT_S = 60.0


@dataclass
class LaunchedApp:
    url: str       # ends with "/"
    ctx: Any       # viewer.context.AppContext
    root: Path     # the rollout folder (ROLLOUT_DIR)
    demo: Any      # gradio.Blocks
    server: Any = None  # the FastAPI app served (app.serve): the share pages' routes, Gradio mounted beside them


def settings_for(rollout_dir: Path, **overrides: Any) -> Any:
    """viewer.context.Settings for a test: a local folder only, unless `overrides` add a Hub or a server."""
    from viewer.context import Settings

    values = {"env_url": None, "rollout_dir": Path(rollout_dir), "dataset": None, "hub_token": None,
              "public_rollouts": None, "space_id": None, "max_episodes": 16, "max_episodes_per_visitor": 2,
              "baseline_pace_s": 0.02,  # a blink per step: fast, yet a run still streams several updates
              # Every caller of a test app is one loopback visitor, and a module's tests save far more than a
              # visitor's hourly rollouts: the cap is off unless a test sets it.
              "max_rollouts_per_hour": 0}
    values.update(overrides)
    return Settings(**values)


@contextmanager
def launched_app(folder: Path, *, records: Iterable[dict] = (), **settings: Any) -> Iterator[LaunchedApp]:
    import app as app_module
    from rollouts.links import public_base
    from viewer.context import AppContext

    # As `python app.py` does: links are built on the address the app listens on, unless a test says otherwise.
    port = free_port()
    settings.setdefault("arena_url", public_base({}, listen=("127.0.0.1", port)))
    ctx = AppContext.create(settings_for(Path(folder) / "rollouts", **settings))
    for record in records:
        ctx.store.save(record)
    demo = app_module.build_app(ctx)
    # A port of its own, not 7860 and up: test processes running in parallel (and a developer's app) would race for
    # the same ones.
    server = app_module.serve(demo, ctx)
    with serving(server, port=port) as url:
        try:
            yield LaunchedApp(url, ctx, ctx.store.root, demo, server)
        finally:
            demo.close()
            ctx.store.close()


@contextmanager
def serving(asgi_app: Any, host: str = "127.0.0.1", port: int | None = None) -> Iterator[str]:
    """An ASGI app served by uvicorn from a thread on a free local port; yields its URL (ending with "/")."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(asgi_app, host=host, port=port or free_port(), log_level="warning",
                                           timeout_graceful_shutdown=2))
    thread = threading.Thread(target=server.run, name="app-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the app did not start")
        time.sleep(0.01)
    try:
        yield f"http://{host}:{server.config.port}/"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def match_ended(client: Any, match_id: str, timeout: float = 60.0) -> dict:
    """`/arena_match`'s answer for `match_id` once both episodes have ended and it is saved (or known not to be)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        answer = client.predict(match_id, api_name="/arena_match")
        if answer["state"] == "ended" and answer["ballot"] != "wait":
            return answer
        time.sleep(0.2)
    raise AssertionError(f"match {match_id} did not end")
