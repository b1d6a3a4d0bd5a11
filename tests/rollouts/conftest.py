"""The rollouts tests' fake Hub and the stores that push to it (the pusher's tests, tests/rollouts/test_hub_push*.py);
a module with a `hub` of its own (another token, faults set up front) keeps it."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollouts.store import RolloutStore
from testkit.fakehub import running_fakehub

TOKEN = "hf_test_secret_0123456789"
REPO = "arena/rollouts"


@pytest.fixture
def hub():
    with running_fakehub(token=TOKEN) as hub:
        yield hub


@pytest.fixture
def open_store(hub):
    """Opens stores pushing to the fake Hub (fast retries; the timer as given, else an hour) and closes them after
    the test."""
    opened: list[RolloutStore] = []

    def open_(root: Path, **options) -> RolloutStore:
        settings = {"writer_id": "w", "dataset": REPO, "token": TOKEN, "endpoint": hub.url, "push_every_s": 3600,
                    "push_every_n": 1000, "retry_base_s": 0.05, "retry_max_s": 0.4, **options}
        opened.append(RolloutStore(root, **settings))
        return opened[-1]

    yield open_
    for store in opened:
        store.close()
