"""Browser fixtures: Debian's chromium (testkit/browser.py), one browser per test process, a fresh context a test."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from testkit.browser import ChromiumMissing, launch_chromium

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
TIMEOUT_MS = 20_000
# Assertions wait as long as actions do: with the tests running in parallel on two cores, a page may take more
# than Playwright's default 5 s to show what it will show.
expect.set_options(timeout=TIMEOUT_MS)


@pytest.fixture(scope="session")
def chromium_browser():
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        try:
            browser = launch_chromium(playwright)
        except ChromiumMissing as exc:
            pytest.fail(f"the browser tests need it: {exc}")
        yield browser
        browser.close()


@pytest.fixture
def browser_context_factory(chromium_browser):
    """Fresh browser contexts (separate storage, like a new visitor), closed after the test."""
    contexts = []

    def make():
        context = chromium_browser.new_context(viewport={"width": 1400, "height": 1000})
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        return context

    yield make
    for context in contexts:
        context.close()


@pytest.fixture
def chromium_page(browser_context_factory):
    return browser_context_factory().new_page()
