"""What the Browse tab's browser tests share: the app over a known set of rollouts, and ways to read its tables."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Page

from testkit.app import LaunchedApp, launched_app
from testkit.records import make_record, make_records

TASK = "dock-24B-w06x1-busy-0"
XSS_MODEL = 'vllm:<img src=x onerror="window.__xss = 1">'
ORANGE = "rgb(245, 133, 24)"  # a highlighted ship (#F58518) as the browser reports it
# A Markdown block's own text: Gradio keeps a hidden progress timer ("0.2s") in the block while an event that
# writes to it runs, and inner_text of the block would include it.
PAGE_INFO = "#page-info [data-testid=markdown-wrapper]"
ROLLOUT_HEAD = "#rollout-head [data-testid=markdown-wrapper]"


def shown_record() -> dict:
    """A submitted rollout with reasoning and several plans, so every part of the viewer has something to show."""
    for seed in range(200):
        record = make_record(seed=seed, task_id=TASK, model="anthropic:claude-sonnet-5-5@high",
                             end_reason="submitted", episode_id=f"share{seed:04d}", started="2026-11-29T10:00:00Z")
        reasoning = [m for m in record["messages"] if m.get("reasoning")]
        if len(record["steps"]) >= 3 and reasoning and record["final"]["grade"]["feasible"]:
            return record
    raise AssertionError("no suitable record")


@contextmanager
def browse_app(folder: Path) -> Iterator[tuple[LaunchedApp, dict, dict, dict]]:
    """The app over 63 rollouts: the one a link shares, a rival on its task, one whose model name is HTML, and 60
    others. Yields (app, shared, rival, hostile)."""
    shared = shown_record()
    rival = make_record(seed=7, task_id=TASK, model="openai:gpt-5.5@medium", end_reason="submitted",
                        episode_id="rival0001", started="2026-11-28T09:00:00Z")
    rival["messages"].append({"role": "assistant", "content": "The quayside gantry forces ship 4 later.",
                              "reasoning": "", "stop": "end_turn", "tool_calls": []})
    hostile = make_record(seed=8, model=XSS_MODEL, episode_id="hostile01", started="2026-11-27T09:00:00Z")
    others = make_records(60, seed=12)
    with launched_app(folder, records=[shared, rival, hostile, *others]) as app:
        yield app, shared, rival, hostile


def cell(page: Page, table: str, row: int, column: int):
    """One cell of a gr.Dataframe (a virtual table: rows and cells are ARIA roles, not <tr>/<td>)."""
    return page.locator(f"{table} [role=row].virtual-row").nth(row).locator("[role=gridcell]").nth(column)


def rows_of(page: Page, table: str):
    return page.locator(f"{table} [role=row].virtual-row")


def in_first_viewport(page: Page, selector: str) -> bool:
    box = page.locator(selector).first.bounding_box()
    return box is not None and 0 <= box["y"] < page.viewport_size["height"]
