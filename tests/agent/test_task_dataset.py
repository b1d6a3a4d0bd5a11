"""The tasks dataset (catalog/task_dataset.py) against testkit/fakehub.py with the real huggingface_hub: every checked
task offered and the broken ones left out with a log line, the embedded server serving tasks that arrived after it
started, the cache reused across restarts (no download, no grading), the offline fall-back, bounded waits, the CLI.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from agent.session import EnvSession
from berth_env import grade, greedy_plan, load_pack
from catalog.task_api import TaskAPI
from catalog.task_dataset import TaskDataset, tasks_status, uninstall
from catalog.tasks import embedded_catalog, filter_choices
from testkit.fakehub import running_fakehub
from testkit.task_hub import REPO, TRAIN_COUNT, TRAIN_TASK, published_dataset

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def hub():
    with running_fakehub() as hub:
        yield hub


@pytest.fixture(autouse=True)
def bundled_only_after():
    """The served tasks are process-wide: every test leaves the bundled ones alone again."""
    yield
    uninstall()


def loader(hub, cache: Path, **options) -> TaskDataset:
    return TaskDataset(REPO, cache_dir=cache, endpoint=hub.url, **options)


def test_every_checked_task_is_offered_and_each_broken_one_left_out_with_one_log_line(tmp_path, hub, env_url,
                                                                                       caplog):
    published = published_dataset(hub)
    with caplog.at_level(logging.WARNING, logger="catalog.task_dataset"):
        status = loader(hub, tmp_path).load()
    assert status.state == "ready" and status.revision == published.revision
    assert status.splits == {"eval": 50, "train": TRAIN_COUNT}
    assert status.text.startswith(f"{50 + TRAIN_COUNT} tasks (50 eval · {TRAIN_COUNT} train) from {REPO}")
    assert "2 left out" in status.text and set(status.left_out) == set(published.broken)
    served = [t["task_id"] for t in load_pack().tasks]
    assert sorted(served) == sorted(published.offered)
    assert [t["task_id"] for t in load_pack().split("train")] == published.train_ids  # the file's order
    for task_id, why in published.broken.items():
        lines = [r.getMessage() for r in caplog.records if task_id in r.getMessage()]
        assert len(lines) == 1 and why in lines[0], lines
    # A served train task carries its checked reference: its optimum grades 1.0.
    task = load_pack().get(TRAIN_TASK)
    assert task["split"] == "train" and grade(task, task["reference"]["optimal_plan"])["reward"] == 1.0
    # The catalog offers them, and the filters find them.
    choices = embedded_catalog()
    assert len(choices) == 50 + TRAIN_COUNT
    train = filter_choices(choices, split="train")
    assert len(train) == TRAIN_COUNT and all(c.optimal_cost is not None for c in train)
    assert all(c.ships <= 20 for c in filter_choices(choices, split="train", ships="≤ 20"))


def test_the_embedded_server_serves_tasks_that_arrived_after_it_started(tmp_path, hub, env_url):
    with TaskAPI(env_url) as api:
        assert api.splits() == ["eval"]  # started with the bundled tasks only
    published_dataset(hub)
    loader(hub, tmp_path).load()
    with TaskAPI(env_url) as api:
        assert sorted(api.splits()) == ["eval", "train"]
        assert [t["task_id"] for t in api.tasks("train")][:1] == [TRAIN_TASK]
        assert api.task(TRAIN_TASK) is not None and "reference" not in api.task(TRAIN_TASK)
    session = EnvSession(env_url)
    try:
        metadata = session.reset(TRAIN_TASK, "trainplay01")
        assert metadata["task_id"] == TRAIN_TASK and metadata["split"] == "train"
        plan = load_pack().get(TRAIN_TASK)["reference"]["optimal_plan"]
        outcome = session.call("submit_plan", {"plan": plan})
        assert outcome.done and outcome.reward == 1.0
    finally:
        session.close()


def test_a_restart_neither_downloads_nor_grades_again(tmp_path, hub, monkeypatch):
    published_dataset(hub)
    loader(hub, tmp_path).load()
    downloads = len(hub.hits("resolve"))
    assert downloads >= 2

    # A restart: the same cache folder, a new loader. One probe, no download, no grading.
    import catalog.task_verdicts as verdicts_module

    graded: list[str] = []
    real = verdicts_module.reference_problem
    monkeypatch.setattr(verdicts_module, "reference_problem", lambda task: graded.append(task["task_id"]) or
                        real(task))
    started = time.monotonic()
    status = loader(hub, tmp_path).load()
    assert time.monotonic() - started < 5
    assert status.state == "ready" and status.total == 50 + TRAIN_COUNT
    assert len(hub.hits("resolve")) == downloads and graded == []
    assert len(hub.hits("info")) >= 2  # the probe asked for the revision each time

    # With its pack gone, the cached verdicts still stand in for grading: a verdict the test plants is obeyed.
    cache = json.loads((tmp_path / "verdicts.json").read_text())
    for verdicts in cache["files"].values():
        if TRAIN_TASK in verdicts:
            verdicts[TRAIN_TASK] = "planted by the test"
    cache["packs"] = {}
    (tmp_path / "verdicts.json").write_text(json.dumps(cache))
    status = loader(hub, tmp_path).load()
    assert TRAIN_TASK in status.left_out and graded == []
    with pytest.raises(KeyError):
        load_pack().get(TRAIN_TASK)


def test_with_the_hub_down_a_restart_serves_the_cached_copy(tmp_path, hub):
    published_dataset(hub)
    loader(hub, tmp_path).load()
    hub.down()
    started = time.monotonic()
    status = loader(hub, tmp_path, probe_timeout=2).load()
    assert time.monotonic() - started < 5
    assert status.state == "ready" and status.total == 50 + TRAIN_COUNT and "cached copy" in status.text
    assert "the Hub" in (status.detail or "")
    assert load_pack().get(TRAIN_TASK)["split"] == "train"


@pytest.mark.parametrize("mode", ["refuse", "close"])
def test_offline_without_a_cache_the_bundled_eval_tasks_serve_at_once(tmp_path, hub, mode):
    published_dataset(hub)
    hub.down(mode)
    started = time.monotonic()
    status = loader(hub, tmp_path, probe_timeout=2).load()
    assert time.monotonic() - started < 5
    assert status.state == "offline" and status.text == "offline: the 50 bundled eval tasks"
    assert REPO in status.detail
    assert len(load_pack().tasks) == 50 and load_pack().splits() == ["eval"]


def test_a_hub_that_never_answers_is_given_up_after_the_probe_timeout(tmp_path):
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        dataset = TaskDataset(REPO, cache_dir=tmp_path, endpoint=f"http://127.0.0.1:{silent.getsockname()[1]}",
                              probe_timeout=1.0)
        started = time.monotonic()
        dataset.start()
        assert tasks_status().state in ("loading", "offline")  # start() returned without waiting
        status = dataset.wait(timeout=10)
        assert time.monotonic() - started < 6
    assert status.state == "offline" and "cannot reach the Hub" in status.detail


def test_offline_mode_never_touches_the_network(tmp_path, hub, monkeypatch):
    published_dataset(hub)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    before = len(hub.requests)
    status = loader(hub, tmp_path).load()
    assert status.state == "offline" and "HF_HUB_OFFLINE" in status.detail
    assert len(hub.requests) == before


def test_a_new_revision_replaces_the_served_tasks_and_its_old_pack(tmp_path, hub):
    published_dataset(hub, train_count=5)
    loader(hub, tmp_path).load()
    [old_pack] = [p for p in (tmp_path / "packs").iterdir() if not p.name.startswith(".")]
    published_dataset(hub, train_count=8)
    status = loader(hub, tmp_path).load()
    assert status.splits == {"eval": 50, "train": 8}
    packs = [p for p in (tmp_path / "packs").iterdir() if not p.name.startswith(".")]
    assert len(packs) == 1 and packs[0] != old_pack
    manifest = json.loads((packs[0] / "manifest.json").read_text())
    assert manifest["revision"] == status.revision and manifest["name"] == REPO


def test_a_file_that_is_not_parquet_keeps_the_bundled_tasks(tmp_path, hub):
    from testkit.published import publish

    publish(hub.url, REPO, {"tasks/eval.parquet": b"not parquet", "tasks/train.parquet": b"PAR1 nor this"})
    status = loader(hub, tmp_path).load()
    assert status.state == "offline" and "cannot be read" in status.detail
    assert len(load_pack().tasks) == 50


# -- the CLI -------------------------------------------------------------------------------------------------------

def agent_cli(python, *args: str, hub, cache: Path) -> subprocess.CompletedProcess:
    """`python -m agent ...` from the warm interpreter (tests/conftest.py), which reads the Hub's address at run
    time: the task dataset's client is made per run, with HF_ENDPOINT as this run's environment says."""
    env = {**os.environ, "HF_ENDPOINT": hub.url, "TASKS_DATASET": REPO, "TASKS_CACHE": str(cache)}
    return python.run("agent", *args, env=env, timeout=300)


def test_the_cli_lists_every_valid_task_and_none_of_the_broken_ones(tmp_path, hub, warm_python):
    published = published_dataset(hub)
    listed = agent_cli(warm_python, "tasks", "--json", hub=hub, cache=tmp_path)
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [r["task_id"] for r in rows] == published.offered
    assert not set(published.broken) & {r["task_id"] for r in rows}
    assert set(rows[0]) == {"task_id", "split", "difficulty", "quay", "num_ships", "optimal_cost", "naive_cost"}
    first = load_pack().get(rows[0]["task_id"])
    assert rows[0]["optimal_cost"] == first["reference"]["optimal_cost"]
    assert rows[0]["num_ships"] == len(first["ships"])
    assert f"tasks: {50 + TRAIN_COUNT} tasks" in listed.stderr
    assert sum("left out" in line for line in listed.stderr.splitlines()) == 1 + len(published.broken)

    train = agent_cli(warm_python, "tasks", "--split", "train", hub=hub, cache=tmp_path)
    lines = train.stdout.splitlines()
    assert lines[0].split() == ["task_id", "split", "difficulty", "quay", "num_ships", "optimal_cost", "naive_cost"]
    assert [line.split()[0] for line in lines[1:]] == published.train_ids

    hub.down()
    offline = agent_cli(warm_python, "tasks", "--json", "--split", "eval", hub=hub, cache=tmp_path / "empty")
    assert offline.returncode == 0 and len(offline.stdout.splitlines()) == 50
    assert "offline: the 50 bundled eval tasks" in offline.stderr


def test_the_cli_plays_a_train_task(tmp_path, hub, warm_python):
    published_dataset(hub)
    out = tmp_path / "rollouts"
    played = agent_cli(warm_python, "run", "--model", "baseline:greedy", "--task", TRAIN_TASK, "--out", str(out), "--run",
                       "train-smoke", hub=hub, cache=tmp_path / "cache")
    assert played.returncode == 0, played.stderr
    [record] = [json.loads(p.read_text()) for p in out.glob("rollouts/*/*.json")]
    assert record["task_id"] == TRAIN_TASK and record["task"]["split"] == "train"
    loader(hub, tmp_path / "cache").load()  # this process serves the same tasks now: grade the greedy plan here
    task = load_pack().get(TRAIN_TASK)
    assert record["end_reason"] == "submitted" and record["reward"] == grade(task, greedy_plan(task))["reward"]


# -- bounds ----------------------------------------------------------------------------------------------------------

def oversized_rows() -> tuple[list[dict], dict[str, str]]:
    """Rows whose task is far beyond any dock-v1 task (59 ships, 18 disruptions, 35 KB)."""
    from berth_env.pack import base_pack
    from testkit.task_dataset import as_train, task_row

    rows, why = [], {}
    for number, (ships, disruptions) in enumerate([(10_240, None), (300, None), (20, 500)], start=960):
        task = as_train(base_pack().tasks[2], number)
        row = task_row(task)  # the row's other columns are those of a real task; its `task` is the giant
        task["ships"] = [dict(task["ships"][i % len(task["ships"])], id=i) for i in range(ships)]
        if disruptions:
            task["disruptions"] = [task["disruptions"][0]] * disruptions
        row["task"] = json.dumps(task)
        rows.append(row)
        why[task["task_id"]] = "it is too large"
    return rows, why


def test_an_oversized_row_is_left_out_and_named_like_a_broken_one_before_any_grading(tmp_path, hub, monkeypatch,
                                                                                     caplog):
    """Before, a row of 10,240 ships was graded in-process with no bound (a start of 13-47 s instead of 7 s)."""
    import catalog.task_verdicts as verdicts_module
    from testkit.published import publish
    from testkit.task_dataset import dataset_files, train_copies
    from testkit.task_hub import TOKEN, bundled

    rows, too_large = oversized_rows()
    tasks = bundled()
    publish(hub.url, REPO, dataset_files(tasks, train_copies(tasks, 3), broken_rows=rows), token=TOKEN)
    graded: list[str] = []
    real = verdicts_module.reference_problem
    monkeypatch.setattr(verdicts_module, "reference_problem", lambda task: graded.append(task["task_id"]) or
                        real(task))
    with caplog.at_level(logging.WARNING, logger="catalog.task_dataset"):
        status = loader(hub, tmp_path).load()
    assert status.state == "ready" and status.splits == {"eval": 50, "train": 3}
    assert set(status.left_out) == set(too_large) and "3 left out" in status.text
    assert not set(graded) & set(too_large)
    expected = ["too large: its `task` is over 256 KB", "too large: 300 ships (at most 200)",
                "too large: 500 disruptions (at most 60)"]
    for task_id, reason in zip(too_large, expected, strict=True):
        said = [r.getMessage() for r in caplog.records if task_id in r.getMessage()]
        assert len(said) == 1 and reason in said[0], said


def test_a_tasks_file_over_the_size_bound_is_never_downloaded(tmp_path, hub, monkeypatch):
    import catalog.task_dataset

    published_dataset(hub)
    monkeypatch.setattr(catalog.task_dataset, "FILE_MAX_BYTES", 4096)  # the real bound is 64 MB; these are larger
    before = len(hub.hits("resolve"))
    status = loader(hub, tmp_path).load()
    assert status.state == "offline" and "tasks/eval.parquet is" in status.detail
    assert "more than the 4.0 KB this app reads from one file" in status.detail
    assert len(hub.hits("resolve")) == before and len(load_pack().tasks) == 50
