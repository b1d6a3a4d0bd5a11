"""A match killed mid-play (`kill -9` of the process playing it) gets its row at the next start, from both sides'
records closed as `interrupted`, so `?match=` and `/arena_match` find it (rollouts.matches' note of a match in play,
and `MatchBook.recover`). Before, it left its two episodes and no row: "no such match"."""

from __future__ import annotations

from gradio_client import Client

from rollouts.matches import PENDING_DIR
from testkit.app import launched_app
from testkit.playing_child import killed_after_first_turns


def test_a_match_killed_mid_play_is_found_with_its_sides_end_reasons(tmp_path, warm_python):
    root = tmp_path / "rollouts"
    stdout, _ = killed_after_first_turns(warm_python, root, 2, match=True)
    printed = stdout.split()
    match_id = printed[printed.index("match") + 1]
    episodes = [printed[i + 1] for i, word in enumerate(printed) if word == "started"]
    assert list((root / PENDING_DIR).glob("*.json")) and not list(root.glob("matches/*/*.jsonl"))

    with launched_app(tmp_path) as app:
        match = Client(app.url, verbose=False).predict(match_id, api_name="/arena_match")
        assert (match["state"], match["saved"], match["mode"]) == ("ended", True, "random")
        assert (match["end_reason_a"], match["end_reason_b"]) == ("interrupted", "interrupted")
        assert [match["episode_a"], match["episode_b"]] == episodes
        assert app.ctx.matches.book.get(match_id)["episode_a"] == episodes[0]
        assert not list((root / PENDING_DIR).glob("*.json"))  # the note is closed with its row
