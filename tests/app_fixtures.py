"""Launch the whole app in the test process, over a temporary rollout folder (fixtures for app and browser tests)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from viewer.context import AppContext, Settings


@dataclass
class Arena:
    url: str
    ctx: AppContext
    root: Path


def settings_for(root: Path, **overrides) -> Settings:
    values = dict(env_url=None, rollout_dir=root, dataset=None, hub_token=None, public_rollouts=None,
                  space_id=None, max_episodes=8, max_episodes_per_session=2)
    values.update(overrides)
    return Settings(**values)


def launch_arena(root: Path, **overrides) -> tuple[Arena, object]:
    import app

    ctx = AppContext.create(settings_for(root, **overrides))
    demo = app.build_app(ctx)
    _, url, _ = app.launch(demo, prevent_thread_lock=True, quiet=True, server_name="127.0.0.1")
    return Arena(url.rstrip("/") + "/", ctx, root), demo


@pytest.fixture(scope="module")
def arena(tmp_path_factory):
    arena, demo = launch_arena(tmp_path_factory.mktemp("arena") / "rollouts")
    yield arena
    demo.close()
    arena.ctx.store.close()
