"""`asyncio.run` for tests that may share a process with Playwright's sync API.

Once a browser test has run in a pytest worker, Playwright's event loop counts as running in the main thread for
the rest of the session, and `asyncio.run` there refuses to start. A thread of its own has no running loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` to its end on a fresh event loop in a thread of its own; return its result."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="asyncio-run") as pool:
        return pool.submit(asyncio.run, coroutine).result()
