"""The spending budget shown before a run, in Debian's chromium: the Run form and the Arena say what a run on the
Space's keys may spend and what is left today, say nothing for a visitor's own key, and a spent budget refuses the
run with the reason beside the button."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from live.budget import BudgetLimits, SpendBudget, worst_case
from tests.browser.conftest import ARTIFACTS, PHONE
from tests.browser.run_page import open_form, pick

pytestmark = pytest.mark.browser

MODEL = "hf:Qwen/Qwen3.8-27B:cerebras"


@pytest.fixture
def space_key(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_space_token")
    monkeypatch.setenv("HF_ROUTER_URL", "http://127.0.0.1:9/v1")  # never reached: the run here is refused


def test_the_run_form_and_the_arena_say_what_a_run_may_spend_before_it_starts(arena, new_page, space_key):
    """One page boot for both forms (a boot is most of a browser test's cost): the Run form, then the Arena tab."""
    note = arena.ctx.registry.budget.notice("x", [(MODEL, {"max_turns": 4, "max_tokens": 2000, "keys": {}})])
    assert note and "$100.00 left today" in note
    page = new_page()
    open_form(page, arena.url)
    budget_note = page.locator("#budget-note")
    expect(budget_note).to_be_hidden()  # a baseline spends nothing
    pick(page, "model", MODEL)
    page.locator("#settings").click()
    page.locator("#max-turns input").fill("4")
    page.locator("#max-tokens input").fill("2000")
    page.locator("#max-tokens input").press("Tab")
    expect(budget_note).to_contain_text(note.split(" (")[0])
    expect(budget_note).to_contain_text("$100.00 left today")
    page.screenshot(path=str(ARTIFACTS / "run-budget-desktop.png"))
    page.locator("#max-tokens input").fill("200000")
    page.locator("#max-tokens input").press("Tab")
    expect(budget_note).to_contain_text("at most 12 turns and 24,000 tokens a turn")
    # The visitor's own key: theirs to spend, so nothing of the Space's.
    page.locator("#keys").click()
    page.locator("#key-hf input").fill("hf_visitors_own")
    page.locator("#key-hf input").press("Tab")
    expect(budget_note).to_be_hidden()

    # The Arena: two baselines spend nothing; a random pair may play on the Space's keys.
    page.get_by_role("tab", name="Arena").click()
    expect(page.locator("#arena-run")).to_be_visible(timeout=30000)
    expect(page.locator("#arena-budget-note")).to_be_hidden()
    page.locator("#arena-random input").check()
    expect(page.locator("#arena-budget-note")).to_contain_text("This match plays on the Space's keys")
    expect(page.locator("#arena-budget-note")).to_contain_text("left today")


def test_a_spent_budget_refuses_the_run_saying_why(arena, new_page, space_key):
    before, rows = arena.ctx.registry.budget, len(arena.ctx.store.rows())
    tokens, _ = worst_case(MODEL, 12, 24000)
    arena.ctx.registry.budget = SpendBudget(BudgetLimits(space_tokens_per_day=tokens - 1))
    try:
        page = new_page(PHONE)
        open_form(page, arena.url)
        pick(page, "model", MODEL)
        expect(page.locator("#budget-note")).to_contain_text("left today")
        page.locator("#run").click()
        expect(page.locator("#status")).to_contain_text("The Space's budget for today cannot cover this run",
                                                        timeout=30000)
        expect(page.locator("#status")).to_contain_text("Paste your own API key")
        page.screenshot(path=str(ARTIFACTS / "run-budget-spent-phone.png"))
    finally:
        arena.ctx.registry.budget = before
    assert len(arena.ctx.store.rows()) == rows
