"""Shared pytest fixtures. Keep this file small and generic: feature-specific fixtures live with their tests."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from testkit.warm_python import WarmPython

# Bytecode caching on, whatever PYTHONDONTWRITEBYTECODE says: with it off, every xdist worker re-parses and
# assertion-rewrites each test module and compiles each of ours at every start, about 5 s of a core per worker.
# Pytest's rewritten modules and Python's own pycs land in __pycache__ (gitignored), written atomically, so two
# workers writing the same one is safe. Only this process: child processes still follow the environment.
sys.dont_write_bytecode = False

# The launched app (`arena`) for the app and browser tests.
pytest_plugins = ["tests.app_fixtures"]
# What `python -m agent run` imports on its way (the adapters the tests use, the embedded server, the store),
# imported once by the warm interpreter that `warm_python` forks from.
WARM_PRELOAD = ["batch.cli", "agent.providers.baseline", "agent.providers.anthropic_messages",
                "agent.providers.chat_completions", "berth_env.server", "berth_env.embedded", "rollouts.store",
                "rollouts.board"]


@pytest.fixture(scope="session")
def env_url() -> str:
    """Base URL of the berth server embedded in this test process (started once, on first use)."""
    from berth_env.embedded import embedded_url

    return embedded_url()


@pytest.fixture(scope="session")
def warm_python() -> Iterator[WarmPython]:
    """`python -m ...` child processes that skip Python's start-up (testkit/warm_python.py)."""
    runner = WarmPython(WARM_PRELOAD)
    runner.start()
    yield runner
    runner.close()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` (pyproject.toml): one worker per core. The suite is CPU-bound (chromium, the apps, the servers):
    a third worker on two cores made it slower, since every worker first imports and collects the whole suite.
    PYTEST_XDIST_AUTO_NUM_WORKERS still decides when set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
