"""A step's address in Debian's chromium (issue 30.1): `/r/<id>/step/2` of a real baseline rollout on a laptop
and on a phone (draft 2 on the chart, its turn marked and scrolled to, no JavaScript), and Browse opened at
`?rollout=<id>&step=2` with draft 2 on its slider and the step's share address to copy. (Over plain HTTP:
tests/viewer/test_share_steps.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from testkit.app import launched_app
from testkit.episodes import play
from tests.browser.conftest import DESKTOP, PHONE

pytestmark = pytest.mark.browser
SCREENS = Path(__file__).resolve().parents[2] / "docs" / "screens"
TASK = "dock-24B-w06x1-busy-0"


@pytest.fixture(scope="module")
def stepped(tmp_path_factory, env_url):
    _, record = play("baseline:hasty", env_url, task_id=TASK)
    _, rival = play("baseline:greedy", env_url, task_id=TASK)
    with launched_app(tmp_path_factory.mktemp("steps"), records=[record, rival]) as app:
        app.rival = rival
        yield app, record


@pytest.mark.parametrize("size,name", [(DESKTOP, "desktop"), (PHONE, "phone")])
def test_a_step_link_opens_the_share_page_at_that_draft(stepped, new_page, size, name):
    app, record = stepped
    episode, turn = record["episode_id"], record["steps"][1]["turn"]
    page = new_page(size)
    page.goto(f"{app.url}r/{episode}/step/2")
    expect(page.locator("figure.chart svg")).to_contain_text("Draft 2 of 3")
    expect(page.locator(".step")).to_contain_text("Draft 2 of 3")
    marked = page.locator(f"section.turn.current#turn-{turn}")
    expect(marked).to_have_count(1)
    assert page.evaluate("document.scripts.length") == 0
    assert page.evaluate("document.documentElement.scrollWidth") <= size["width"]
    page.screenshot(path=str(SCREENS / f"step-share-{name}.png"))
    # The draft's own link (as copied from the list of drafts) lands on its turn in the transcript.
    page.locator(".drafts li.current a").click()
    expect(page).to_have_url(re.compile(rf"/r/{episode}/step/2#turn-{turn}$"))
    expect(marked).to_be_in_viewport()
    assert page.evaluate("getComputedStyle(document.querySelector('section.turn.current')).borderLeftColor") \
        == "rgb(245, 133, 24)"
    page.screenshot(path=str(SCREENS / f"step-turn-{name}.png"))


def test_browse_opens_a_rollout_at_its_step(stepped, new_page):
    app, record = stepped
    episode = record["episode_id"]
    page = new_page()
    page.goto(f"{app.url}?tab=browse&rollout={episode}&step=2")
    expect(page.locator("#rollout-detail")).to_be_visible(timeout=30000)
    expect(page.locator("#browse-plan-step input[type=number]")).to_have_value("2")
    expect(page.locator("#browse-chart")).to_contain_text("Draft 2 of 3")
    expect(page.locator("#share-link input, #share-link textarea")).to_have_value(
        re.compile(rf"/r/{episode}/step/2$"))
    grade = page.locator("#browse-grade")  # issue 30.2: the final plan's gap under the grade in Browse too
    expect(grade).to_contain_text("The final plan's gap, ship by ship")
    expect(grade.locator("table")).to_contain_text("share")
    page.screenshot(path=str(SCREENS / "step-browse-desktop.png"))
    # The slider moved: the URL and the share address follow it.
    box = page.locator("#browse-plan-step input[type=number]")
    box.fill("1")
    box.press("Enter")
    page.locator("#browse-plan-step input[type=range]").dispatch_event("pointerup")
    expect(page).to_have_url(re.compile(rf"rollout={episode}&step=1$"))
    expect(page.locator("#share-link input, #share-link textarea")).to_have_value(re.compile(r"/step/1$"))


@pytest.mark.parametrize("size,name", [(DESKTOP, "desktop"), (PHONE, "phone")])
def test_compare_lines_two_rollouts_up_by_draft_at_its_own_address(stepped, new_page, size, name):
    """Issue 30.3: `?compare=<a>,<b>&step=<k>`: draft k beside draft k, one slider for both, the gaps side by side;
    the share page links to the compare with the best other rollout of the task."""
    app, record = stepped
    a, b = record["episode_id"], app.rival["episode_id"]
    page = new_page(size)
    page.goto(f"{app.url}r/{a}")
    page.get_by_role("link", name="Compare with the best rollout of this task").click()
    expect(page).to_have_url(re.compile(rf"\?tab=browse&compare={a}(%2C|,){b}$"))
    expect(page.locator("#compare-b-chart .js-plotly-plot")).to_be_visible(timeout=30000)
    page.goto(f"{app.url}?tab=browse&compare={a},{b}&step=2")
    expect(page.locator("#compare-a-chart")).to_contain_text("draft 2 of 3", timeout=30000)
    expect(page.locator("#compare-b-chart")).to_contain_text("draft 2 of 2")
    head = page.locator("#compare-head")
    expect(head).to_contain_text("Draft 2")
    expect(head).to_contain_text("The final plans' gaps, ship by ship")
    expect(page.locator("#compare-step input[type=number]")).to_have_value("2")
    page.screenshot(path=str(SCREENS / f"compare-step-{name}.png"), full_page=name == "desktop")
    box = page.locator("#compare-step input[type=number]")
    box.fill("1")
    box.press("Enter")
    page.locator("#compare-step input[type=range]").dispatch_event("pointerup")
    expect(page).to_have_url(re.compile(rf"compare={a}%2C{b}&step=1$"))
    expect(page.locator("#compare-a-chart")).to_contain_text("draft 1 of 3")
    expect(page.locator("#compare-b-chart")).to_contain_text("draft 1 of 2")
