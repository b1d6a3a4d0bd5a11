"""A random match's sides stay hidden at every door until the vote or the skip (live.match_runs'
`withheld_episodes`, asked by each): the share page, its card and raw JSON, `/rollout`, `/browse_record`, Browse's
list and `?episode=`; `/arena_start` gives no episode id; the store's pusher keeps their files and rows off the Hub
dataset. Before, `/arena_start` handed out both ids, `/r/<id>` of a hidden side was titled with its model, and the
pusher sent its record, trace and rows within minutes."""

from __future__ import annotations

from types import SimpleNamespace

import httpx
import huggingface_hub
import pytest
from gradio_client import Client

from agent.request import EpisodeRequest
from live.match_runs import SKIP
from testkit import aio
from testkit.app import match_ended, settings_for
from testkit.fakehub import running_fakehub
from testkit.tasks import TASK_ID
from viewer.browse.handlers import board_view
from viewer.browse.state import BrowseState
from viewer.context import AppContext
from viewer.run.section import attach_episode

UNKNOWN = "abcdef012345"


@pytest.fixture(scope="module")
def client(arena):
    return Client(arena.url, verbose=False)


def sides(arena, match_id: str) -> tuple[str, str]:
    match = arena.ctx.matches.get(match_id)
    return match.a.episode_id, match.b.episode_id


def shares(arena, episode_id: str) -> list[tuple[int, bytes]]:
    return [(r.status_code, r.content) for r in
            (httpx.get(f"{arena.url}r/{episode_id}{tail}") for tail in ("", ".png", ".json"))]


def assert_hidden(arena, client: Client, episode_id: str) -> None:
    assert shares(arena, episode_id) == shares(arena, UNKNOWN)  # the one answer for any unknown id
    assert {status for status, _ in shares(arena, episode_id)} == {404}
    with pytest.raises(Exception, match=f"no rollout {episode_id}"):
        client.predict(episode_id, api_name="/rollout")
    with pytest.raises(Exception, match=f"No rollout `{episode_id}`"):
        client.predict(episode_id, api_name="/browse_record")
    assert episode_id not in str(client.predict(api_name="/browse_rollouts"))
    assert episode_id not in str(arena.ctx.archive.same_task(TASK_ID))  # Browse's compare picker
    # The Run tab's `?episode=` link: as for an id nothing has.
    section = SimpleNamespace(ctx=arena.ctx, status="status")

    async def frames(which: str) -> list[dict]:
        return [frame async for frame in attach_episode(section, which, None)]

    assert aio.run(frames(episode_id)) == [{"status": f"⚠️ No episode `{episode_id}` is running here or stored."}]


def tally_note(arena) -> str:
    """Browse's board note as it reads now: the board's notes, the ratings' and the votes per model with their
    matches."""
    section = SimpleNamespace(ctx=arena.ctx, board="board", board_models="models", board_note="note",
                              convergence="convergence", heatmap="heatmap", heatmap_cells="cells",
                              frontier="frontier", frontier_note="frontier_note", card_pick="card_pick", card="card")
    return board_view(section, BrowseState())["note"]


def test_a_random_pairs_episodes_are_unknown_everywhere_until_the_vote(arena, client, monkeypatch):
    monkeypatch.setattr(arena.ctx.settings, "baseline_pace_s", 0.3)  # still playing at the first look
    before = tally_note(arena)
    started = client.predict("", "", TASK_ID, True, api_name="/arena_start")
    assert started["episode_a"] is None and started["episode_b"] is None and started["match_id"]
    a, b = sides(arena, started["match_id"])
    assert shares(arena, a) == shares(arena, UNKNOWN)  # while it plays: no live page, no card
    with pytest.raises(Exception, match=f"no rollout {a}"):
        client.predict(a, api_name="/rollout")
    match = match_ended(client, started["match_id"])
    assert match["episode_a"] is None and match["model_a"] is None
    for episode_id in (a, b):
        assert_hidden(arena, client, episode_id)
        assert arena.ctx.store.load(episode_id)["model"].startswith("baseline:")  # saved all the same
    # The board's vote tally counts no undecided match: its row names both models.
    assert tally_note(arena) == before
    # Someone skips (sees the names): the pair is decided, its rollouts public like any other.
    seen = client.predict(started["match_id"], "skip", api_name="/arena_vote")
    assert (seen["episode_a"], seen["episode_b"]) == (a, b) and seen["model_a"]
    assert [status for status, _ in shares(arena, a)] == [200, 200, 200]
    assert client.predict(b, api_name="/browse_record")["episode_id"] == b
    assert client.predict(a, api_name="/rollout")["model"] == seen["model_a"]


def test_a_named_match_is_public_at_once(arena, client):
    started = client.predict("baseline:greedy", "baseline:hasty", TASK_ID, False, api_name="/arena_start")
    assert started["episode_a"] and started["episode_b"]
    match_ended(client, started["match_id"])
    assert client.predict(started["episode_a"], api_name="/browse_record")["model"] == "baseline:greedy"


def test_the_dataset_gets_a_random_pairs_files_only_after_the_vote(tmp_path, env_url, monkeypatch):
    token, repo = "hf_test_secret_0123456789", "arena/rollouts"
    with running_fakehub(token=token) as hub:
        monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", hub.url)  # where the store's pusher pushes
        # ...and reads its dataset card back from (a download URL is built from this, fixed at import).
        monkeypatch.setattr(huggingface_hub.constants, "HUGGINGFACE_CO_URL_TEMPLATE",
                            hub.url + "/{repo_id}/resolve/{revision}/{filename}")
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        ctx = AppContext.create(settings_for(tmp_path / "rollouts", dataset=repo, hub_token=token))
        try:
            match = ctx.matches.start(*(EpisodeRequest.of(m, TASK_ID, env_url=env_url)
                                        for m in ("baseline:greedy", "baseline:naive")),
                                      mode="random", owner="page-1", visitor="ip:203.0.113.5")
            assert match.concluded.wait(60) and match.row is not None
            ids = [run.episode_id for run in match.runs]
            assert ctx.store.flush(timeout=30)
            before = hub.files(repo)
            assert "README.md" in before  # the pusher did push...
            assert not [rel for rel, data in before.items() if any(e in rel or e.encode() in data for e in ids)]
            ctx.matches.vote(match.match_id, SKIP, visitor="ip:198.51.100.7")
            assert ctx.store.flush(timeout=30)
            after = hub.files(repo)
            assert {rel for rel in after if rel.startswith(("rollouts/", "traces/"))} == \
                {f"{kind}/{ctx.store.load(e)['started'][:10]}/{e}.{ext}" for e in ids
                 for kind, ext in (("rollouts", "json"), ("traces", "jsonl"))}
            assert all(e.encode() in after[rel] for e in ids for rel in after if rel.startswith(("index/", "matches/")))
        finally:
            ctx.store.close()
