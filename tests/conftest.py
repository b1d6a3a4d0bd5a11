"""Shared pytest fixtures. Keep this file small and generic: feature-specific fixtures live with their tests."""

from __future__ import annotations

import pytest

# The launched app (`arena`) for the app and browser tests.
pytest_plugins = ["tests.app_fixtures"]


@pytest.fixture(scope="session")
def env_url() -> str:
    """Base URL of the berth server embedded in this test process (started once, on first use)."""
    from berth_env.embedded import embedded_url

    return embedded_url()
