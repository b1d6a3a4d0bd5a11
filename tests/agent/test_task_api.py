"""The one Task API client (agent/task_api.py) and the one full-task lookup (agent.tasks.task_for), against real
berth servers: the embedded one, and a child process serving an extra pack."""

from __future__ import annotations

import pytest

import testkit.servers
from agent.task_api import TaskAPI, TaskAPIError, valid_task_id
from agent.tasks import CatalogError, remote_catalog, task_for
from berth_env import load_pack
from testkit.servers import berth_server, free_port
from tests.grader_helpers import TOY_TASK_LINE

TASK_ID = "dock-24B-w06x1-busy-0"


def test_splits_tasks_and_one_task_as_the_server_shows_them(env_url):
    with TaskAPI(env_url) as api:
        assert api.splits() == ["eval"]
        listed = api.tasks("eval")
        assert [t["task_id"] for t in listed] == [t["task_id"] for t in load_pack().split("eval")]
        assert all("reference" not in t for t in listed)  # public views
        one = api.task(TASK_ID)
        assert one == next(t for t in listed if t["task_id"] == TASK_ID)
        assert api.task("dock-00X-w01x1-none-0") is None  # not on this server
        assert api.tasks("nope") == []
    with TaskAPI(env_url.replace("http://", "ws://") + "/") as api:  # the form an OpenEnv client URL takes
        assert api.task(TASK_ID)["task_id"] == TASK_ID


@pytest.mark.parametrize("task_id", ["../healthz", "a/b", "", "..", ".", "x" * 129, "dock\n", "dock?x=1", "é", 7])
def test_an_unsafe_task_id_never_reaches_a_url(task_id):
    assert not valid_task_id(task_id)
    with TaskAPI("http://127.0.0.1:9") as api, pytest.raises(ValueError, match="must be 1-128 letters"):
        api.task(task_id)  # refused before any request: nothing listens on port 9


def test_failures_are_task_api_errors_naming_the_server_and_the_question(env_url):
    dead = f"http://127.0.0.1:{free_port()}"
    with TaskAPI(dead, timeout_s=2) as api, pytest.raises(TaskAPIError, match=f"the split list from {dead}: "):
        api.splits()
    with TaskAPI(env_url + "/not-a-server") as api, pytest.raises(TaskAPIError, match="404"):
        api.tasks("eval")
    with pytest.raises(CatalogError, match=dead):
        remote_catalog(dead, timeout_s=2)


def test_the_remote_catalog_lists_every_task_grouped_by_tier(env_url):
    choices = remote_catalog(env_url)
    assert len(choices) == 50 and {c.split for c in choices} == {"eval"}
    tiers = [c.difficulty for c in choices]
    assert tiers == sorted(tiers, key=["standard", "busy", "storm", "extreme"].index)


def test_task_for_prefers_the_pack_and_asks_no_server_without_one():
    full = task_for(TASK_ID, "http://127.0.0.1:9")  # the pack has it: no request is made
    assert full["reference"]["optimal_cost"] == 87
    assert task_for("toy-1") is None
    assert task_for("../etc", "http://127.0.0.1:9") is None


def test_task_for_reads_a_remote_public_task_and_never_keeps_a_failure(tmp_path, monkeypatch, warm_python):
    pack = tmp_path / "toy"
    pack.mkdir()
    (pack / "tasks.jsonl").write_text(TOY_TASK_LINE + "\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    assert task_for("toy-1", url) is None  # nobody listens yet
    monkeypatch.setattr(testkit.servers, "free_port", lambda: port)
    with berth_server(pack, python=warm_python) as started:
        assert started == url
        remote = task_for("toy-1", url)  # the failure above was not kept
        assert remote["task_id"] == "toy-1" and "reference" not in remote
        assert task_for("toy-2", url) is None
    assert task_for("toy-1", url) == remote  # a task found is kept: the server is gone now
