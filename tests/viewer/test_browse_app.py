"""The Browse API through `gradio_client` against the launched app: local folder, Hub dataset and upstream's Parquet
(both on testkit/fakehub.py), filters, the leaderboard, records from every source, a new rollout showing up, the Hub
going down, and only the deliberate endpoints being public."""

from __future__ import annotations

import html
import socket
import time

import httpx
import huggingface_hub.constants
import pytest
from gradio_client import Client

from rollouts.sample_size import MIN_RANKED
from rollouts.store import RolloutStore
from testkit.app import launched_app
from testkit.fakehub import running_fakehub
from testkit.published import (
    UPSTREAM_CARD,
    UPSTREAM_FILE,
    folder_files,
    parquet_bytes,
    publish,
    upstream_table,
)
from testkit.records import make_records

TOKEN = "hf_browse_app_token"
DATASET = "team/arena-rollouts"
UPSTREAM = "FineEnvs/PortSimEnv"
TASK_ID = "dock-24B-w06x1-busy-0"


@pytest.fixture(scope="module")
def data():
    records = make_records(36, seed=5)
    return {"local": records[:12], "pushed": records[8:12], "hub_only": records[12:20],
            "upstream": records[20:36]}


@pytest.fixture(scope="module")
def world(tmp_path_factory, data):
    """The app over a local folder, with our dataset and upstream's published rollouts on a fake Hub."""
    tmp = tmp_path_factory.mktemp("browse-app")
    patch = pytest.MonkeyPatch()
    with running_fakehub(token=TOKEN) as hub:
        patch.setenv("HF_ENDPOINT", hub.url)
        patch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp / "hf-cache"))
        other = RolloutStore(tmp / "other-space", writer_id="w2")
        for record in data["pushed"] + data["hub_only"]:
            other.save(record)
        publish(hub.url, DATASET, folder_files(tmp / "other-space"), token=TOKEN)
        publish(hub.url, UPSTREAM, {"README.md": UPSTREAM_CARD.encode(),
                                    UPSTREAM_FILE: parquet_bytes(upstream_table(data["upstream"]))}, token=TOKEN)
        with launched_app(tmp, records=data["local"], dataset=DATASET, public_rollouts=UPSTREAM) as app:
            client = Client(app.url, verbose=False)
            wait_loaded(client)
            yield hub, app, client
    patch.undo()


def wait_loaded(client: Client, timeout: float = 20) -> dict:
    end = time.monotonic() + timeout
    while True:
        answer = client.predict(api_name="/browse_rollouts", page_size=500)
        if not any(s["loading"] for s in answer["sources"]) or time.monotonic() > end:
            return answer
        time.sleep(0.2)


def by_id(answer: dict) -> dict[str, dict]:
    return {row["episode_id"]: row for row in answer["rows"]}


def test_rows_come_from_every_source_and_say_which(world, data):
    _, _, client = world
    answer = client.predict(api_name="/browse_rollouts", page_size=500)
    rows = by_id(answer)
    assert answer["total"] == 12 + 8 + 16 == len(rows)
    local_only = {r["episode_id"] for r in data["local"]} - {r["episode_id"] for r in data["pushed"]}
    assert {rows[i]["source"] for i in local_only} == {"local"}
    assert {rows[r["episode_id"]]["source"] for r in data["pushed"]} == {"local+hub"}
    assert {rows[r["episode_id"]]["source"] for r in data["hub_only"]} == {"hub"}
    upstream = [r for r in answer["rows"] if r["source"] == "upstream"]
    assert len(upstream) == 16 and all(r["episode_id"].startswith("up-") for r in upstream)
    assert sorted(r["reward"] for r in upstream) == sorted(r["reward"] for r in data["upstream"])
    sources = {s["name"]: s for s in answer["sources"]}
    assert (sources["local"]["rows"], sources["hub"]["rows"], sources["upstream"]["rows"]) == (12, 12, 16)
    assert not any(s["error"] for s in answer["sources"])


def test_filters_sorting_and_pages(world, data):
    _, _, client = world
    everything = data["local"] + data["hub_only"] + data["upstream"]
    storm = client.predict(api_name="/browse_rollouts", tier="storm", sort="reward", descending=False, page_size=500)
    expected = [r for r in everything if r["task"]["difficulty"] == "storm"]
    assert storm["total"] == len(expected) > 0
    assert [r["reward"] for r in storm["rows"]] == sorted(r["reward"] for r in expected)
    hub_feasible = client.predict(api_name="/browse_rollouts", source="hub", feasible="yes", page_size=500)
    assert {r["source"] for r in hub_feasible["rows"]} <= {"hub", "local+hub"} and hub_feasible["total"] > 0
    assert all(r["feasible"] for r in hub_feasible["rows"])
    pages = [client.predict(api_name="/browse_rollouts", page=n, page_size=10) for n in (1, 2, 3, 4)]
    assert [p["page"] for p in pages] == [1, 2, 3, 4] and pages[0]["pages"] == 4
    seen = [r["episode_id"] for p in pages for r in p["rows"]]
    assert len(seen) == len(set(seen)) == 36
    assert client.predict(api_name="/browse_rollouts", page=99, page_size=10)["page"] == 4


def test_bad_filter_values_come_back_as_problems(world):
    _, _, client = world
    answer = client.predict(api_name="/browse_rollouts", date_from="yesterday", reward_min="high", page_size=500)
    assert answer["total"] == 36  # the bad values are left out, not guessed
    assert any("'yesterday' is not a date" in p for p in answer["problems"])
    assert any("'high' is not a number" in p for p in answer["problems"])
    with pytest.raises(Exception, match="sort must be one of"):
        client.predict(api_name="/browse_rollouts", sort="path")


def test_leaderboard_per_model_and_on_the_same_tasks(world, data):
    _, _, client = world
    board = client.predict(api_name="/browse_leaderboard")
    everything = data["local"] + data["hub_only"] + data["upstream"]
    assert sum(row["n"] for row in board) == 36
    assert {row["model"] for row in board} == {r["model"] for r in everything}
    # Best mean first among the ranked models, then the models too small to rank (rollouts.sample_size), likewise.
    ranked = [row["n"] >= MIN_RANKED for row in board]
    assert ranked == sorted(ranked, reverse=True) and any(ranked)
    for group in (True, False):
        means = [row["mean_reward"] for row, big in zip(board, ranked, strict=True) if big is group]
        assert means == sorted(means, reverse=True)
    for row in board:
        if row["n"] >= 2:
            assert row["ci_low"] <= row["mean_reward"] <= row["ci_high"]
        else:  # one episode: no interval
            assert row["ci_low"] is row["ci_high"] is None
        assert set(row) >= {"mean_standard", "mean_busy", "mean_storm", "mean_extreme", "feasible_pct",
                            "optimal_pct", "no_submit", "median_tokens", "median_seconds"}
    two = sorted({r["model"] for r in everything})[:2]
    same = client.predict(api_name="/browse_leaderboard", model=",".join(two), same_tasks=True)
    shared = ({r["task_id"] for r in everything if r["model"] == two[0]}
              & {r["task_id"] for r in everything if r["model"] == two[1]})
    expected_n = sum(1 for r in everything if r["model"] in two and r["task_id"] in shared)
    assert sum(row["n"] for row in same) == expected_n


def test_a_models_card_in_the_api_names_what_fails(world, data):
    _, _, client = world
    board = {row["model"]: row for row in client.predict(api_name="/browse_leaderboard")}
    local = data["local"][0]["model"]
    card = client.predict(card_of=local, api_name="/browse_model_card")
    assert card["model"] == local and card["verified"] is False and board[local]["mark"] != "verified"
    assert any(reason.startswith("not every eval task played") for reason in card["failing"])
    assert card["provisional"] and "| harness |" in card["card"]
    assert card["provisional"].split(" (")[0].split()[0] == str(board[local]["tasks"])  # "<n> task(s)"
    missing = client.predict(card_of="nobody:here", api_name="/browse_model_card")
    assert missing["verified"] is False and "No model nobody:here" in missing["card"]
    with pytest.raises(Exception, match="card_of: name a model"):
        client.predict(card_of=" ", api_name="/browse_model_card")


def test_records_open_from_every_source(world, data):
    _, _, client = world
    rows = by_id(client.predict(api_name="/browse_rollouts", page_size=500))
    for original in (data["local"][0], data["pushed"][0], data["hub_only"][0]):
        record = client.predict(original["episode_id"], api_name="/browse_record")
        assert record["messages"] == original["messages"] and record["reward"] == original["reward"]
        assert record["browse_source"] == rows[original["episode_id"]]["source"]
    upstream = next(r for r in rows.values() if r["source"] == "upstream" and r["model"] == data["upstream"][3]["model"]
                    and r["task_id"] == data["upstream"][3]["task_id"])
    record = client.predict(upstream["episode_id"], api_name="/browse_record")
    assert record["steps"] == data["upstream"][3]["steps"] and record["browse_source"] == "upstream"


def test_upstream_and_hub_rollouts_have_share_pages(world, data):
    _, app, client = world
    rows = by_id(client.predict(api_name="/browse_rollouts", page_size=500))
    original = data["upstream"][3]
    upstream = next(r for r in rows.values() if r["source"] == "upstream" and r["model"] == original["model"]
                    and r["task_id"] == original["task_id"])
    for episode_id, model in ((upstream["episode_id"], original["model"]),
                              (data["hub_only"][0]["episode_id"], data["hub_only"][0]["model"])):
        page = httpx.get(f"{app.url}r/{episode_id}", timeout=60)
        assert page.status_code == 200 and "etag" in page.headers, episode_id
        assert f"<h1><bdi>{html.escape(model)}</bdi></h1>" in page.text
        assert f'<link rel="canonical" href="{app.url}r/{episode_id}">' in page.text
    image = httpx.get(f"{app.url}r/{upstream['episode_id']}.png", timeout=60)
    # A PNG whose header says 1200 x 630.
    assert image.content[:8] == b"\x89PNG\r\n\x1a\n" and image.content[16:24] == (1200).to_bytes(4, "big") + \
        (630).to_bytes(4, "big")


def test_unknown_and_malformed_ids_get_a_clear_error(world):
    _, _, client = world
    with pytest.raises(Exception, match="malformed"):
        client.predict("../../etc/passwd", api_name="/browse_record")
    with pytest.raises(Exception, match="No rollout `0123456789ab` in this Space's rollout folder"):
        client.predict("0123456789ab", api_name="/browse_record")


def test_a_rollout_played_in_the_app_shows_up_within_seconds(world):
    _, _, client = world
    updates = list(client.submit("baseline:greedy", TASK_ID, 12, 24000, "embedded", api_name="/run"))
    assert updates[-1]["state"] == "finished" and updates[-1]["saved"] is True
    episode_id = updates[-1]["episode_id"]
    finished = time.monotonic()
    while episode_id not in by_id(client.predict(api_name="/browse_rollouts", page_size=5)):
        assert time.monotonic() - finished < 5, "the new rollout did not show up"
        time.sleep(0.2)
    row = by_id(client.predict(api_name="/browse_rollouts", page_size=5))[episode_id]
    assert row["source"] == "local" and row["model"] == "baseline:greedy" and row["played_in"] == "space"


def test_the_hub_going_down_is_reported_and_the_rows_stay(world):
    hub, _, client = world
    hub.down()
    try:
        start = time.monotonic()
        answer = client.predict(api_name="/browse_rollouts", refresh=True, page_size=500)
        assert time.monotonic() - start < 10
    finally:
        hub.up()
    sources = {s["name"]: s for s in answer["sources"]}
    assert "cannot reach the Hub" in sources["hub"]["error"] and "cannot reach the Hub" in sources["upstream"]["error"]
    assert answer["total"] >= 36  # the last rows loaded are kept
    answer = client.predict(api_name="/browse_rollouts", refresh=True, page_size=500)
    assert not any(s["error"] for s in answer["sources"])


def test_an_app_started_with_the_hub_unreachable_shows_its_own_rollouts(tmp_path, monkeypatch, data):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed}")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    with launched_app(tmp_path, records=data["local"][:3], dataset=DATASET, public_rollouts=UPSTREAM) as app:
        client = Client(app.url, verbose=False)
        start = time.monotonic()
        answer = wait_loaded(client)
        assert time.monotonic() - start < 10
    assert answer["total"] == 3
    sources = {s["name"]: s for s in answer["sources"]}
    assert sources["local"]["rows"] == 3 and sources["local"]["error"] is None
    assert "cannot reach the Hub" in sources["hub"]["error"]
    assert "cannot reach the Hub" in sources["upstream"]["error"]


def test_only_the_deliberate_endpoints_are_public(world):
    _, _, client = world
    api = client.view_api(print_info=False, return_format="dict")
    names = set(api["named_endpoints"])
    browse = {"/browse_rollouts", "/browse_leaderboard", "/browse_record", "/browse_model_card", "/flag_step",
              "/hide_flag"}
    assert browse <= names
    # The Run tab's, the Arena's and the Play tab's, nothing else.
    assert names - browse <= {"/run", "/rollout", "/stop", "/arena_start", "/arena_match", "/arena_vote",
                              "/arena_stop", "/play_start", "/play_check", "/play_submit"}
    assert not api["unnamed_endpoints"]
