"""Driving Play's plan editor (viewer/play/planner.js) in a real browser: where a ship is on screen, dragging it
with the mouse, nudging it with keys or buttons, and reading what the chart shows of the draft's problems."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect

from berth_env import check, parse_plan

EDITOR = "#play-planner"
WAIT = 20000

# The ship's box centre on screen, and the screen pixels of one hour and one section.
_GEOMETRY = """(ship) => {
  const svg = document.querySelector('#play-planner .pl-chart svg');
  const plot = svg.querySelector('rect.plot').getAttribute('data-plot').split(' ').map(Number);
  const [left, top, width, height, xlo, xhi, ylo, yhi] = plot;
  const scale = svg.getScreenCTM().a;
  const rect = svg.querySelector(`rect.ship[data-ship="${ship}"]`);
  const box = rect.getBoundingClientRect();
  // A point of the box no other ship covers (the published plan has ships overlapping).
  for (const fy of [0.5, 0.25, 0.75, 0.1, 0.9]) for (const fx of [0.5, 0.3, 0.7, 0.15, 0.85]) {
    const x = box.x + box.width * fx, y = box.y + box.height * fy;
    const hit = document.elementFromPoint(x, y);
    if (hit && hit.closest && hit.closest('rect[data-ship]') === rect)
      return {x, y, hour: width / (xhi - xlo) * scale, section: height / (yhi - ylo) * scale};
  }
  return null;
}"""
# What the chart shows: the ships outlined red (the checker's flagged ships) and the problems counted.
_SHOWN = """() => {
  const red = new Set();
  document.querySelectorAll('#play-planner rect[data-ship][stroke="#D62728"]').forEach(r => red.add(Number(r.getAttribute('data-ship'))));
  const status = document.querySelector('#play-planner .pl-status').textContent;
  const m = status.match(/(\\d+) rule problems/);
  return {red: Array.from(red).sort((a, b) => a - b), problems: m ? Number(m[1]) : 0, status};
}"""


def settled(page: Page) -> None:
    """The editor has drawn the server's answer for the last edit."""
    expect(page.locator(f"{EDITOR} .pl:not([data-pending])")).to_have_count(1, timeout=WAIT)
    expect(page.locator(f"{EDITOR} .pl-chart svg")).to_have_count(1, timeout=WAIT)


def geometry(page: Page, ship: int) -> dict:
    at = reachable(page, ship)
    assert at is not None, f"ship {ship} is covered by other ships everywhere"
    return at


def reachable(page: Page, ship: int) -> dict | None:
    """Where to press ship `ship` on screen, or None while other ships cover all of it."""
    page.locator(f'{EDITOR} rect.ship[data-ship="{ship}"]').scroll_into_view_if_needed()
    return page.evaluate(_GEOMETRY, ship)


def drag(page: Page, ship: int, hours: int, sections: int) -> None:
    """Drag ship `ship` by `hours` along the time axis and `sections` up the quay with the mouse."""
    at = geometry(page, ship)
    page.mouse.move(at["x"], at["y"])
    page.mouse.down()
    x, y = at["x"] + hours * at["hour"], at["y"] - sections * at["section"]
    page.mouse.move((at["x"] + x) / 2, (at["y"] + y) / 2, steps=3)
    page.mouse.move(x, y, steps=3)
    page.mouse.up()
    settled(page)


def editor_button(page: Page, act: str) -> Any:
    return page.locator(f'{EDITOR} button[data-act="{act}"]')


def nudge(page: Page, hours: int, sections: int, cranes: int, *, tap: bool = False) -> None:
    """Move the selected ship with the nudge buttons (6-hour steps, then single hours) and the crane buttons."""
    clicks = ([("h+6" if hours > 0 else "h-6")] * (abs(hours) // 6) + [("h+1" if hours > 0 else "h-1")] * (abs(hours) % 6)
              + [("s+1" if sections > 0 else "s-1")] * abs(sections) + [("cranes+" if cranes > 0 else "cranes-")] * abs(cranes))
    for act in clicks:
        button = editor_button(page, act)
        button.tap() if tap else button.click()
    settled(page)


def shown(page: Page) -> dict:
    return page.evaluate(_SHOWN)


def assert_overlay_agrees(page: Page, task: dict, plan: list[dict]) -> None:
    """The problems the chart shows for the draft are the checker's (the same `berth_env.check` check_plan runs):
    the same ships outlined red, the same number of problems."""
    result = check(task, parse_plan(task, plan).entries)
    flagged = sorted({v["ship"] for v in result.violations})
    on_chart = shown(page)
    assert on_chart["red"] == flagged, (on_chart, result.violations)
    assert on_chart["problems"] == len(result.violations), (on_chart["status"], result.violations)


def placed(plan: list[dict], ship: int) -> dict:
    return next(e for e in plan if e["ship"] == ship)
