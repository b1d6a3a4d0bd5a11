"""Runtime task packs (berth_env.pack.set_runtime_packs, write_pack): packs added while the process runs, named by
their content, loaded whole or not at all, and served by new sessions of a server that started before them."""

from __future__ import annotations

import json

import pytest

from agent.session import EnvSession
from berth_env import PackError, load_pack
from berth_env.pack import base_pack, runtime_packs, set_runtime_packs, write_pack
from testkit.task_dataset import train_copies


@pytest.fixture(autouse=True)
def no_runtime_packs():
    yield
    set_runtime_packs([])


def test_write_pack_names_the_pack_by_its_content_and_keeps_an_identical_one(tmp_path):
    tasks = train_copies(base_pack().tasks, 3)
    first = write_pack(tmp_path, tasks, {"name": "test"})
    manifest = json.loads((first / "manifest.json").read_text())
    assert manifest["name"] == "test" and first.name == manifest["sha256"][:16]
    stamp = (first / "tasks.jsonl").stat().st_mtime_ns
    assert write_pack(tmp_path, tasks) == first and (first / "tasks.jsonl").stat().st_mtime_ns == stamp
    other = write_pack(tmp_path, tasks[:2])
    assert other != first and load_pack([other]).tasks == tasks[:2]
    # A damaged copy under the pack's name is replaced, not trusted.
    (first / "tasks.jsonl").write_text("{}\n")
    assert write_pack(tmp_path, tasks) == first and load_pack([first]).tasks == tasks
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left behind


def test_a_runtime_pack_is_served_until_replaced_and_a_broken_one_changes_nothing(tmp_path):
    tasks = train_copies(base_pack().tasks, 4)
    pack_dir = write_pack(tmp_path, tasks)
    served = set_runtime_packs([pack_dir])
    assert load_pack() is served and runtime_packs() == (pack_dir.resolve(),)
    assert load_pack().split("train") == tasks and len(load_pack().split("eval")) == 50

    repeating = write_pack(tmp_path / "dup", [base_pack().tasks[0]])  # an id the bundled pack serves
    with pytest.raises(PackError, match="appears twice"):
        set_runtime_packs([repeating])
    damaged = write_pack(tmp_path / "bad", tasks[:1])
    (damaged / "tasks.jsonl").write_text((damaged / "tasks.jsonl").read_text().replace("train", "trian"))
    with pytest.raises(PackError, match="does not match its manifest"):
        set_runtime_packs([damaged])
    assert load_pack().split("train") == tasks  # still the last good set

    set_runtime_packs([])
    assert load_pack().splits() == ["eval"] and load_pack() is base_pack()


def test_a_session_opened_after_the_pack_arrived_plays_it_on_a_server_started_before(tmp_path, env_url):
    [task] = train_copies(base_pack().tasks, 1, first_number=777)
    before = EnvSession(env_url)
    with pytest.raises(Exception, match="unknown task"):
        before.reset(task["task_id"], "beforepack1")
    before.close()
    set_runtime_packs([write_pack(tmp_path, [task])])
    session = EnvSession(env_url)
    try:
        assert session.reset(task["task_id"], "afterpack01")["split"] == "train"
        assert session.call("submit_plan", {"plan": task["reference"]["optimal_plan"]}).reward == 1.0
    finally:
        session.close()
