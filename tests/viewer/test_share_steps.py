"""A step's address (issue 30.1): `/r/<id>/step/<k>` and `/r/<id>/turn/<n>` of a real baseline rollout (played on
the embedded berth server, stored, served by the launched app) read with plain HTTP as a link crawler reads them:
the page opened at that draft, its own tags and image; a step the rollout does not have gets the one 404. (In
chromium: tests/browser/test_share_steps_browser.py.)"""

from __future__ import annotations

import io
import re

import httpx
import pytest

from testkit.app import launched_app
from testkit.episodes import play
from tests.viewer.test_share_pages import Page

Image = pytest.importorskip("PIL.Image")

TASK = "dock-24B-w06x1-busy-0"


@pytest.fixture(scope="module")
def world(tmp_path_factory, env_url):
    _, record = play("baseline:hasty", env_url, task_id=TASK)
    assert [s["tool"] for s in record["steps"]] == ["check_plan", "check_plan", "submit_plan"]
    with launched_app(tmp_path_factory.mktemp("steps"), records=[record]) as app:
        yield app, record


def get(app, path: str) -> httpx.Response:
    return httpx.get(f"{app.url}{path.lstrip('/')}", headers={"User-Agent": "Slackbot-LinkExpanding 1.0"}, timeout=60)


def test_a_step_page_is_that_draft_with_its_own_tags_and_image(world):
    app, record = world
    episode = record["episode_id"]
    second = record["steps"][1]
    response = get(app, f"/r/{episode}/step/2")
    assert response.status_code == 200, response.text[:300]
    page = Page(response.text)
    assert page.meta["og:title"].endswith("draft 2 of 3")
    assert page.meta["og:description"].startswith(f"turn {second['turn']}, check 2 of ")
    assert f"cost {second['result']['cost']:,}" in page.meta["og:description"]
    assert page.meta["og:url"].endswith(f"/r/{episode}/step/2")
    assert page.meta["og:image"].endswith(f"/r/{episode}/step/2.png")
    assert "Draft 2 of 3 (checked" in page.text  # the chart is that draft's
    assert f'id="turn-{second["turn"]}"' in response.text
    assert re.search(rf'<section class="turn current" id="turn-{second["turn"]}">', response.text)
    assert "<script" not in response.text
    # every draft links to its own page, and the app opens Browse at this draft
    for k, step in enumerate(record["steps"], 1):
        assert page.links[f"Draft {k}"].endswith(f"/r/{episode}/step/{k}#turn-{step['turn']}")
    assert page.links["Open in the arena"].endswith(f"rollout={episode}&step=2")

    image = get(app, f"/r/{episode}/step/2.png")
    assert image.status_code == 200 and image.headers["content-type"] == "image/png"
    assert Image.open(io.BytesIO(image.content)).size == (1200, 630)
    final = get(app, f"/r/{episode}.png")
    assert final.content != image.content  # the draft's picture, not the final plan's


def test_a_turn_page_shows_the_draft_sent_by_then(world):
    app, record = world
    episode = record["episode_id"]
    turn = record["steps"][1]["turn"]
    page = Page(get(app, f"/r/{episode}/turn/{turn}").text)
    assert page.meta["og:title"].endswith(f"turn {turn}")
    assert "Draft 2 of 3" in page.text
    before = Page(get(app, f"/r/{episode}/turn/1").text)  # a turn before any draft: the published plan
    assert "no plan sent yet" in before.meta["og:description"]


def test_steps_it_does_not_have_get_the_one_404(world):
    app, record = world
    episode = record["episode_id"]
    unknown = get(app, "/r/nosuchrollout0")
    assert unknown.status_code == 404
    for path in (f"/r/{episode}/step/4", f"/r/{episode}/step/99999", f"/r/{episode}/turn/50",
                 f"/r/{episode}/step/0", f"/r/{episode}/step/-1", f"/r/{episode}/step/2.json",
                 f"/r/{episode}/step/x", f"/r/{episode}/step/4.png", "/r/nosuchrollout0/step/1",
                 f"/r/{episode}/steps/1"):
        answer = get(app, path)
        assert (answer.status_code, answer.content) == (404, unknown.content), path


def test_the_share_page_splits_the_gap_ship_by_ship_and_outlines_the_top_ships(world):
    """Issue 30.2: the final plan's gap under the grade, its ships the split's, the top ones outlined."""
    from berth_env.gap import split_gap
    from catalog.tasks import task_for

    app, record = world
    split = split_gap(task_for(TASK), record["final"]["plan"])
    assert split.feasible and split.gap > 0
    response = get(app, f"/r/{record['episode_id']}")
    grade = response.text.split('<section class="grade">', 1)[1].split("</section>", 1)[0]
    assert "The final plan&#x27;s gap, ship by ship" in grade or "The final plan's gap, ship by ship" in grade
    top = split.ships[0]
    assert f"{top.ship} {top.name}" in grade and f"{top.difference:+d}" in grade
    chart = response.text.split('<figure class="chart">', 1)[1].split("</figure>", 1)[0]
    assert "most of the gap" in chart


def test_an_infeasible_final_plan_shows_its_ships_and_their_rules():
    from catalog.tasks import task_for
    from testkit.records import make_record
    from viewer.share.page import PageLinks, rollout_page

    record = make_record(seed=1, task_id=TASK, episode_id="infeasible01")
    page = rollout_page(record, {}, task_for(TASK), PageLinks(page="http://a/r/infeasible01", image="i", arena="a",
                                                              home="h"))
    grade = page.split('<section class="grade">', 1)[1].split("</section>", 1)[0]
    assert "Not feasible: 2 ships break a rule" in grade and "<th>breaks</th>" in grade
    assert "breaks a rule" in page.split('<figure class="chart">', 1)[1].split("</figure>", 1)[0]
