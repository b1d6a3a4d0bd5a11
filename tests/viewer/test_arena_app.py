"""The Arena for scripts, through `gradio_client` against the launched app (embedded berth server, baselines): a
named match to its verdict and its saved row, a random match whose names stay out of every answer until the vote,
one vote per visitor, the checks a start gets (specs, task, caps, keys) and Stop, and the leaderboard's arena column
agreeing with `python -m agent ratings`."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from types import SimpleNamespace

import pandas as pd
import pytest
from gradio_client import Client

from batch.cli import main as agent_main
from rollouts.filters import Filters
from testkit import aio
from testkit.app import match_ended
from testkit.records import make_record
from testkit.tasks import TASK_ID
from viewer.arena.section import attach_match
from viewer.arena.view import Snapshot, api_view, head_markdown, verdict_markdown, votes_line
from viewer.browse.views import arena_note, board_table

PAIR = ("baseline:greedy", "baseline:hasty")


@pytest.fixture(scope="module")
def client(arena):
    return Client(arena.url, verbose=False)


def test_a_named_match_of_two_baselines_runs_to_a_verdict_saved_as_a_match(arena, client):
    started = client.predict(*PAIR, TASK_ID, False, api_name="/arena_start")
    assert set(started) == {"match_id", "episode_a", "episode_b", "stop_token"}
    match = match_ended(client, started["match_id"])
    assert (match["model_a"], match["model_b"], match["names"], match["mode"]) == (*PAIR, "shown", "named")
    a, b = (client.predict(started[f"episode_{side}"], api_name="/browse_record") for side in "ab")
    assert (a["model"], b["model"]) == PAIR and a["task_id"] == b["task_id"] == TASK_ID  # ordinary rollouts
    assert (match["reward_a"], match["reward_b"]) == (a["reward"], b["reward"]) and a["reward"] > b["reward"]
    assert match["winner"] == "a" and match["verdict"].startswith("A (baseline:greedy) wins on reward (")
    assert match["saved"] and match["ballot"] == "open" and match["votes"] is None  # no counts before one's vote
    row = arena.ctx.matches.book.get(started["match_id"])
    assert (row["episode_a"], row["episode_b"], row["winner"]) == (a["episode_id"], b["episode_id"], "a")
    voted = client.predict(started["match_id"], "a", api_name="/arena_vote")
    assert voted["ballot"] == "voted" and voted["votes"] == {"a": 1, "b": 0, "tie": 0, "both_bad": 0}
    with pytest.raises(Exception, match="already voted on this match"):  # one vote per visitor, any client
        Client(arena.url, verbose=False).predict(started["match_id"], "b", api_name="/arena_vote")
    assert arena.ctx.matches.book.get(started["match_id"])["votes"]["a"] == 1
    # Once the app no longer holds it (as after a restart), the match is read from its row and its records.
    arena.ctx.matches._matches.pop(started["match_id"])
    stored = client.predict(started["match_id"], api_name="/arena_match")
    assert stored["ballot"] == "closed" and stored["votes"]["a"] == 1
    assert {k: stored[k] for k in ("model_a", "reward_a", "winner", "verdict")} == \
        {k: match[k] for k in ("model_a", "reward_a", "winner", "verdict")}


def test_a_random_match_keeps_its_names_out_of_every_answer_until_the_vote(arena, client, monkeypatch):
    monkeypatch.setattr(arena.ctx.settings, "baseline_pace_s", 0.3)  # a match that lasts past the next call
    started = client.predict("", "", TASK_ID, True, api_name="/arena_start")
    running = client.predict(started["match_id"], api_name="/arena_match")
    with pytest.raises(Exception, match="still being played"):
        client.predict(started["match_id"], "a", api_name="/arena_vote")
    match = match_ended(client, started["match_id"])
    for answer in (started, running, match):
        assert "baseline:" not in json.dumps(answer), answer
    assert match["model_a"] is match["model_b"] is None and match["names"] == "hidden until you vote or skip"
    assert match["verdict"].split(" ", 1)[0] in ("A", "B") and match["verdict"].split(" ")[1] in ("wins", "tie:")
    voted = client.predict(started["match_id"], "tie", api_name="/arena_vote")
    assert voted["names"] == "shown" and voted["votes"]["tie"] == 1
    assert voted["model_a"] != voted["model_b"] and {voted["model_a"], voted["model_b"]} <= {
        "baseline:hasty", "baseline:greedy", "baseline:naive"}  # the models this Space runs without a key
    assert arena.ctx.matches.book.get(started["match_id"])["mode"] == "random"


@pytest.mark.parametrize(("models", "message"), [
    (("gpt-without-provider", "baseline:greedy"), "must start with one of"),
    (("baseline:greedy", "anthropic:claude-x"), "needs an Anthropic API key"),
    (("baseline:greedy", "baseline:greedy"), "Model B is model A again"),
    (("baseline:greedy", "baseline:smart"), "unknown baseline 'smart': the baselines are baseline:greedy"),
])
def test_a_start_gets_the_checks_of_a_run(client, monkeypatch, models, message):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(Exception, match=message):
        client.predict(*models, TASK_ID, False, api_name="/arena_start")


def test_a_match_counts_as_two_runs_stops_with_its_token_and_bad_ids_are_refused(arena, client, monkeypatch):
    monkeypatch.setattr(arena.ctx.settings, "baseline_pace_s", 1.0)
    with pytest.raises(Exception, match="not one this server offers"):
        client.predict(*PAIR, "dock-nowhere-0", False, api_name="/arena_start")
    started = client.predict(*PAIR, TASK_ID, False, api_name="/arena_start")
    with pytest.raises(Exception, match="starts 2 episodes at once, and you already have 2 episodes running"):
        client.predict(*PAIR, TASK_ID, False, api_name="/arena_start")
    other = Client(arena.url, verbose=False)  # another client of the same visitor, without the token: no
    assert other.predict(started["match_id"], "wrong-token", api_name="/arena_stop") is False
    live = arena.ctx.matches.get(started["match_id"])
    deadline = time.monotonic() + 30  # stopped after each side's first turn (before it, a side is no rollout)
    while not all(any(e["type"] == "turn_finished" for e in list(run.events)) for run in live.runs):
        assert time.monotonic() < deadline, "the sides never took a turn"
        time.sleep(0.05)
    assert other.predict(started["match_id"], started["stop_token"], api_name="/arena_stop") is True
    match = match_ended(client, started["match_id"])
    assert (match["end_reason_a"], match["end_reason_b"]) == ("stopped", "stopped") and match["saved"]
    with pytest.raises(Exception, match="malformed match id"):
        client.predict("../../etc", api_name="/arena_match")
    with pytest.raises(Exception, match="no match 0123456789ab"):
        client.predict("0123456789ab", api_name="/arena_match")


def test_model_names_render_inert_and_votes_show_only_once_one_has_had_a_say():
    hostile = '<img src=x onerror="window.__xss = 1">'
    row = {"match_id": "m1", "task_id": TASK_ID, "mode": "named", "winner": "a", "reward_a": 0.9, "reward_b": 0.5,
           "votes": {"a": 2, "b": 0, "tie": 0, "both_bad": 1}}
    snap = Snapshot("m1", "named", TASK_ID, (hostile, "baseline:greedy"), ("e1", "e2"), (None, None), True, row,
                    None, True, "open")
    for text in (head_markdown(snap, "a"), verdict_markdown(snap)):
        assert "<img" not in text and "&lt;img src=x" in text
    assert verdict_markdown(snap).startswith("### 🏆 A (&lt;img")  # the row's winner, the records not at hand
    assert api_view(snap)["votes"] is None and votes_line(snap) == ""  # counts never sway a vote
    voted = replace(snap, ballot="voted")
    assert api_view(voted)["votes"] == row["votes"] and "a is better 2" in votes_line(voted)
    hidden = replace(snap, mode="random", names_shown=False)
    assert api_view(hidden)["model_a"] is None and hostile not in json.dumps(api_view(hidden))
    assert head_markdown(hidden, "a") == "### 🏆 A · *model hidden until you vote or skip*"


def test_a_match_link_that_names_nothing_says_so(arena):
    section = SimpleNamespace(ctx=arena.ctx, verdict="verdict")

    async def frames(match_id: str) -> list[dict]:
        return [frame async for frame in attach_match(section, match_id, None)]

    assert aio.run(frames("0123456789ab")) == [
        {"verdict": "⚠️ No match `0123456789ab` is running here or stored in this Space's folder."}]
    assert "malformed" in aio.run(frames("../etc"))[0]["verdict"]


def test_the_leaderboards_arena_column_is_what_the_cli_rates(arena, client, capsys):
    # Three models on five shared tasks, the fewest that rate (the matches above add theirs): every rated model's
    # number must agree.
    tasks = [TASK_ID, "dock-24B-w06x2-busy-0", "dock-24B-w07x1-busy-0", "dock-24B-w16x1-busy-0",
             "dock-24B-w35x1-busy-0"]
    for seed in range(15):
        arena.ctx.store.save(make_record(seed=100 + seed, task_id=tasks[seed % 5],
                                         model=("baseline:naive", "openai:gpt-x", "vllm:y")[seed % 3],
                                         end_reason="submitted"))
    # A model alone on its task: no battle, no rating, and the board says why.
    arena.ctx.store.save(make_record(seed=99, task_id="dock-36A-w15x1-busy-0", model="hf:org/loner",
                                     end_reason="submitted"))
    arena.ctx.archive.refresh_local(force=True)
    board = {line["model"]: line for line in client.predict(api_name="/browse_leaderboard")}
    assert board["hf:org/loner"]["arena"] is None and board["hf:org/loner"]["n"] == 1
    note = arena_note(arena.ctx.archive.ratings(Filters()), {})
    assert "hf:org/loner: no rating: it shares no task with another model (0 battles)." in note
    assert agent_main(["ratings", "--dir", str(arena.root), "--json"]) == 0
    rated = {item["model"]: item for item in json.loads(capsys.readouterr().out)}
    assert rated.keys() == board.keys() and sum(item["rating"] is not None for item in rated.values()) >= 3
    for model, item in rated.items():
        line = board[model]
        assert (line["arena"], line["arena_low"], line["arena_high"], line["arena_rank"]) == pytest.approx(
            (item["rating"], item["ci_low"], item["ci_high"], item["rank"]), abs=0.05), model
    # What the page draws: the same number, to the point.
    archive = arena.ctx.archive
    table = board_table(archive.board(Filters()))  # the arena figures joined in the read side
    shown = dict(zip(table["model"], table["arena"], strict=True))
    for model, item in rated.items():
        if item["rating"] is None:
            assert pd.isna(shown[model]), model  # a blank cell
        else:
            assert shown[model] == round(board[model]["arena"]) and abs(shown[model] - item["rating"]) <= 0.55
