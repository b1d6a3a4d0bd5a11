"""Debian's chromium (apt), driven by Playwright with `executable_path`: no browser is ever downloaded."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Without the background-networking flags chromium keeps trying to reach Google's hosts from a closed network.
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--no-first-run",
                 "--disable-sync", "--disable-quic"]


class ChromiumMissing(RuntimeError):
    """Debian's chromium is not installed."""


def launch_chromium(playwright: Any) -> Any:
    """A headless chromium Browser from a started `sync_playwright()`."""
    if not Path(CHROMIUM).exists():
        raise ChromiumMissing("Debian's chromium is needed: apt-get install chromium")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
