"""The launched app for the app and browser tests (a pytest plugin: tests/conftest.py loads it).

- `arena` (fixture, one per test module): `app.build_app(ctx)` over an AppContext on a temporary ROLLOUT_DIR,
  no Hub dataset, no upstream source, the embedded berth server; launched with `prevent_thread_lock` on a free
  local port. Attributes: `url` (ends with "/"), `ctx` (AppContext), `root` (the rollout folder), `demo`.
- `launched_app(tmp_path, records=..., **settings)`: the same as a context manager, for tests that need their own
  settings (e.g. a Hub dataset on testkit/fakehub.py) or rollouts saved before the app starts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass
class LaunchedApp:
    url: str       # ends with "/"
    ctx: Any       # viewer.context.AppContext
    root: Path     # the rollout folder (ROLLOUT_DIR)
    demo: Any      # gradio.Blocks


def settings_for(rollout_dir: Path, **overrides: Any):
    from viewer.context import Settings

    values = {"env_url": None, "rollout_dir": Path(rollout_dir), "dataset": None, "hub_token": None,
              "public_rollouts": None, "space_id": None, "max_episodes": 16, "max_episodes_per_session": 2,
              "baseline_pace_s": 0.02}  # a blink per step: fast, yet a run still streams several updates
    values.update(overrides)
    return Settings(**values)


@contextmanager
def launched_app(tmp_path: Path, *, records: Iterable[dict] = (), **settings: Any) -> Iterator[LaunchedApp]:
    import app as app_module
    from viewer.context import AppContext

    root = Path(tmp_path) / "rollouts"
    ctx = AppContext.create(settings_for(root, **settings))
    for record in records:
        ctx.store.save(record)
    demo = app_module.build_app(ctx)
    _, url, _ = app_module.launch(demo, prevent_thread_lock=True, quiet=True, server_name="127.0.0.1")
    try:
        yield LaunchedApp(url if url.endswith("/") else url + "/", ctx, ctx.store.root, demo)
    finally:
        demo.close()
        ctx.store.close()


@pytest.fixture(scope="module")
def arena(tmp_path_factory) -> Iterator[LaunchedApp]:
    with launched_app(tmp_path_factory.mktemp("arena")) as launched:
        yield launched
