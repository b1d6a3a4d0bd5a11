"""Playing by hand: live.hand_play against the embedded server over a real WebSocket, the records it saves through
the real store, the plan table, and the `/play_*` API through gradio_client against the launched app (Browse and the
leaderboard then show the hand-played rollout as `human`)."""

from __future__ import annotations

import json
import time

import pytest
from gradio_client import Client

from agent.session import EnvError, EnvSession
from berth_env import load_pack
from berth_env.baselines import published_plan
from berth_env.embedded import start_server
from live.hand_play import PlayError, PlayRegistry, human_model
from rollouts.replay import record_events
from rollouts.schema import validate_record
from rollouts.store import RolloutStore
from testkit.boards import board_of
from testkit.episodes import TASK_ID
from viewer.play.plan_table import TableError, json_rows, plan_rows, rows_plan


@pytest.fixture
def store(tmp_path):
    with RolloutStore(tmp_path / "rollouts") as store:
        yield store


@pytest.fixture
def plays(store, env_url):
    registry = PlayRegistry(store.save, env_url=env_url, max_open=3, max_per_visitor=2)
    yield registry
    registry.close()


def reference(kind: str, task_id: str = TASK_ID) -> list[dict]:
    return load_pack().get(task_id)["reference"][kind]


def test_a_check_then_the_optimum_earns_1_and_is_saved_as_a_human_rollout(plays, store):
    episode = plays.start(TASK_ID, owner="page-a")
    assert episode.checks_left == episode.max_checks == 10
    checked = plays.check(episode.episode_id, "page-a", published_plan(load_pack().get(TASK_ID)))
    assert checked["feasible"] is False and checked["violations"] and checked["checks_left"] == 9
    assert store.load(episode.episode_id) is None  # nothing saved while it is open
    submitted = plays.submit(episode.episode_id, "page-a", reference("optimal_plan"))
    assert submitted == {"submitted": True, "feasible": True, "reward": 1.0, "cost": 87, "delay_cost": 72, "moves": 3}

    record = validate_record(store.load(episode.episode_id))
    assert record["model"] == "human" and record["source"] == "space" and record["env_url"] == env_url_of(plays)
    assert record["reward"] == 1.0 and record["end_reason"] == "submitted" and record["turns"] == 2
    assert record["usage"] == {"input_tokens": 0, "output_tokens": 0} and record["errors"] == []
    assert record["task"]["optimal_cost"] == 87 and record["task"]["split"] == "eval"
    assert [s["tool"] for s in record["steps"]] == ["check_plan", "submit_plan"]
    assert record["steps"][1]["plan"] == reference("optimal_plan") and record["final"]["grade"]["cost"] == 87
    roles = [m["role"] for m in record["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert "check_plan" in record["messages"][0]["content"]  # the rules the model would read
    # Browse's transcript shows each check and the submit as tool calls with their answers.
    events = record_events(record)
    assert [e["name"] for e in events if e["type"] == "tool_call"] == ["check_plan", "submit_plan"]
    results = [e for e in events if e["type"] == "tool_result"]
    assert results[-1]["done"] is True and results[-1]["reward"] == 1.0
    # The index and the leaderboard rank it as its own row.
    [row] = store.rows()
    assert row["model"] == "human" and row["reward"] == 1.0 and row["checks"] == 1 and row["turns"] == 2
    [line] = board_of(store.rows())
    assert line["model"] == "human" and line["mean_reward"] == 1.0

    with pytest.raises(PlayError, match="is over"):
        plays.check(episode.episode_id, "page-a", reference("optimal_plan"))


def env_url_of(plays: PlayRegistry) -> str:
    return plays.env_url


def test_only_the_owner_plays_an_episode_and_the_caps_hold(plays):
    mine = plays.start(TASK_ID, owner="page-a")
    with pytest.raises(PlayError, match="another session"):
        plays.check(mine.episode_id, "page-b", reference("naive_plan"))
    with pytest.raises(PlayError, match="another session"):
        plays.submit(mine.episode_id, "page-b", reference("optimal_plan"))
    plays.start(TASK_ID, owner="page-a")
    with pytest.raises(PlayError, match="limit is 2"):
        plays.start(TASK_ID, owner="page-a")
    plays.start(TASK_ID, owner="page-b")
    with pytest.raises(PlayError, match="full"):
        plays.start(TASK_ID, owner="page-c")
    with pytest.raises(PlayError, match="not served"):
        PlayRegistry(lambda r: None, env_url=plays.env_url).start("dock-99Z-w01x1-none-0", owner="x")
    with pytest.raises(PlayError, match="malformed"):
        plays.start("../etc/passwd", owner="page-d")
    with pytest.raises(PlayError, match="No open episode"):
        plays.check("0123456789ab", "page-a", [])
    assert plays.open_count() == 3 and plays.open_count("page-a") == 2


def test_an_abandoned_episode_is_saved_once_played_and_dropped_if_not(store, env_url):
    plays = PlayRegistry(store.save, env_url=env_url, idle_s=0.5)
    try:
        played = plays.start(TASK_ID, owner="page-a")
        plays.check(played.episode_id, "page-a", reference("naive_plan"))
        untouched = plays.start(TASK_ID, owner="page-b")
        deadline = time.monotonic() + 10
        while plays.open_count() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert plays.open_count() == 0  # the reaper closed both
        record = store.load(played.episode_id)
        assert record["end_reason"] == "interrupted" and record["turns"] == 1 and record["reward"] == 0.0
        assert record["final"]["submitted"] is False
        assert store.load(untouched.episode_id) is None  # looking is not a rollout
        with pytest.raises(PlayError, match="is over"):
            plays.check(played.episode_id, "page-a", [])

        moved_on = plays.start(TASK_ID, owner="page-c")
        plays.check(moved_on.episode_id, "page-c", reference("naive_plan"))
        assert [e.episode_id for e in plays.abandon("page-c")] == [moved_on.episode_id]
        assert store.load(moved_on.episode_id)["end_reason"] == "stopped"
    finally:
        plays.close()


def test_a_plan_the_tools_refuse_costs_no_check_and_the_episode_goes_on(plays):
    episode = plays.start(TASK_ID, owner="page-a")
    refused = plays.check(episode.episode_id, "page-a", [{"ship": "zero", "berth_hour": 1, "section": 2}])
    assert "error" in refused
    assert plays.check(episode.episode_id, "page-a", reference("naive_plan"))["checks_left"] == 9
    answer = plays.submit(episode.episode_id, "page-a", [{"ship": 0}])
    assert "error" in answer and not episode.done
    assert plays.submit(episode.episode_id, "page-a", reference("naive_plan"))["reward"] < 1.0 and episode.done


def test_a_plan_over_the_size_limit_is_refused_and_leaves_nothing(plays, store):
    """Before, the plan went into the record before the server answered, with no size limit: a 1 MB plan became
    a 2.1 MB public rollout, and a 16 MB one the server's frame limit refused was saved all the same."""
    episode = plays.start(TASK_ID, owner="page-a")
    before = json.dumps(episode.record)
    huge = reference("naive_plan") * 6000  # 1 MB
    for call in (plays.check, plays.submit):
        with pytest.raises(PlayError, match="too large: this app takes at most 64 KB"):
            call(episode.episode_id, "page-a", huge)
    with pytest.raises(PlayError, match="too large"):
        plays.check(episode.episode_id, "page-a", [{"ship": 0, "note": "x" * (16 << 20)}])  # 16 MB
    assert json.dumps(episode.record) == before and not episode.done  # no call, no error, no turn
    assert plays.abandon("page-a") == [episode]
    assert store.load(episode.episode_id) is None and store.rows() == []  # nothing played, nothing saved

    # Beside answered calls: the record holds exactly what the server answered for.
    played = plays.start(TASK_ID, owner="page-b")
    plays.check(played.episode_id, "page-b", reference("naive_plan"))
    with pytest.raises(PlayError, match="too large"):
        plays.submit(played.episode_id, "page-b", huge)
    plays.submit(played.episode_id, "page-b", reference("optimal_plan"))
    record = store.load(played.episode_id)
    assert record["turns"] == 2 and [s["tool"] for s in record["steps"]] == ["check_plan", "submit_plan"]
    assert len(json.dumps(record)) < 200_000 and record["errors"] == []


def test_the_websocket_session_bounds_what_it_sends_and_what_it_reads(env_url, monkeypatch):
    import agent.session

    session = EnvSession(env_url)
    try:
        session.reset(TASK_ID, "wsbound01")
        refused = session.call("check_plan", {"plan": reference("naive_plan") * 6000})
        assert refused.is_error and "larger than 64 KB; not sent" in refused.text and not refused.done
        checked = json.loads(session.call("check_plan", {"plan": reference("naive_plan")}).text)
        assert checked["checks_left"] == 9  # the server never saw the refused one
    finally:
        session.close()
    monkeypatch.setattr(agent.session, "MESSAGE_MAX_BYTES", 4096)  # the reset's answer is larger (5 KB)
    small = EnvSession(env_url)
    try:
        with pytest.raises(EnvError, match=r"message too big\) frame with \d+ bytes exceeds limit of 4096"):
            small.reset(TASK_ID, "wsbound02")
    finally:
        small.close()


def test_a_call_the_server_never_answers_is_not_recorded_and_the_answered_ones_are_saved(store):
    # A server of its own in this process (the shared embedded one must stay up): stopped, it answers nothing,
    # as a killed child process would, without a child's start-up (about 7 s, most of it imports).
    server = start_server()
    plays = PlayRegistry(store.save, env_url=server.url)
    episode = plays.start(TASK_ID, owner="page-a")
    plays.check(episode.episode_id, "page-a", reference("naive_plan"))
    server.stop()
    assert not server.thread.is_alive()
    # The server is gone: this check is never answered.
    with pytest.raises(PlayError, match=r"The berth server failed.*saved as it stands"):
        plays.check(episode.episode_id, "page-a", reference("optimal_plan"))
    record = store.load(episode.episode_id)
    assert record["end_reason"] == "error" and record["turns"] == 1 and len(record["steps"]) == 1
    assert record["errors"][0].startswith("check_plan: ")
    assert json.dumps(reference("optimal_plan")) not in json.dumps(record)  # the unanswered plan is not kept
    plays.close()


def test_the_caps_count_the_visitor_not_the_session(plays):
    """Before, the per-visitor cap counted Gradio's session hash, which the caller picks: fresh hashes from one
    address took every slot."""
    plays.start(TASK_ID, owner="session-1", visitor="ip:203.0.113.5")
    plays.start(TASK_ID, owner="session-2", visitor="ip:203.0.113.5")
    with pytest.raises(PlayError, match="limit is 2 per visitor"):
        plays.start(TASK_ID, owner="session-3", visitor="ip:203.0.113.5")
    assert plays.open_count("ip:203.0.113.5") == 2
    other = plays.start(TASK_ID, owner="session-4", visitor="ip:198.51.100.7")  # another visitor still plays
    with pytest.raises(PlayError, match="another session"):  # and who may play an episode is still its session
        plays.check(other.episode_id, "session-1", reference("naive_plan"))


def test_human_model_names():
    assert human_model() == "human" and human_model("") == "human"
    assert human_model("alice-b") == "human:alice-b"
    assert human_model("ev<il>/x y") == "human:evilxy"


# -- the plan table ------------------------------------------------------------------------------------------------

def test_the_table_round_trips_a_plan_and_names_the_cell_to_fix():
    task = load_pack().get(TASK_ID)
    rows = plan_rows(task, reference("optimal_plan"))
    assert len(rows) == len(task["ships"]) and rows[3][0] == f"3 · {task['ships'][3]['name']}"
    assert rows_plan(task, rows) == reference("optimal_plan")
    assert rows_plan(task, {"headers": [], "data": rows}) == reference("optimal_plan")
    typed = [list(r) for r in rows]
    typed[2][2] = "12.0"  # a browser may hand numbers over as text
    typed[1][3] = None  # an empty cranes cell: the standard count
    plan = rows_plan(task, typed)
    assert plan[2]["berth_hour"] == 12 and "cranes" not in plan[1]
    typed[4][2] = "soon"
    with pytest.raises(TableError, match=r"row 5 \(ship 4 .*\): berth hour must be a whole number, not 'soon'"):
        rows_plan(task, typed)
    typed[4][2], typed[6][1] = 10, 2.5
    with pytest.raises(TableError, match=r"row 7.*section must be a whole number"):
        rows_plan(task, typed)
    with pytest.raises(TableError, match="empty"):
        rows_plan(task, [])
    assert json_rows(task, '```json\n{"plan": ' + str(reference("optimal_plan")).replace("'", '"') + "}\n```") == rows
    with pytest.raises(TableError, match=r"not valid JSON|cannot"):
        json_rows(task, "[{")


# -- the API -------------------------------------------------------------------------------------------------------

def test_the_play_api_plays_to_a_saved_human_rollout_shown_in_browse(arena):
    client = Client(arena.url, verbose=False)
    started = client.predict(TASK_ID, api_name="/play_start")
    episode_id = started["episode_id"]
    assert started["plan"] == published_plan(load_pack().get(TASK_ID)) and started["checks_left"] == 10
    checked = client.predict(episode_id, started["plan"], api_name="/play_check")
    assert checked["feasible"] is False and checked["checks_left"] == 9
    assert any(v["ship"] == 5 for v in checked["violations"])

    stranger = Client(arena.url, verbose=False)
    with pytest.raises(Exception, match="another session"):
        stranger.predict(episode_id, reference("optimal_plan"), api_name="/play_submit")

    submitted = client.predict(episode_id, reference("optimal_plan"), api_name="/play_submit")
    assert submitted["reward"] == 1.0 and submitted["feasible"] is True
    record = arena.ctx.store.load(episode_id)
    assert record["model"] == "human" and record["reward"] == 1.0 and record["end_reason"] == "submitted"
    with pytest.raises(Exception, match="is over"):
        client.predict(episode_id, reference("optimal_plan"), api_name="/play_check")

    rows = client.predict(api_name="/browse_rollouts", model="human", refresh=True, page_size=500)["rows"]
    assert episode_id in [r["episode_id"] for r in rows]
    board = client.predict(api_name="/browse_leaderboard", model="human")
    assert [b["model"] for b in board] == ["human"]
    assert client.predict(episode_id, api_name="/browse_record")["model"] == "human"


def test_the_play_api_refuses_a_megabyte_plan_and_saves_nothing(arena):
    client = Client(arena.url, verbose=False, headers={"X-Forwarded-For": "203.0.113.21"})
    started = client.predict(TASK_ID, api_name="/play_start")
    episode_id = started["episode_id"]
    for api_name in ("/play_check", "/play_submit"):
        with pytest.raises(Exception, match="too large"):
            client.predict(episode_id, reference("naive_plan") * 6000, api_name=api_name)
    assert arena.ctx.store.load(episode_id) is None
    assert client.predict(episode_id, started["plan"], api_name="/play_check")["checks_left"] == 9
    assert client.predict(episode_id, reference("optimal_plan"), api_name="/play_submit")["reward"] == 1.0
    record = arena.ctx.store.load(episode_id)
    assert record["turns"] == 2 and [s["tool"] for s in record["steps"]] == ["check_plan", "submit_plan"]
    assert len(json.dumps(record)) < 200_000


def test_fresh_sessions_from_one_address_share_its_play_slots(arena):
    """Each gradio_client Client is a new session: from one address they are one visitor (3 episodes open)."""
    opened = []
    for _ in range(3):
        client = Client(arena.url, verbose=False, headers={"X-Forwarded-For": "203.0.113.22"})
        opened.append((client, client.predict(TASK_ID, api_name="/play_start")["episode_id"]))
    late = Client(arena.url, verbose=False, headers={"X-Forwarded-For": "203.0.113.22"})
    with pytest.raises(Exception, match="limit is 3 per visitor"):
        late.predict(TASK_ID, api_name="/play_start")
    other = Client(arena.url, verbose=False, headers={"X-Forwarded-For": "203.0.113.23"})
    opened.append((other, other.predict(TASK_ID, api_name="/play_start")["episode_id"]))
    for client, episode_id in opened:  # end them: the module's app is shared
        client.predict(episode_id, reference("optimal_plan"), api_name="/play_submit")
