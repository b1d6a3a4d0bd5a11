"""Load with honest limits, against the launched app over real HTTP: 64 visitors calling `/run` at once all get an
answer (finished, or refused at once with a message), no accepted episode is lost, and the per-visitor cap holds
across new connections."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from testkit import aio
from testkit.app import launched_app
from testkit.load import RUN_DATA, call_run, flood, visitor_ip

SHORT_RUN = [RUN_DATA[0], RUN_DATA[1], 2, *RUN_DATA[3:]]  # two turns: a draft and its submission


@pytest.fixture(scope="module")
def arena(tmp_path_factory):
    with launched_app(tmp_path_factory.mktemp("load"), baseline_pace_s=0.02) as app:
        yield app


def test_64_concurrent_callers_all_get_an_answer_and_no_accepted_episode_is_lost(arena):
    outcomes = aio.run(flood(arena.url, 64, timeout_s=60, data=SHORT_RUN))
    kinds = Counter(o.kind for o in outcomes)
    assert kinds["no_answer"] == 0 and kinds["failed"] == 0, [o for o in outcomes if o.kind not in
                                                              ("finished", "refused")]
    assert kinds["finished"] >= 1 and kinds["refused"] >= 1, kinds
    for outcome in outcomes:
        if outcome.kind == "refused":
            assert "arena is full" in outcome.message
    accepted = [o.episode_id for o in outcomes if o.episode_id]
    assert len(accepted) == kinds["finished"]
    for episode_id in accepted:
        assert arena.ctx.store.has(episode_id), f"accepted episode {episode_id} left no record"


def test_the_per_visitor_cap_holds_across_new_connections(arena, monkeypatch):
    # Paced so that the first two episodes outlast the burst of three calls.
    monkeypatch.setattr(arena.ctx.settings, "baseline_pace_s", 0.5)
    async def three_then_another() -> tuple[list, object, object]:
        same = await asyncio.gather(*(call_run(arena.url, "192.0.2.7", timeout_s=60) for _ in range(3)))
        return same, await call_run(arena.url, visitor_ip(9999), timeout_s=60), \
            await call_run(arena.url, "192.0.2.7", timeout_s=60)

    same, other, later = aio.run(three_then_another())
    assert sorted(o.kind for o in same) == ["finished", "finished", "refused"]
    refused = next(o for o in same if o.kind == "refused")
    assert "per visitor" in refused.message
    assert other.kind == "finished"
    assert later.kind == "finished"  # the cap counts running episodes: once they end, the visitor may run again
