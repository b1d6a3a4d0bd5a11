"""The launched app as a fixture (a pytest plugin: tests/conftest.py loads it).

- `arena` (one per test module): testkit.app.launched_app on a temporary folder, with the default settings (no
  Hub dataset, no upstream source, the embedded berth server). Attributes: `url` (ends with "/"), `ctx`
  (AppContext), `root` (the rollout folder), `demo`.
- Tests that need their own settings (a Hub dataset on testkit/fakehub.py) or rollouts saved before the app
  starts use `testkit.app.launched_app` directly.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testkit.app import LaunchedApp, launched_app


@pytest.fixture(scope="module")
def arena(tmp_path_factory) -> Iterator[LaunchedApp]:
    with launched_app(tmp_path_factory.mktemp("arena")) as launched:
        yield launched
