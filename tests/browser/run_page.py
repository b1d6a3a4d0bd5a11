"""What the Run tab's browser tests share: opening the form, picking, running, reading the page."""

from __future__ import annotations

import re

from playwright.sync_api import Error as PlaywrightError
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


# A berth chart fits its box (viewer/rollout_panel.FIT_CHARTS): the whole picture, its last day label included,
# inside the box's edges; else what sticks out.
CHART_FITS = """(sel) => {
  const box = document.querySelector(sel), svg = box && box.querySelector('.main-svg');
  if (!svg) return `no chart in ${sel}`;
  const b = box.getBoundingClientRect(), s = svg.getBoundingClientRect();
  const days = [...box.querySelectorAll('.xaxislayer-above text')].map((t) => t.getBoundingClientRect().right);
  const last = Math.max(...days);
  const fits = days.length > 0 && s.left >= b.left - 1 && s.right <= b.right + 1 && last <= b.right + 1
    && s.bottom <= b.bottom + 1;
  return fits ? 'fits' : `chart x ${s.left}-${s.right} (last day label ends at ${last}), bottom ${s.bottom}; ` +
    `box x ${b.left}-${b.right}, bottom ${b.bottom}`; }"""


def assert_chart_fits(page: Page, chart: str) -> None:
    """The chart `chart` (a selector) shows whole in its box, the week's end in view (it is fitted when drawn)."""
    try:
        page.wait_for_function(f"(sel) => ({CHART_FITS})(sel) === 'fits'", arg=chart, timeout=10000)
    except PlaywrightError:
        raise AssertionError(f"{chart}: {page.evaluate(CHART_FITS, chart)}") from None
