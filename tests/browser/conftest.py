"""Browser fixtures: Debian's chromium (apt), driven by Playwright with `executable_path`; never a download."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Without the background-networking flags chromium keeps trying to reach Google's hosts from a closed network.
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--no-first-run",
                 "--disable-sync", "--disable-quic"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture(scope="session")
def chromium_browser():
    if not Path(CHROMIUM).exists():
        pytest.fail("the browser tests need Debian's chromium: apt-get install chromium")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def browser_context_factory(chromium_browser):
    """Fresh browser contexts (separate storage, like a new visitor), closed after the test."""
    contexts = []

    def make():
        context = chromium_browser.new_context(viewport={"width": 1400, "height": 1000})
        context.set_default_timeout(20000)
        contexts.append(context)
        return context

    yield make
    for context in contexts:
        context.close()


@pytest.fixture
def chromium_page(browser_context_factory):
    return browser_context_factory().new_page()
