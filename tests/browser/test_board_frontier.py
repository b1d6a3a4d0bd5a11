"""Browse's leaderboard in Debian's chromium: the cost x reward frontier (a hover names a model and its figures,
the same numbers as the board) and a model's reproducibility card, at 1440x900 and on a 390 px phone."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS, DESKTOP, PHONE

pytestmark = pytest.mark.browser
CARD_MODEL = "openai:gpt-5.5@medium"


def test_the_frontier_names_a_point_on_hover_and_fits_a_phone(browse, new_page):
    app, _, _, _ = browse
    board = {item["model"]: item for item in httpx.get(f"{app.url}board.json", timeout=60).json()}
    for size in (DESKTOP, PHONE):
        page = new_page(size)
        page.goto(f"{app.url}?tab=browse&view=board")
        plot = page.locator("#frontier .js-plotly-plot")
        expect(plot).to_be_visible(timeout=45000)
        plot.scroll_into_view_if_needed()
        box = plot.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= size["width"] + 1, box
        expect(page.locator("#frontier")).to_contain_text("$0")
        expect(page.locator("#frontier-note")).to_contain_text("hover or tap a point")
        # a priced model on the frontier: hovering its point names it with the board's mean reward
        traces = page.locator("#frontier .scatterlayer .trace")
        names = page.evaluate("""() => document.querySelector('#frontier .js-plotly-plot').data
                                 .map(t => t.customdata || [])""")
        index = next(i for i, models in enumerate(names) if models and not models[0].startswith(("baseline", "human")))
        point = traces.nth(index).locator(".point").first
        model = names[index][0]
        spot = point.bounding_box()
        page.mouse.move(spot["x"] + spot["width"] / 2, spot["y"] + spot["height"] / 2)
        label = page.locator("#frontier .hoverlayer .hovertext")
        expect(label).to_contain_text(model)
        expect(label).to_contain_text(f"mean reward {board[model]['mean_reward']:.3f}")
        name = "desktop" if size == DESKTOP else "phone"
        page.screenshot(path=str(ARTIFACTS / f"board-frontier-{name}.png"))


def test_a_models_card_opens_under_the_board(browse, new_page):
    app, _, _, _ = browse
    page = new_page(PHONE)
    page.goto(f"{app.url}?tab=browse&view=board")
    expect(page.locator("#board")).to_contain_text(CARD_MODEL, timeout=45000)
    page.locator("#card-pick input").click()
    page.get_by_role("option", name=CARD_MODEL, exact=True).click()
    card = page.locator("#model-card")
    expect(card).to_contain_text("not verified")
    for words in ("harness", "env server", "turn limit", "fallbacks taken", "record(s) not public"):
        expect(card).to_contain_text(words)
    box = card.bounding_box()
    assert box is not None and box["x"] + box["width"] <= PHONE["width"] + 1
    page.screenshot(path=str(ARTIFACTS / "board-card-phone.png"))
    # the board marks it too: every model of this small folder is provisional
    expect(page.locator("#board")).to_contain_text("provisional")
