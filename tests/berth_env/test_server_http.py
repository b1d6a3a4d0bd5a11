"""The berth server's HTTP routes: health, the OpenEnv Task API and the viewer JSON (PORTSIM_SPEC §6.8)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.mcp_client import MCPToolClient

from berth_env import load_pack
from testkit.servers import berth_server

PACK = load_pack()
EVAL = PACK.split("eval")
ROOT = Path(__file__).resolve().parents[2]
SUMMARY_KEYS = ["task_id", "split", "quay", "terminal", "week", "difficulty", "ships", "disruptions"]
# The self-contained toy task of PORTSIM_SPEC §8.6, served as an extra pack through --tasks-dir.
TOY_TASK = {
    "task_id": "toy-1", "split": "test", "quay": "T", "terminal": "Toy Terminal", "first_section": 1,
    "last_section": 10, "section_m": 42.0, "week": 6, "week_start_utc": "2024-02-05T00:00:00Z",
    "ships": [{"id": 0, "name": "ALFA", "imo": "0", "length_m": 200.0, "sections": 3, "arrival": 0, "handling": 4,
               "planned_hour": 5, "planned_section": 1, "due": 9, "from_port": "", "to_port": "", "beam_m": None,
               "draught_m": None, "workload": 8, "min_cranes": 1, "max_cranes": 3, "std_cranes": 2, "weight": 1,
               "berth_deadline": None, "deadline_penalty": 0}],
    "blocks": [], "notices": [], "disruptions": [], "difficulty": "toy",
    "reference": {"naive_cost": 300, "optimal_cost": 27, "naive_plan": [], "optimal_plan": []},
    "rules": {"crane_pool": 6, "crane_rate": 28, "max_moves_per_hour": 2, "crane_outages": [], "no_moves": [],
              "reward": 3, "gap_k": 100},
}


@pytest.fixture
def http(env_url: str) -> Any:
    with httpx.Client(base_url=env_url, timeout=30) as client:
        yield client


def test_health_routes(http: httpx.Client) -> None:
    assert http.get("/health").status_code == 200
    healthz = http.get("/healthz")
    assert healthz.status_code == 200
    body = healthz.json()
    assert body["status"] == "ok" and body["tasks"]["eval"] == 50


def test_metadata_and_schema(http: httpx.Client) -> None:
    assert http.get("/metadata").json()["name"] == "berth_planning"
    state_schema = http.get("/schema").json()["state"]["properties"]
    for key in ("episode_id", "step_count", "task_id", "split", "checks_used", "tool_calls", "done", "reward",
                "grade"):
        assert key in state_schema


# --------------------------------------------------------------------------------------------------- Task API


def test_task_api_splits_and_counts(http: httpx.Client) -> None:
    splits = http.get("/berth_planning/splits").json()
    assert {"name": "eval", "type": "eval", "num_tasks": 50} in splits
    assert http.post("/berth_planning/num_tasks", json={"split": "eval"}).json() == {"num_tasks": 50}
    assert http.post("/berth_planning/num_tasks", json={"split": "nope"}).json() == {"num_tasks": 0}
    assert http.get("/list_environments").json() == ["berth_planning"]
    assert http.get("/other_env/splits").status_code == 404


def test_task_api_get_task(http: httpx.Client) -> None:
    task = http.post("/berth_planning/task", json={"split": "eval", "index": 3}).json()["task"]
    assert task["task_id"] == EVAL[3]["task_id"]
    assert "reference" not in task and len(task["ships"]) == len(EVAL[3]["ships"])
    assert task == json.loads(json.dumps(PACK.public(EVAL[3])))
    assert http.post("/berth_planning/task", json={"split": "eval", "index": 50}).status_code == 400
    assert http.post("/berth_planning/task", json={"split": "nope", "index": 0}).status_code == 400


def test_task_api_ranges(http: httpx.Client) -> None:
    def ids(**body: Any) -> list[str]:
        tasks = http.post("/berth_planning/task_range", json={"split": "eval", **body}).json()["tasks"]
        assert all("reference" not in task for task in tasks)
        return [task["task_id"] for task in tasks]

    all_ids = [task["task_id"] for task in EVAL]
    assert ids(start=2, stop=5) == all_ids[2:5]
    assert ids() == all_ids
    assert ids(stop=0) == []
    assert ids(start=-3, stop=2) == all_ids[:2]
    assert ids(start=48, stop=99) == all_ids[48:]
    listed = http.post("/berth_planning/tasks", json={"split": "eval"}).json()["tasks"]
    assert [task["task_id"] for task in listed] == all_ids


# ------------------------------------------------------------------------------------------------- viewer JSON


def test_api_tasks(http: httpx.Client) -> None:
    summaries = http.get("/api/tasks").json()
    assert len(summaries) == 50
    first = summaries[0]
    assert list(first) == SUMMARY_KEYS
    task = EVAL[0]
    assert first["task_id"] == task["task_id"] and first["ships"] == len(task["ships"])
    assert first["disruptions"] == [d["type"] for d in task["disruptions"]]
    assert "reference" not in json.dumps(summaries)


def test_api_task_and_reference(http: httpx.Client) -> None:
    task_id = EVAL[5]["task_id"]
    public = http.get(f"/api/tasks/{task_id}").json()
    assert "reference" not in public and public["ships"] and public["task_id"] == task_id
    reference = http.get(f"/api/tasks/{task_id}/reference").json()
    assert reference["optimal_cost"] < reference["naive_cost"]
    assert reference == EVAL[5]["reference"]
    for path in ("/api/tasks/no-such-task", "/api/tasks/no-such-task/reference"):
        missing = http.get(path)
        assert missing.status_code == 404 and "unknown task" in missing.json()["detail"]


def test_api_episodes_follow_a_played_episode(env_url: str, http: httpx.Client) -> None:
    task = EVAL[0]
    episode_id = "http-viewer-probe"
    with MCPToolClient(env_url).sync() as client:
        client.reset(task_id=task["task_id"], episode_id=episode_id)
        client.step(CallToolAction(tool_name="get_situation", arguments={}))
        client.step(CallToolAction(tool_name="check_plan", arguments={"plan": json.dumps(task["reference"]["naive_plan"])}))
        client.step(CallToolAction(tool_name="check_plan", arguments={"plan": [{"ship": "X", "berth_hour": 1,
                                                                                "section": 2}]}))
        live = next(e for e in http.get("/api/episodes").json() if e["episode_id"] == episode_id)
        assert (live["task_id"], live["done"], live["checks"], live["tool_calls"]) == (task["task_id"], False, 1, 3)
        assert "steps" not in live
        client.step(CallToolAction(tool_name="submit_plan", arguments={"plan": task["reference"]["optimal_plan"]}))
    detail = http.get(f"/api/episodes/{episode_id}").json()
    assert list(detail) == ["episode_id", "task_id", "started", "done", "end_reason", "steps", "grade"]
    assert (detail["done"], detail["end_reason"], detail["grade"]["reward"]) == (True, "submitted", 1.0)
    assert time.strptime(detail["started"], "%Y-%m-%dT%H:%M:%SZ")
    steps = detail["steps"]
    assert [(s["turn"], s["tool"]) for s in steps] == [(2, "check_plan"), (3, "check_plan"), (4, "submit_plan")]
    assert steps[0]["plan"] == task["reference"]["naive_plan"]  # canonical list, decoded from the JSON string
    assert steps[0]["result"]["cost"] == task["reference"]["naive_cost"]
    assert steps[1]["plan"] is not None and "invalid arguments" in steps[1]["result"]["error"]
    assert steps[2]["result"] == {"submitted": True, "feasible": True, "reward": 1.0,
                                  "cost": task["reference"]["optimal_cost"], "delay_cost": detail["grade"]["delay_cost"],
                                  "moves": detail["grade"]["moves"]}
    assert http.get("/api/episodes/never-played").status_code == 404


def test_http_mcp_lists_the_tools(http: httpx.Client) -> None:
    reply = http.post("/mcp", json={"jsonrpc": "2.0", "method": "tools/list", "params": {}, "id": 1}).json()
    assert sorted(tool["name"] for tool in reply["result"]["tools"]) == ["check_plan", "get_situation", "submit_plan"]


# ------------------------------------------------------------------------------------------- python -m berth_env


def test_module_entry_point_serves_extra_packs(tmp_path: Path, warm_python) -> None:
    pack = tmp_path / "toy"
    pack.mkdir()
    (pack / "tasks.jsonl").write_text(json.dumps(TOY_TASK) + "\n")
    with berth_server(pack, python=warm_python) as url:
        assert httpx.get(f"{url}/healthz", timeout=2).json() == {"status": "ok", "tasks": {"eval": 50, "test": 1}}
        with MCPToolClient(url).sync() as client:
            metadata = client.reset(split="test", index=0).observation.metadata
            assert metadata["task_id"] == "toy-1" and "Toy Terminal" in metadata["situation"]


def test_start_server_runs_a_separate_server_and_stops_it() -> None:
    from berth_env.embedded import embedded_url, start_server

    running = start_server()
    try:
        assert running.url != embedded_url() and embedded_url() == embedded_url()
        assert httpx.get(f"{running.url}/healthz", timeout=5).json()["status"] == "ok"
    finally:
        running.stop()
    assert not running.thread.is_alive()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{running.url}/healthz", timeout=2)
