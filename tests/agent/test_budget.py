"""The Space's spending budget (live/budget.py): worst cases priced from the board's table, holds reserved all or
none and settled to the record's usage, a visitor's hour and the Space's UTC day on an injected clock; then the
real loop through the run registry, the real `openai` SDK against the local chat-completions peer."""

from __future__ import annotations

import json
import math
import threading
from datetime import UTC, datetime

import pytest
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price

from agent.request import EpisodeRequest
from live.budget import (
    PROMPT_TOKENS,
    RESULT_TOKENS,
    BudgetExceeded,
    BudgetLimits,
    SpendBudget,
    on_space_keys,
    worst_case,
)
from live.runs import CapacityError, RunRegistry
from rollouts.prices import episode_usd
from testkit.peers import ChatPeer, ToolCall, Turn, Usage
from testkit.tasks import TASK_ID, optimal_args
from viewer.context import budget_from_env

MODEL = "hf:Qwen/Qwen3.8-27B:cerebras"  # priced by the table (huggingface_cerebras)
NOON = datetime(2026, 12, 6, 12, 0, tzinfo=UTC).timestamp()


class Clock:
    def __init__(self, now: float = NOON) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def space_key(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_space_token")


def one(turns: int = 2, tokens: int = 1000, keys: dict | None = None) -> list[tuple[str, dict]]:
    return [(MODEL, {"max_turns": turns, "max_tokens": tokens, "keys": keys or {}})]


def test_the_worst_case_is_max_tokens_every_turn_on_a_growing_prompt_priced_by_the_board(space_key):
    tokens, usd = worst_case(MODEL, 3, 1000)
    inputs = 3 * PROMPT_TOKENS + (1 + 2) * (1000 + RESULT_TOKENS)
    assert tokens == inputs + 3000
    price = calc_price(PriceUsage(input_tokens=inputs, output_tokens=3000), "Qwen/Qwen3.8-27B",
                       provider_id="huggingface_cerebras").total_price
    assert usd == pytest.approx(float(price), rel=1e-9) and usd > 0
    # A route list may switch to any of its providers: the dearer one prices the hold.
    assert worst_case(MODEL + "|ovhcloud", 3, 1000)[1] == max(usd, worst_case(
        "hf:Qwen/Qwen3.8-27B:ovhcloud", 3, 1000)[1])


def test_only_runs_on_the_spaces_keys_are_charged(space_key):
    assert on_space_keys(MODEL, {}) and on_space_keys(MODEL, {"hf": "  ", "openai": "sk-own"})
    assert not on_space_keys(MODEL, {"hf": "hf_visitors_own"})
    assert not on_space_keys("baseline:greedy", {}) and not on_space_keys("not a spec", {})
    budget = SpendBudget(BudgetLimits(space_usd_per_day=0.000001), clock=Clock())
    # The visitor's own key is theirs to spend: no hold, however small the Space's budget.
    assert budget.reserve("v", one(keys={"hf": "hf_visitors_own"})) == [None]
    assert budget.reserve("v", [("baseline:greedy", {})]) == [None]
    with pytest.raises(BudgetExceeded, match="The Space's budget for today cannot cover this run"):
        budget.reserve("v", one())


def test_a_match_is_held_all_or_none_and_settles_to_what_it_used(space_key):
    clock = Clock()
    _, usd = worst_case(MODEL, 2, 1000)
    budget = SpendBudget(BudgetLimits(visitor_usd_per_hour=0, space_usd_per_day=usd * 3, space_tokens_per_day=0),
                         clock=clock)
    a, b = budget.reserve("v", one() * 2)
    assert a and b and budget.left("w").space_usd == pytest.approx(usd)
    with pytest.raises(BudgetExceeded, match="is left until 00:00 UTC"):
        budget.reserve("w", one() * 2)  # one side would fit, the pair does not: neither is held
    assert budget.left("w").space_usd == pytest.approx(usd)
    record = {"model": MODEL, "usage": {"input_tokens": 5000, "output_tokens": 300}, "turns": 2,
              "started": datetime.fromtimestamp(NOON, UTC).isoformat()}
    budget.settle(a, record)
    budget.settle(a, {"usage": {"input_tokens": 10**9, "output_tokens": 0}})  # settled once only
    assert (a.tokens, a.usd) == (5300, pytest.approx(episode_usd(record)))
    assert budget.left("w").space_usd == pytest.approx(usd * 3 - usd - a.usd)
    budget.settle(b, None)  # a run that left no record keeps its worst case
    assert b.usd == pytest.approx(usd)
    assert budget.reserve("w", one())[0] is not None  # what `a` did not use is free again


def test_concurrent_starts_cannot_pass_the_budget(space_key):
    tokens, _ = worst_case(MODEL, 2, 1000)
    budget = SpendBudget(BudgetLimits(visitor_tokens_per_hour=0, visitor_usd_per_hour=0,
                                      space_tokens_per_day=tokens * 5, space_usd_per_day=0), clock=Clock())
    held, refused, gate = [], [], threading.Barrier(24)

    def start(visitor: str) -> None:
        gate.wait()
        try:
            held.append(budget.reserve(visitor, one()))
        except BudgetExceeded:
            refused.append(visitor)

    threads = [threading.Thread(target=start, args=(f"v{i}",)) for i in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (len(held), len(refused)) == (5, 19) and budget.left("x").space_tokens == 0


def test_a_visitors_hour_slides_and_the_spaces_day_ends_at_midnight_utc(space_key):
    clock = Clock(datetime(2026, 12, 6, 23, 0, 30, tzinfo=UTC).timestamp())
    tokens, _ = worst_case(MODEL, 2, 1000)
    budget = SpendBudget(BudgetLimits(visitor_tokens_per_hour=tokens * 2, visitor_usd_per_hour=0,
                                      space_tokens_per_day=tokens * 3, space_usd_per_day=0), clock=clock)
    budget.reserve("v", one() * 2)
    with pytest.raises(BudgetExceeded, match="Your share of the Space's budget for this hour cannot cover") as refused:
        budget.reserve("v", one())
    assert "Paste your own API key" in str(refused.value)
    budget.reserve("w", one())  # another visitor still has their hour; the Space's day is now spent
    with pytest.raises(BudgetExceeded, match="for today cannot cover this run"):
        budget.reserve("x", one())
    clock.now += 59 * 60 + 29  # 23:59:59: the day has not ended, nor v's hour
    with pytest.raises(BudgetExceeded):
        budget.reserve("x", one())
    clock.now += 1  # 00:00 UTC: a new day for the Space, still v's hour
    assert budget.left("v").space_tokens == tokens * 3 and budget.left("v").visitor_tokens == 0
    budget.reserve("x", one())
    clock.now += 30  # an hour after v's holds: v's hour is free again
    assert budget.left("v").visitor_tokens == tokens * 2
    assert budget.reserve("v", one())[0] is not None


def test_the_spaces_keys_take_bounded_turns_and_tokens(space_key):
    budget = SpendBudget(BudgetLimits(max_turns=12, max_tokens=24000), clock=Clock())
    for turns, tokens in ((60, 1000), (2, 200_000)):
        with pytest.raises(BudgetExceeded, match="at most 12 turns and 24,000 tokens a turn"):
            budget.reserve("v", one(turns, tokens))
    assert budget.reserve("v", one(60, 200_000, keys={"hf": "hf_own"})) == [None]
    assert budget.defaults() == (12, 24000)
    assert SpendBudget(BudgetLimits(max_turns=5, max_tokens=8000)).defaults() == (5, 8000)


def test_the_notice_says_what_a_run_may_spend_and_what_is_left_today(space_key):
    budget = SpendBudget(BudgetLimits(space_usd_per_day=50.0), clock=Clock())
    _, usd = worst_case(MODEL, 2, 1000)
    text = budget.notice("v", one())
    assert text.startswith(f"This run plays on the Space's keys and may spend up to ${usd:,.2f}")
    assert "; $50.00 left today" in text
    assert budget.notice("v", one(keys={"hf": "hf_own"})) is None
    assert "at most 12 turns" in budget.notice("v", one(61, 1000))


def test_the_caps_come_from_the_environment_and_a_typo_stops_the_start(monkeypatch):
    monkeypatch.setenv("ARENA_BUDGET_SPACE_USD_PER_DAY", "12.5")
    monkeypatch.setenv("ARENA_SPACE_MAX_TOKENS", "8000")
    limits = budget_from_env()
    assert (limits.space_usd_per_day, limits.max_tokens, limits.max_turns) == (12.5, 8000, BudgetLimits().max_turns)
    for bad in ("12$", "-1", "nan"):
        monkeypatch.setenv("ARENA_BUDGET_VISITOR_USD_PER_HOUR", bad)
        with pytest.raises(ValueError, match="ARENA_BUDGET_VISITOR_USD_PER_HOUR"):
            budget_from_env()


# -- the real loop -----------------------------------------------------------------------------------------------

@pytest.fixture
def peer(monkeypatch, space_key):
    with ChatPeer() as peer:
        monkeypatch.setenv("HF_ROUTER_URL", peer.url + "/v1")
        yield peer
        assert not peer.problems


def test_a_run_on_the_spaces_key_holds_its_worst_case_and_settles_to_its_record(peer, env_url):
    asked, release = threading.Event(), threading.Event()

    def held_turn(request: dict) -> Turn:
        asked.set()
        release.wait(30)
        return Turn(ToolCall("submit_plan", optimal_args()), usage=Usage(input_tokens=1200, output_tokens=80))

    peer.push(held_turn)
    saved: list[dict] = []
    tokens, usd = worst_case(MODEL, 3, 2000)
    budget = SpendBudget(BudgetLimits(visitor_usd_per_hour=usd * 1.5, space_usd_per_day=0))
    registry = RunRegistry(saved.append, budget=budget)
    options = dict(env_url=env_url, max_turns=3, max_tokens=2000, keys={}, retry_base_s=0.01)
    run = registry.start(EpisodeRequest.of(MODEL, TASK_ID, **options), owner="page", visitor="v")
    assert run.hold is not None and (run.hold.tokens, run.hold.usd) == (tokens, pytest.approx(usd))
    # While it plays, its worst case is held: a second run of the same visitor does not fit.
    with pytest.raises(CapacityError, match="for this hour cannot cover this run"):
        registry.start(EpisodeRequest.of(MODEL, TASK_ID, **options), owner="page2", visitor="v")
    # A visitor's own key is theirs to spend: it starts, and holds nothing.
    assert asked.wait(30)  # the held run's turn is the peer's first answer
    peer.push(Turn(ToolCall("submit_plan", optimal_args()), usage=Usage(input_tokens=10, output_tokens=5)))
    own = registry.start(EpisodeRequest.of(MODEL, TASK_ID, **{**options, "keys": {"hf": "hf_own"}}), owner="page3",
                         visitor="v")
    assert own.hold is None
    release.set()
    assert own.wait_finished(30)
    assert run.wait_finished(30) and run.record["end_reason"] == "submitted"
    assert (run.hold.tokens, run.hold.settled) == (1280, True)
    assert run.hold.usd == pytest.approx(episode_usd(run.record)) and 0 < run.hold.usd < usd / 50
    assert budget.left("v").visitor_usd == pytest.approx(usd * 1.5 - run.hold.usd)
    json.dumps(saved)  # both rollouts saved as ever
    assert len(saved) == 2


def test_a_random_pair_holds_its_pools_dearest_pair_whatever_is_drawn(space_key):
    pool = ["baseline:greedy", MODEL, "hf:zai-org/GLM-5.3:together", "baseline:hasty"]
    budget = SpendBudget(BudgetLimits(visitor_usd_per_hour=0, visitor_tokens_per_hour=0), clock=Clock())
    dearest = budget.dearest(pool)
    assert dearest == ["hf:zai-org/GLM-5.3:together", MODEL]
    expected = [worst_case(model, 12, 24000) for model in dearest]
    total = (sum(c[0] for c in expected), sum(c[1] for c in expected))
    for drawn in (("baseline:greedy", "baseline:hasty"), (MODEL, "baseline:greedy"), tuple(dearest)):
        holds = budget.reserve("v", [(model, {"keys": {}}) for model in drawn], hold_as=dearest)
        held = [h for h in holds if h]
        assert (sum(h.tokens for h in held), pytest.approx(sum(h.usd for h in held))) == total
        for hold in holds:  # a baseline's side settles to nothing, like any run's to its usage
            budget.settle(hold, {"model": "baseline:greedy", "usage": {}})
    assert budget.left("v").space_usd == pytest.approx(100.0)


def test_a_random_pairs_side_on_the_spaces_keys_counts_what_it_spent_whatever_it_stands_in_for(space_key):
    # One model of the pool plays on the Space's keys: the dearest pair is it and a baseline. Drawn against
    # another baseline, the paid side must still hold and settle to its own usage, not ride on a baseline's hold.
    pool = ["baseline:greedy", MODEL, "baseline:hasty"]
    budget = SpendBudget(BudgetLimits(visitor_usd_per_hour=0, visitor_tokens_per_hour=0), clock=Clock())
    dearest = budget.dearest(pool)
    assert dearest[0] == MODEL and dearest[1].startswith("baseline:")
    drawn = ("baseline:naive" if dearest[1] != "baseline:naive" else "baseline:greedy", MODEL)
    base, paid = budget.reserve("v", [(model, {"keys": {}}) for model in drawn], hold_as=dearest)
    assert base is None and paid is not None
    assert paid.tokens == worst_case(MODEL, 12, 24000)[0]
    record = {"model": MODEL, "usage": {"input_tokens": 400_000, "output_tokens": 20_000}, "turns": 2,
              "started": datetime.fromtimestamp(NOON, UTC).isoformat()}
    budget.settle(base, {"model": drawn[0], "usage": {}})
    budget.settle(paid, record)
    assert budget.left("v").space_usd == pytest.approx(100.0 - episode_usd(record))
    assert budget.left("v").space_tokens == 30_000_000 - 420_000


def test_what_is_left_is_shown_to_a_hundredth_of_the_cap(space_key):
    budget = SpendBudget(BudgetLimits(space_usd_per_day=100.0), clock=Clock())
    hold = budget.reserve("v", one())[0]
    budget.settle(hold, {"model": MODEL, "usage": {"input_tokens": 400_000, "output_tokens": 20_000}})
    assert 0.05 < hold.usd < 1 and budget.left("v").space_usd == pytest.approx(100 - hold.usd)
    assert "; $99.00 left today" in budget.notice("w", one())  # not the exact $99.xx a random pair's cost would show
    tight = SpendBudget(BudgetLimits(space_usd_per_day=1.0), clock=Clock())
    spent = tight.reserve("v", one())[0]
    tight.settle(spent, {"model": MODEL, "usage": {"input_tokens": 400_000, "output_tokens": 17_800}})
    shown = math.floor((1 - spent.usd) * 100) / 100
    assert shown != round(1 - spent.usd, 2)  # the exact figure would show otherwise
    with pytest.raises(BudgetExceeded, match=rf"and \${shown:.2f} is left"):
        tight.reserve("v", one(12, 24000))
