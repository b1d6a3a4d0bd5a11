"""Each turn's usage kept on its assistant message, through the real loop and the real `openai` SDK against the
local chat-completions peer, and the figures it makes possible (tokens to the first feasible check, the price)."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price

from rollouts.schema import index_row, record_problem
from testkit.episodes import play
from testkit.peers import ToolCall, Turn, Usage
from testkit.tasks import naive_args, optimal_args

MODEL = "hf:Qwen/Qwen3.8-27B:cerebras"


def test_each_turn_keeps_its_usage_and_the_figures_follow(router_peer, env_url):
    router_peer.push(Turn(ToolCall("check_plan", json.dumps({"plan": "ship 1 goes first"})),
                   usage=Usage(input_tokens=700, output_tokens=90)),
              Turn(ToolCall("check_plan", naive_args()), usage=Usage(input_tokens=900, output_tokens=40)),
              Turn(ToolCall("submit_plan", optimal_args()), usage=Usage(input_tokens=1100, output_tokens=30)))
    _, record = play(MODEL, env_url)
    assert record_problem(record) is None and record["end_reason"] == "submitted"
    turns = [m["usage"] for m in record["messages"] if m["role"] == "assistant"]
    assert turns == [{"input_tokens": 700, "output_tokens": 90}, {"input_tokens": 900, "output_tokens": 40},
                     {"input_tokens": 1100, "output_tokens": 30}]
    assert record["usage"] == {"input_tokens": 2700, "output_tokens": 160}
    row = index_row(record, f"rollouts/{record['started'][:10]}/{record['episode_id']}.json")
    # The unreadable plan was the first check; the naive plan (cost 658), the second, is feasible.
    assert (row["checks_to_feasible"], row["turns_to_feasible"], row["tokens_to_feasible"]) == (2, 2, 130)
    assert row["first_check_cost"] == row["best_check_cost"] == 658 and row["beat_naive"] is True
    when = datetime.fromisoformat(record["started"].replace("Z", "+00:00"))
    price = calc_price(PriceUsage(input_tokens=2700, output_tokens=160), "Qwen/Qwen3.8-27B",
                       provider_id="huggingface_cerebras", genai_request_timestamp=when).total_price
    assert row["usd"] == pytest.approx(float(price), rel=1e-12) and row["usd"] > 0
