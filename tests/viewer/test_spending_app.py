"""The spending budget on the launched app's doors (live/budget.py): `/run` and `/arena_start` on the Space's keys
take bounded turns and tokens, a run the budget cannot cover is refused before it starts and leaves no rollout, a
random pair is held like any run, and a visitor's own key or a baseline is never charged."""

from __future__ import annotations

import pytest
from gradio_client import Client

from live.budget import BudgetLimits, SpendBudget, worst_case
from testkit.tasks import TASK_ID

MODEL = "hf:Qwen/Qwen3.8-27B:cerebras"


@pytest.fixture
def space_key(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_space_token")
    monkeypatch.setenv("HF_ROUTER_URL", "http://127.0.0.1:9/v1")  # never reached: every call here is refused


@pytest.fixture
def budget(arena):
    """The app's budget swapped for a fresh one a test sets; the app's own put back after."""
    before = arena.ctx.registry.budget

    def install(limits: BudgetLimits) -> SpendBudget:
        arena.ctx.registry.budget = SpendBudget(limits)
        return arena.ctx.registry.budget

    yield install
    arena.ctx.registry.budget = before


def refusal(client: Client, *args, api_name: str = "/run") -> str:
    with pytest.raises(Exception) as refused:  # gradio_client raises AppError with the handler's message
        client.predict(*args, api_name=api_name)
    return str(refused.value)


def test_run_on_the_spaces_key_takes_bounded_turns_and_tokens(arena, space_key):
    client = Client(arena.url, verbose=False)
    before = len(arena.ctx.store.rows())
    for turns, tokens in ((60, 24000), (12, 200000)):
        message = refusal(client, MODEL, TASK_ID, turns, tokens, "embedded")
        assert "On the Space's keys a run takes at most 12 turns and 24,000 tokens a turn" in message
        assert "paste your own API key" in message
    assert len(arena.ctx.store.rows()) == before


def test_a_spent_budget_refuses_the_run_and_the_random_pair_but_not_a_baseline(arena, space_key, budget):
    tokens, _ = worst_case(MODEL, 2, 1000)
    spending = budget(BudgetLimits(space_tokens_per_day=tokens - 1))
    client = Client(arena.url, verbose=False)
    before = len(arena.ctx.store.rows())
    message = refusal(client, MODEL, TASK_ID, 2, 1000, "embedded")
    assert "The Space's budget for today cannot cover this run" in message and "until 00:00 UTC" in message
    # A match on the Space's keys is held whole: its pair does not fit, so neither side starts.
    message = refusal(client, MODEL, "baseline:greedy", TASK_ID, False, api_name="/arena_start")
    assert "The Space's budget for today cannot cover this run" in message
    assert len(arena.ctx.store.rows()) == before
    assert spending.left("127.0.0.1").space_tokens == tokens - 1  # nothing held by the refusals
    # A baseline spends nothing of it.
    outcome = client.predict("baseline:greedy", TASK_ID, 12, 24000, "embedded", api_name="/run")
    assert outcome["end_reason"] == "submitted" and outcome["saved"] is True


def test_a_random_pair_holds_the_pools_dearest_pair_so_the_budget_names_no_model(arena, space_key, budget):
    from viewer.arena.match import random_pool

    held: list = []

    class Recording(SpendBudget):
        def reserve(self, visitor, episodes, *, hold_as=None):
            held.append(([model.text for model, _ in episodes], hold_as))  # the requests' parsed specs
            return super().reserve(visitor, episodes, hold_as=hold_as)

    arena.ctx.registry.budget = recording = Recording(BudgetLimits())  # the fixture puts the app's own back
    client = Client(arena.url, verbose=False)
    started = client.predict("", "", TASK_ID, True, api_name="/arena_start")
    client.predict(started["match_id"], started["stop_token"], api_name="/arena_stop")
    assert arena.ctx.matches.get(started["match_id"]).concluded.wait(30)  # both sides over: the visitor's caps free
    (drawn, hold_as), = held
    pool = random_pool()
    assert len(pool) > 4 and set(drawn) <= set(pool)  # the hf: suggestions join the baselines with HF_TOKEN set
    assert hold_as == recording.dearest(pool) and all(model.startswith("hf:") for model in hold_as)
    # A named match holds its own models.
    client.predict("baseline:greedy", "baseline:hasty", TASK_ID, False, api_name="/arena_start")
    assert held[-1] == (["baseline:greedy", "baseline:hasty"], None)


def test_a_signed_in_visitors_hf_run_is_on_their_own_token_and_shows_no_budget_note(arena, space_key):
    """Both forms' notes read the keys as their starts do (viewer.models.typed_keys): a Hugging Face sign-in is the
    visitor's own key for `hf:`, so no note claims the run spends the Space's budget."""
    import gradio as gr

    from viewer.arena import section as arena_section
    from viewer.run import section as run_section

    signed_in = gr.OAuthToken(token="hf_visitors_own", scope="inference-api", expires_at=None)
    for form, args in ((run_section, (MODEL, 4, 2000)), (arena_section, (MODEL, "baseline:greedy", False))):
        note = gr.Markdown()
        section = type("Section", (), {"ctx": arena.ctx, "budget_note": note})()
        anonymous = form.show_budget(section, *args, None)[note]
        assert anonymous.visible is True and "Space's keys" in anonymous.value, form
        own = form.show_budget(section, *args, None, oauth_token=signed_in)[note]
        assert own.visible is False, form
