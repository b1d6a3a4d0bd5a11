"""Upstream's published rows (one Parquet file on testkit/fakehub.py) get the convergence and price columns from
their `steps` JSON column and flat columns: no per-turn usage and no start time are published upstream."""

from __future__ import annotations

import pytest

from rollouts.prices import episode_usd
from rollouts.sources.upstream import UpstreamSource
from testkit.fakehub import running_fakehub
from testkit.hand_records import feasible, hand_record, infeasible, plan_error
from testkit.published import UPSTREAM_CARD, UPSTREAM_FILE, parquet_bytes, publish, upstream_table

TOKEN = "hf_test_upstream"


def test_upstream_rows_carry_the_figures(tmp_path):
    records = [
        hand_record("u1", checks=[(1, plan_error()), (2, infeasible()), (2, feasible(380)), (3, feasible(310))],
                    submit=(3, True, 300), per_turn=[40, 50, 60]),
        hand_record("u2", checks=[(3, feasible(700))], submit=(3, True, 650), usage={"input_tokens": 5000,
                                                                                   "output_tokens": 444}),
        hand_record("u3", model="baseline:greedy", checks=[(1, infeasible())], usage={"input_tokens": 0,
                                                                                      "output_tokens": 0}),
    ]
    files = {"README.md": UPSTREAM_CARD.encode(), UPSTREAM_FILE: parquet_bytes(upstream_table(records))}
    with running_fakehub(token=TOKEN) as hub:
        publish(hub.url, "FineEnvs/PortSimEnv", files, token=TOKEN)
        loaded = UpstreamSource("FineEnvs/PortSimEnv", endpoint=hub.url, cache_dir=tmp_path / "cache").load()
    assert loaded.error is None
    u1, u2, u3 = loaded.table.to_pylist()
    assert (u1["checks_to_feasible"], u1["turns_to_feasible"], u1["first_check_cost"], u1["best_check_cost"]) == \
        (3, 2, 380, 310)
    assert u1["tokens_to_feasible"] is None  # turn 2 of 3, and upstream keeps no per-turn usage
    assert u1["check_costs"] == "[null,null,380,310]" and u1["beat_naive"] is True
    assert u2["tokens_to_feasible"] == 444 and u2["beat_naive"] is False  # found in the last turn: the total
    assert u3["checks_to_feasible"] is None and u3["usd"] is None and u3["beat_naive"] is False
    # No start time upstream: today's list price for the usage.
    assert u1["usd"] > 0
    assert u1["usd"] == pytest.approx(episode_usd({**records[0], "started": None, "messages": []}), rel=1e-9)
