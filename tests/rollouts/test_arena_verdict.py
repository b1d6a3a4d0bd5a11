"""The verdict of a match (rollouts.arena): reward, then cost, then checks, then output tokens; a missing cost is
worse than any; a record and its index row stand the same."""

from __future__ import annotations

import itertools

import pytest

from rollouts.arena import standing, verdict
from rollouts.layout import record_rel
from rollouts.schema import index_row
from testkit.records import make_records


def side(reward=0.8, cost=1820, *, checks=3, errors=0, unread=0, output_tokens=5000, submitted=True,
         feasible=True):
    """A record reduced to what a verdict reads: `checks` good check_plan steps, `unread` ones the server took but
    could not read (a check used), `errors` ones it refused (no check used: no checks left, or a schema error)."""
    steps = [{"turn": 1, "tool": "check_plan", "plan": [], "result": {"feasible": False, "checks_left": 9}}
             for _ in range(checks)]
    steps += [{"turn": 2, "tool": "check_plan", "plan": "prose", "result": {"error": "not a list", "checks_left": 5}}
              for _ in range(unread)]
    steps += [{"turn": 2, "tool": "check_plan", "plan": "prose", "result": {"error": "no checks left"}}
              for _ in range(errors)]
    steps.append({"turn": 3, "tool": "submit_plan", "plan": [], "result": {"submitted": submitted}})
    grade = {"feasible": feasible, "cost": cost if feasible else None} if submitted else None
    return {"reward": reward, "steps": steps, "final": {"submitted": submitted, "plan": [], "grade": grade},
            "usage": {"input_tokens": 100, "output_tokens": output_tokens}}


def test_the_higher_reward_wins_whatever_else():
    judged = verdict(side(0.9, cost=5000, checks=9, output_tokens=90000), side(0.85, cost=100, checks=0))
    assert (judged.winner, judged.by) == ("a", "reward")
    assert judged.sentence() == "A wins on reward (0.900 vs 0.850)."


def test_equal_rewards_go_to_the_lower_cost():
    judged = verdict(side(0.8, cost=2040), side(0.8, cost=1820))
    assert (judged.winner, judged.by) == ("b", "cost")
    assert judged.sentence() == "B wins on cost (1,820 vs 2,040) after equal rewards."
    assert judged.sentence(("gpt", "claude")).startswith("claude wins on cost")


def test_rewards_equal_but_for_the_last_bits_are_equal_and_close_ones_print_apart():
    assert verdict(side(0.1 + 0.2, cost=10), side(0.3, cost=20)).by == "cost"
    close = verdict(side(0.85001), side(0.85004))
    assert close.winner == "b" and close.sentence() == "B wins on reward (0.85004 vs 0.85001)."


def test_a_missing_cost_is_worse_than_any_cost():
    infeasible = side(0.2, feasible=False)
    unsubmitted = side(0.2, submitted=False)
    assert verdict(infeasible, side(0.2, cost=10**9)).winner == "b"
    assert verdict(side(0.2, cost=10**9), unsubmitted).winner == "a"
    judged = verdict(infeasible, side(0.2, cost=3000))
    assert judged.by == "cost" and judged.sentence() == "B wins on cost (3,000 vs none) after equal rewards."
    # Neither has a cost: the checks decide.
    assert verdict(side(0.2, submitted=False, checks=2), unsubmitted).by == "checks"


def test_then_fewer_checks_then_fewer_output_tokens_then_a_tie():
    judged = verdict(side(checks=2), side(checks=4))
    assert (judged.winner, judged.by) == ("a", "checks")
    assert judged.sentence() == "A wins on checks (2 vs 4) after equal rewards and costs."
    judged = verdict(side(output_tokens=3310), side(output_tokens=1204))
    assert (judged.winner, judged.by) == ("b", "output_tokens")
    assert judged.sentence() == "B wins on output tokens (1,204 vs 3,310) after equal rewards, costs and checks."
    tie = verdict(side(), side())
    assert (tie.winner, tie.by) == ("tie", None)
    assert tie.sentence() == "A tie: equal rewards, costs, checks and output tokens."


def test_checks_count_as_the_index_counts_them_the_ones_the_server_accepted():
    # An unreadable plan used up a check on the server; a call refused (none left, or a schema error) used none.
    assert standing(side(checks=2, unread=1, errors=2)).checks == 3
    assert verdict(side(checks=2, unread=1, errors=2), side(checks=3)).winner == "tie"
    assert verdict(side(checks=2, errors=1), side(checks=3)).winner == "a"


def test_a_record_and_its_index_row_stand_the_same_and_get_the_same_verdicts():
    records = make_records(24, seed=8)
    rows = [index_row(record, record_rel(record)) for record in records]
    for record, row in zip(records, rows, strict=True):
        assert standing(record) == standing(row), record["episode_id"]
    for (ra, xa), (rb, xb) in itertools.islice(itertools.combinations(zip(records, rows, strict=True), 2), 60):
        assert verdict(ra, rb) == verdict(xa, xb)
        assert verdict(ra, rb).winner == {"a": "b", "b": "a", "tie": "tie"}[verdict(rb, ra).winner]


@pytest.mark.parametrize("odd", [None, "12", float("nan"), True])
def test_odd_values_read_as_unknown(odd):
    row = {"reward": odd, "cost": odd, "feasible": True, "checks": odd, "output_tokens": odd}
    assert standing(row) == standing({"reward": 0.0})
    assert verdict(row, {"reward": 0.0, "cost": 5, "checks": 1, "output_tokens": 1}).winner == "b"
