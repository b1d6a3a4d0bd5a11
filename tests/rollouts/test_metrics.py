"""Each per-rollout figure (rollouts.metrics, rollouts.prices) against records written out by hand.

Prices are worked out from the genai-prices table as it stood on the episodes' start date, 2026-11-25 (list prices
of a past date do not change): claude-sonnet-5-5 $2 / $10 per million input / output tokens; claude-haiku-5-5
$0.1 / $0.5, $0.5 / $2.5 once a request's prompt passes 100k tokens; Qwen3.8-27B at the HF router's cerebras
$0.99 / $1.49 and ovhcloud $0.47 / $3.19; MiniMax-M3 $0.3 / $1.2 at both fireworks-ai and novita.
"""

from __future__ import annotations

import json

import pytest

from rollouts.metrics import METRIC_COLUMNS, episode_metrics
from rollouts.prices import episode_usd, price_table, served_by
from rollouts.schema import COLUMNS, index_row, record_problem
from testkit.hand_records import feasible, hand_record, infeasible, plan_error


def test_hand_records_follow_the_schema():
    assert record_problem(hand_record(checks=[(1, feasible(300))], submit=(2, True, 250), per_turn=[5, 6])) is None


def test_checks_turns_and_costs_up_to_the_first_feasible_check():
    record = hand_record(turns=4, per_turn=[120, 80, 300, 50], checks=[
        (1, plan_error()), (1, infeasible()), (2, feasible(420)), (3, infeasible()), (3, feasible(310)),
        (4, feasible(330))])
    figures = episode_metrics(record)
    assert figures["checks_to_feasible"] == 3  # the plan error and the infeasible plan count as calls
    assert figures["turns_to_feasible"] == 2
    assert figures["tokens_to_feasible"] == 120 + 80
    assert figures["first_check_cost"] == 420 and figures["best_check_cost"] == 310
    assert json.loads(figures["check_costs"]) == [None, None, 420, None, 310, 330]


def test_a_submit_is_not_a_check():
    record = hand_record(checks=[(1, infeasible())], submit=(2, True, 200), per_turn=[10, 20, 30])
    figures = episode_metrics(record)
    assert figures["checks_to_feasible"] is None and figures["first_check_cost"] is None
    assert figures["check_costs"] == "[null]"


def test_no_feasible_check_leaves_the_convergence_figures_null():
    figures = episode_metrics(hand_record(checks=[(1, infeasible()), (2, plan_error())], per_turn=[1, 2, 3]))
    assert {k: figures[k] for k in ("checks_to_feasible", "turns_to_feasible", "tokens_to_feasible",
                                    "first_check_cost", "best_check_cost")} == dict.fromkeys(
        ("checks_to_feasible", "turns_to_feasible", "tokens_to_feasible", "first_check_cost", "best_check_cost"))
    assert episode_metrics(hand_record())["check_costs"] == "[]"


def test_a_feasible_answer_without_a_cost_is_not_counted():
    odd = {"feasible": True, "cost": "cheap"}
    figures = episode_metrics(hand_record(checks=[(1, odd), (2, feasible(90))], per_turn=[1, 2, 3]))
    assert figures["checks_to_feasible"] == 2 and figures["first_check_cost"] == 90


def test_older_records_have_tokens_to_feasible_only_when_the_last_turn_found_it():
    early = hand_record(turns=3, checks=[(2, feasible(300))], usage={"input_tokens": 9000, "output_tokens": 777})
    last = hand_record(turns=3, checks=[(3, feasible(300))], usage={"input_tokens": 9000, "output_tokens": 777})
    assert episode_metrics(early)["tokens_to_feasible"] is None  # never a guess
    assert episode_metrics(early)["turns_to_feasible"] == 2
    assert episode_metrics(last)["tokens_to_feasible"] == 777


def test_per_turn_usage_with_a_gap_is_not_summed():
    record = hand_record(turns=3, per_turn=[10, 20, 30], checks=[(2, feasible(300))])
    del record["messages"][3]["usage"]  # turn 2 kept no usage
    assert episode_metrics(record)["tokens_to_feasible"] is None


@pytest.mark.parametrize(("submit", "naive", "expected"), [
    ((3, True, 420), 500, True),      # feasible and cheaper than the naive plan
    ((3, True, 500), 500, False),     # as dear as the naive plan does not beat it
    ((3, False, None), 500, False),   # infeasible
    (None, 500, False),               # no submission
    ((3, True, 420), None, None),     # the naive cost is unknown
])
def test_beat_naive(submit, naive, expected):
    assert episode_metrics(hand_record(submit=submit, naive=naive))["beat_naive"] is expected


def test_beat_naive_reads_the_grade_when_the_task_summary_lacks_the_naive_cost():
    record = hand_record(submit=(3, True, 420), naive=500)
    record["task"].pop("naive_cost")
    assert episode_metrics(record)["beat_naive"] is True


# -- prices ---------------------------------------------------------------------------------------------------


def test_an_anthropic_episode_is_priced_from_its_usage():
    # 1,000 + 2,000 + 3,000 input tokens at $2/M, 3 x 100 output tokens at $10/M.
    assert episode_usd(hand_record()) == pytest.approx(0.012 + 0.003, abs=1e-12)
    assert episode_usd(hand_record(model="anthropic:claude-sonnet-5-5@high")) == pytest.approx(0.015, abs=1e-12)


def test_an_hf_route_is_priced_at_its_provider():
    record = hand_record(model="hf:Qwen/Qwen3.8-27B:cerebras|ovhcloud")
    assert episode_usd(record) == pytest.approx(6000 * 0.99e-6 + 300 * 1.49e-6, abs=1e-12)


def test_a_provider_switch_is_priced_only_when_the_providers_agree():
    differ = hand_record(model="hf:Qwen/Qwen3.8-27B:cerebras|ovhcloud",
                         provider_switches=["Qwen/Qwen3.8-27B:cerebras -> Qwen/Qwen3.8-27B:ovhcloud (503: down)"])
    assert episode_usd(differ) is None  # which turns each served is not recorded
    agree = hand_record(model="hf:MiniMaxAI/MiniMax-M3:fireworks-ai|novita", provider_switches=["... (503)"])
    assert episode_usd(agree) == pytest.approx(6000 * 0.3e-6 + 300 * 1.2e-6, abs=1e-12)


@pytest.mark.parametrize("model", ["baseline:greedy", "human", "human:someone", "vllm:llama-4-scout",
                                   "hf:Qwen/Qwen3.8-27B", "hf:Qwen/Qwen3.8-27B:fastest",
                                   "anthropic:claude-unreleased-9", "openai:gpt-5.5-mini", "mystery:model"])
def test_no_price_for_baselines_people_self_hosted_router_choices_and_unknown_models(model):
    assert episode_usd(hand_record(model=model)) is None
    assert episode_metrics(hand_record(model=model))["usd"] is None


def test_served_by_reads_the_spec_and_the_switches():
    assert served_by("openai:gpt-5.5@low") == [("openai", "gpt-5.5")]
    assert served_by("hf:org/m:a|b|c", ["one switch"]) == [("huggingface_a", "org/m"), ("huggingface_b", "org/m")]
    assert served_by("hf:org/m") is None and served_by(None) is None


def test_a_tiered_price_applies_per_turn():
    # Two turns with prompts of 50k and 150k tokens: the first at the base rate, the second past the 100k tier.
    record = hand_record(model="anthropic:claude-haiku-5-5", turns=2, per_turn=[1000, 1000],
                         usage={"input_tokens": 200_000, "output_tokens": 2000})
    record["messages"][2]["usage"]["input_tokens"], record["messages"][3]["usage"]["input_tokens"] = 50_000, 150_000
    base = 50_000 * 0.1e-6 + 1000 * 0.5e-6
    tier = 150_000 * 0.5e-6 + 1000 * 2.5e-6
    assert episode_usd(record) == pytest.approx(base + tier, abs=1e-12)


def test_without_per_turn_usage_a_tiered_price_takes_the_average_turn():
    # 180k input tokens over two turns: each turn's prompt is taken to be 90k, below the tier; the totals in one
    # request would cross it and cost five times as much.
    record = hand_record(model="anthropic:claude-haiku-5-5", turns=2,
                         usage={"input_tokens": 180_000, "output_tokens": 2000})
    assert episode_usd(record) == pytest.approx(2 * (90_000 * 0.1e-6 + 1000 * 0.5e-6), abs=1e-12)


def test_cache_reads_are_priced_at_their_rate_when_the_usage_says_so():
    plain = hand_record(usage={"input_tokens": 1_000_000, "output_tokens": 0})
    cached = hand_record(usage={"input_tokens": 1_000_000, "output_tokens": 0, "cache_read_tokens": 800_000})
    assert episode_usd(plain) == pytest.approx(2.0)
    assert episode_usd(cached) == pytest.approx(200_000 * 2e-6 + 800_000 * 0.1e-6)


def test_a_price_needs_usage_and_never_breaks_a_row():
    assert episode_usd(hand_record(usage={"input_tokens": 0, "output_tokens": 0})) == 0.0
    broken = hand_record()
    broken["usage"] = "lots"
    assert episode_usd(broken) is None and episode_metrics(broken)["usd"] is None
    too_much_cache = hand_record(usage={"input_tokens": 10, "output_tokens": 0, "cache_read_tokens": 50})
    assert episode_usd(too_much_cache) is None


def test_the_price_table_is_named():
    assert price_table().startswith("genai-prices 0.")


# -- the index row -----------------------------------------------------------------------------------------------


def test_the_index_row_carries_the_figures_in_their_types():
    record = hand_record(checks=[(1, infeasible()), (2, feasible(420))], submit=(3, True, 400), per_turn=[7, 8, 9])
    row = index_row(record, "rollouts/2026-11-25/hand-1.json")
    assert list(row) == list(COLUMNS) and set(METRIC_COLUMNS) <= set(row)
    assert row["checks_to_feasible"] == 2 and row["turns_to_feasible"] == 2 and row["tokens_to_feasible"] == 15
    assert row["first_check_cost"] == 420 and row["best_check_cost"] == 420 and row["beat_naive"] is True
    assert row["usd"] == pytest.approx(0.012 + 24 * 10e-6) and row["check_costs"] == "[null,420]"
    assert row["regrade_reward"] is None and row["regrade_feasible"] is None
    regraded = index_row({**record, "regrade": {"reward": 0.5, "grade": {"feasible": False}}}, "x")
    assert regraded["regrade_reward"] == 0.5 and regraded["regrade_feasible"] is False


def test_checks_count_only_the_checks_the_server_accepted():
    """A check the server refused (none left, or arguments that failed the tool's schema) used no check: the index's
    `checks`, the checks to a feasible plan and the record view leave it out; an unreadable plan used one."""
    refused = [(1, {"error": "no checks left: all 10 checks are used; submit your plan with submit_plan"}),
               (1, {"error": "plan: Input should be a valid list"})]
    record = hand_record("refusals", checks=[*refused, (2, plan_error()), (3, feasible(150))])
    row = index_row(record, f"rollouts/2026-11-25/{record['episode_id']}.json")
    assert row["checks"] == 2 and row["checks_to_feasible"] == 2 and row["check_costs"] == "[null,150]"
