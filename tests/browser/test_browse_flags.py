"""Flags on a step in Browse, in chromium: the open rollout lists its flags at their step with the note as plain
text, moving the draft slider points the form at that draft, an anonymous visitor's Flag is refused asking to sign
in, and the "Flagged" filter lists the flagged rollouts only; at 1440x900 and on a phone (test-artifacts/)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from rollouts.annotations import FlagBook, new_flag
from tests.browser.conftest import ARTIFACTS, DESKTOP, PHONE

NOTE = 'Moved the priority ship off its section <img src=x onerror="window.__xss = 1">'


@pytest.fixture(scope="module")
def flagged(browse) -> Iterator[tuple]:
    app, shared, _, _ = browse
    book = FlagBook(app.ctx.store.root, app.ctx.store.writer_id)
    rows = [book.add(new_flag(shared["episode_id"], "draft", 2, "misread_rule", NOTE, "harbour-analyst")),
            book.add(new_flag(shared["episode_id"], "turn", 3, "good_recovery", "", "ana"))]
    app.ctx.archive.refresh_local(force=True)
    yield app, shared, rows
    # The app is the worker's (tests/browser/conftest.py): the other files see this rollout as they always have.
    for row in rows:
        book.hide(row["flag_id"])
    app.ctx.archive.refresh_local(force=True)


@pytest.mark.parametrize("size, name", [(DESKTOP, "desktop"), (PHONE, "phone")])
def test_the_open_rollout_shows_its_flags_and_refuses_an_anonymous_flag(flagged, new_page, size, name):
    app, shared, rows = flagged
    page = new_page(size)
    page.goto(f"{app.url}?tab=browse&rollout={shared['episode_id']}")
    flags = page.locator("#rollout-flags")
    expect(flags).to_contain_text("2 on this rollout's steps")
    expect(flags).to_contain_text("draft 2")
    expect(flags).to_contain_text("turn 3")
    expect(flags).to_contain_text("misread a rule")
    expect(flags).to_contain_text('<img src=x onerror="window.__xss = 1">')  # the note as text
    assert page.evaluate("window.__xss") is None and flags.locator("img").count() == 0
    page.locator("#flag-open").click()
    expect(page.locator("#flag-step input")).to_have_value(str(len(shared["steps"])))  # the last draft, shown
    expect(page.locator("#flag-result")).to_contain_text("Sign in with Hugging Face")
    page.locator("#flag-label input").click()
    page.get_by_role("option").filter(has_text="ignored a violation").click()
    page.locator("#flag-note textarea").fill("it checked and ignored the answer")
    page.locator("#flag-button").click()
    expect(page.locator("#flag-result")).to_contain_text("⚠️ Sign in with Hugging Face to flag a step")
    assert len(app.ctx.flags.book.rows()) == len(rows)  # nothing written
    flags.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    page.screenshot(path=str(ARTIFACTS / f"browse-flags-{name}.png"))


def test_the_slider_points_the_form_at_its_draft_and_the_filter_lists_flagged_rollouts(flagged, new_page):
    app, shared, _ = flagged
    page = new_page(DESKTOP)
    page.goto(f"{app.url}?tab=browse&rollout={shared['episode_id']}")
    expect(page.locator("#rollout-flags")).to_contain_text("misread a rule")
    slider = page.locator("#browse-plan-step input[type=range]")
    slider.focus()
    for _ in range(len(shared["steps"]) - 2):  # from the last draft down to draft 2
        slider.press("ArrowLeft")
    slider.dispatch_event("pointerup")
    expect(page.locator("#rollout-flags")).to_contain_text("◀ on the chart")
    page.locator("#flag-open").click()
    expect(page.locator("#flag-step input")).to_have_value("2")
    page.goto(f"{app.url}?tab=browse&flagged=misread_rule")
    expect(page.locator("#page-info")).to_contain_text("1–1 of 1")
    expect(page.locator("#rollouts")).to_contain_text(shared["task_id"])
    expect(page.locator("#f-flagged")).to_contain_text("misread a rule")
