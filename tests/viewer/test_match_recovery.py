"""A match killed mid-play (`kill -9` of the process playing it) gets its row at the next start, from both sides'
records closed as `interrupted`, so `?match=` and `/arena_match` find it (rollouts.matches' note of a match in play,
and `MatchBook.recover`). Before, it left its two episodes and no row: "no such match"."""

from __future__ import annotations

import json
import signal
import time

from gradio_client import Client

from rollouts.journal import RUNNING_DIR
from rollouts.matches import PENDING_DIR
from testkit.app import launched_app


def test_a_match_killed_mid_play_is_found_with_its_sides_end_reasons(tmp_path, warm_python):
    root = tmp_path / "rollouts"
    child = warm_python.popen("testkit.playing_child", str(root), "2", "4", "match")  # 4 s a step: killed between the first turn and the next
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            entries = [json.loads(p.read_bytes())["record"] for p in (root / RUNNING_DIR).glob("*.json")
                       if p.stat().st_size]
            if len(entries) == 2 and all(r.get("turns", 0) >= 1 for r in entries):  # both started: rollouts
                break
            assert child.poll() is None, child.output("stderr")
            time.sleep(0.2)
        else:
            raise AssertionError(f"the match never started: {child.output('stderr')}")
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
    printed = child.output("stdout").split()
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
