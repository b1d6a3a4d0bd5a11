"""What the Run tab's browser tests share: opening the form, picking, running, reading the page."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

RED = "rgb(214, 39, 40)"  # the chart's violation outline (#D62728) as the browser reports it


def open_form(page: Page, url: str) -> None:
    """Load the page and wait until the form holds its defaults (the page has booted)."""
    page.goto(url)
    expect(page.locator("#task input")).not_to_have_value("", timeout=30000)


def pick(page: Page, field: str, value: str) -> None:
    """Type `value` into the dropdown `#field` and take it with Enter (a custom value or the first match)."""
    box = page.locator(f"#{field} input")
    box.fill(value)
    box.press("Enter")


def episode_of(page: Page) -> str:
    return re.search(r"Episode\s+([0-9a-f]{12})", page.locator("#episode-info").inner_text()).group(1)


def in_first_viewport(page: Page, selector: str) -> bool:
    box = page.locator(selector).bounding_box()
    size = page.viewport_size
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= size["height"] and \
        box["x"] + box["width"] <= size["width"] + 1


# Ship rectangles outlined red in a plotly chart's SVG (shapes carry their stroke in their style).
COUNT_RED = """([sel, red]) => [...document.querySelectorAll(sel + ' .shapelayer path')]
    .filter(p => (p.style.stroke || '').replace(/\\s/g, '') === red.replace(/\\s/g, '')).length"""


def red_ships(page: Page, chart: str) -> int:
    return page.evaluate(COUNT_RED, [chart, RED])


def wait_until_no_red_ships(page: Page, chart: str, timeout: float) -> None:
    page.wait_for_function(f"(args) => ({COUNT_RED})(args) === 0", arg=[chart, RED], timeout=timeout)
