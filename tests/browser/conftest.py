"""Browser fixtures: Debian's chromium (testkit/browser.py), one browser and one browser context per test process,
fresh pages in it for each test, and one launched app of each kind per test process (`arena`, `browse`).

Pages share the context's HTTP and code caches, as a visitor's tabs do: a page boot then costs a third less CPU
than in an empty context, and the suite is CPU-bound. Nothing of a visitor lives in the context: Gradio gives every
page load a session of its own, and the app keeps no cookies or storage (test_run_baseline.py checks the storage).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from testkit.app import LaunchedApp, launched_app
from testkit.browser import ChromiumMissing, launch_chromium
from tests.browser.browse_page import browse_app

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
TIMEOUT_MS = 20_000
# Assertions wait as long as actions do: with the tests running in parallel on two cores, a page may take more
# than Playwright's default 5 s to show what it will show.
expect.set_options(timeout=TIMEOUT_MS)
DESKTOP, PHONE = {"width": 1440, "height": 900}, {"width": 390, "height": 844}


@pytest.fixture(scope="session")
def browser_context():
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        try:
            browser = launch_chromium(playwright)
        except ChromiumMissing as exc:
            pytest.fail(f"the browser tests need it: {exc}")
        context = browser.new_context(viewport=DESKTOP)
        context.set_default_timeout(TIMEOUT_MS)
        yield context
        context.close()
        browser.close()


# One app per test process, not per module: with `--dist loadfile` a worker runs whole files, and the browser files
# it gets share the app it built first. A build and its first page boot cost a core-second or two each, and a page
# boot of the app is the unit of this suite's cost. The tests leave nothing behind that another counts on: each
# counts rows from its own start, ends its own episodes and matches, and puts back what it patched.
@pytest.fixture(scope="session")
def arena(tmp_path_factory) -> Iterator[LaunchedApp]:
    """The app with the default settings (tests/app_fixtures.py's `arena`), one per test process for the browser
    tests."""
    with launched_app(tmp_path_factory.mktemp("arena")) as launched:
        yield launched


@pytest.fixture(scope="session")
def browse(tmp_path_factory):
    """The Browse tests' app over a known set of rollouts: (app, shared, rival, hostile), one per test process."""
    with browse_app(tmp_path_factory.mktemp("browse")) as app_and_records:
        yield app_and_records


@pytest.fixture
def new_page(browser_context) -> Iterator[Callable[..., Page]]:
    """`new_page(size=DESKTOP)`: a fresh page (a new Gradio session, like a visitor's new tab), closed after the
    test."""
    pages: list[Page] = []

    def make(size: dict = DESKTOP) -> Page:
        page = browser_context.new_page()
        page.set_viewport_size(size)
        pages.append(page)
        return page

    yield make
    for page in pages:
        page.close()
