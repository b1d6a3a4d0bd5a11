"""Task packs (PORTSIM_SPEC §1.1): loading, the sha256 pin, gzip packs, BERTH_TASKS_DIR, ids, splits, order."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from berth_env import Pack, PackError, load_pack
from berth_env.pack import BUNDLED_PACK
from testkit.grid_checker import TOY_TASK_LINE

EVAL_SHA = "9edea99e2b2730b9107574a8f6a437d910391493f776f123645af0c4ecfad882"


def write_pack(root: Path, lines: list[str], *, gz: bool = False, sha: str | None = "auto") -> Path:
    """A pack directory with the given task lines and a manifest pinning their digest (or a given one)."""
    root.mkdir(parents=True, exist_ok=True)
    body = ("\n".join(lines) + "\n").encode()
    if gz:
        (root / "tasks.jsonl.gz").write_bytes(gzip.compress(body))
    else:
        (root / "tasks.jsonl").write_bytes(body)
    if sha is not None:
        digest = hashlib.sha256(body).hexdigest() if sha == "auto" else sha
        (root / "manifest.json").write_text(json.dumps({"name": root.name, "sha256": digest}))
    return root


def toy_line(**changes) -> str:
    task = json.loads(TOY_TASK_LINE)
    task.update(changes)
    return json.dumps(task)


@pytest.fixture
def no_extra_packs(monkeypatch):
    monkeypatch.delenv("BERTH_TASKS_DIR", raising=False)


# --- the bundled pack --------------------------------------------------------------------------------------------


def test_bundled_pack_matches_its_manifest(no_extra_packs):
    pack = load_pack()
    manifest = json.loads((BUNDLED_PACK / "manifest.json").read_text())
    assert (
        manifest["sha256"]
        == EVAL_SHA
        == hashlib.sha256((BUNDLED_PACK / "tasks.jsonl").read_bytes()).hexdigest()
    )
    assert len(pack.tasks) == manifest["tasks"] == 50
    assert dict(Counter(t["difficulty"] for t in pack.tasks)) == manifest["tiers"]
    assert dict(Counter(t["quay"] for t in pack.tasks)) == manifest["quays"]
    assert {t["week"] for t in pack.tasks} <= set(manifest["weeks"])
    assert pack.splits() == ["eval"] and pack.roots == (BUNDLED_PACK,)


def test_default_pack_is_cached(no_extra_packs):
    assert load_pack() is load_pack()


def test_order_is_line_order_and_get_finds_tasks(no_extra_packs):
    pack = load_pack()
    lines = [
        json.loads(line)["task_id"]
        for line in (BUNDLED_PACK / "tasks.jsonl").read_text().splitlines()
        if line
    ]
    assert [t["task_id"] for t in pack.tasks] == lines == [t["task_id"] for t in pack.split("eval")]
    assert pack.get(lines[7]) is pack.tasks[7]
    with pytest.raises(KeyError, match="unknown task 'dock-nope'"):
        pack.get("dock-nope")
    assert pack.split("train") == []


def test_public_view_drops_only_the_reference(no_extra_packs):
    task = load_pack().tasks[0]
    public = Pack.public(task)
    assert "reference" not in public and "reference" in task
    assert list(public) == [k for k in task if k != "reference"]
    public["extra"] = 1
    assert "extra" not in task


# --- explicit directories ----------------------------------------------------------------------------------------


def test_load_exactly_the_given_dirs(tmp_path):
    toy = write_pack(tmp_path / "toy", [TOY_TASK_LINE])
    pack = load_pack([toy])
    assert [t["task_id"] for t in pack.tasks] == ["toy-1"] and pack.splits() == ["test"]
    assert pack.get("toy-1")["terminal"] == "Toy Terminal"


def test_tampered_copy_is_refused(tmp_path):
    copy = tmp_path / "eval"
    shutil.copytree(BUNDLED_PACK, copy)
    body = (copy / "tasks.jsonl").read_text()
    (copy / "tasks.jsonl").write_text(body.replace('"optimal_cost":87', '"optimal_cost":86', 1))
    with pytest.raises(PackError, match="does not match its manifest") as caught:
        load_pack([copy])
    assert EVAL_SHA in str(caught.value)
    assert load_pack([BUNDLED_PACK]).get("dock-24B-w06x1-busy-0")["reference"]["optimal_cost"] == 87


def test_gzip_pack_is_verified_on_the_decompressed_body(tmp_path):
    good = write_pack(tmp_path / "good", [TOY_TASK_LINE], gz=True)
    assert load_pack([good]).get("toy-1")["quay"] == "T"
    compressed_digest = hashlib.sha256((good / "tasks.jsonl.gz").read_bytes()).hexdigest()
    bad = write_pack(tmp_path / "bad", [TOY_TASK_LINE], gz=True, sha=compressed_digest)
    with pytest.raises(PackError, match="does not match"):
        load_pack([bad])


def test_gzip_copy_of_the_bundled_pack_loads_with_the_published_digest(tmp_path):
    root = tmp_path / "eval-gz"
    root.mkdir()
    (root / "tasks.jsonl.gz").write_bytes(gzip.compress((BUNDLED_PACK / "tasks.jsonl").read_bytes()))
    shutil.copy(BUNDLED_PACK / "manifest.json", root / "manifest.json")
    assert len(load_pack([root]).tasks) == 50


def test_pack_without_manifest_or_digest_loads(tmp_path):
    assert load_pack([write_pack(tmp_path / "a", [TOY_TASK_LINE], sha=None)]).get("toy-1")
    root = write_pack(tmp_path / "b", [TOY_TASK_LINE], sha=None)
    (root / "manifest.json").write_text(json.dumps({"name": "b"}))
    assert load_pack([root]).get("toy-1")


def test_duplicate_ids_within_and_across_packs(tmp_path):
    with pytest.raises(PackError, match="'toy-1' appears twice"):
        load_pack([write_pack(tmp_path / "twice", [TOY_TASK_LINE, TOY_TASK_LINE])])
    one = write_pack(tmp_path / "one", [TOY_TASK_LINE])
    two = write_pack(tmp_path / "two", [toy_line(split="other")])
    with pytest.raises(PackError, match="appears twice"):
        load_pack([one, two])


def test_a_directory_listed_twice_loads_once(tmp_path):
    toy = write_pack(tmp_path / "toy", [TOY_TASK_LINE])
    assert len(load_pack([toy, tmp_path / "." / "toy"]).tasks) == 1


def test_unreadable_packs_say_why(tmp_path):
    with pytest.raises(PackError, match="does not exist"):
        load_pack([tmp_path / "nowhere"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(PackError, match=r"neither tasks\.jsonl nor tasks\.jsonl\.gz"):
        load_pack([tmp_path / "empty"])
    with pytest.raises(PackError, match="line 2 is not valid JSON"):
        load_pack([write_pack(tmp_path / "broken", [TOY_TASK_LINE, "{oops"])])
    with pytest.raises(PackError, match=r"ship ids are 0\.\.n-1"):
        load_pack([write_pack(tmp_path / "ids", [toy_line(task_id="t2", ships=[{"id": 1}])])])
    with pytest.raises(PackError, match="task_id"):
        load_pack([write_pack(tmp_path / "noid", ['{"split": "x", "ships": []}'])])
    root = tmp_path / "badgz"
    root.mkdir()
    (root / "tasks.jsonl.gz").write_bytes(b"not gzip at all")
    with pytest.raises(PackError, match="cannot read"):
        load_pack([root])


def test_blank_lines_are_skipped_and_line_separators_inside_strings_kept(tmp_path):
    odd = toy_line(task_id="toy-2", notices=["wind\u2028warning"])
    root = tmp_path / "odd"
    root.mkdir()
    (root / "tasks.jsonl").write_text("\n" + TOY_TASK_LINE + "\n\n   \n" + odd + "\n", encoding="utf-8")
    pack = load_pack([root])
    assert [t["task_id"] for t in pack.tasks] == ["toy-1", "toy-2"]
    assert pack.get("toy-2")["notices"] == ["wind\u2028warning"]


# --- BERTH_TASKS_DIR ---------------------------------------------------------------------------------------------


def test_env_var_adds_packs_after_the_bundled_one(tmp_path, monkeypatch):
    toy = write_pack(tmp_path / "toy", [TOY_TASK_LINE])
    more = write_pack(tmp_path / "more", [toy_line(task_id="toy-2", split="eval")], gz=True)
    monkeypatch.setenv("BERTH_TASKS_DIR", f"{toy}::{more}")
    pack = load_pack()
    ids = [t["task_id"] for t in pack.tasks]
    assert len(ids) == 52 and ids[-2:] == ["toy-1", "toy-2"]
    assert pack.splits() == ["eval", "test"]
    assert [t["task_id"] for t in pack.split("eval")][-1] == "toy-2" and len(pack.split("eval")) == 51
    assert pack.split("test") == [pack.get("toy-1")]
    assert load_pack() is pack

    monkeypatch.setenv("BERTH_TASKS_DIR", str(BUNDLED_PACK))  # naming the bundled pack again changes nothing
    assert len(load_pack().tasks) == 50

    monkeypatch.setenv(
        "BERTH_TASKS_DIR", str(write_pack(tmp_path / "clash", [toy_line(task_id="dock-24B-w06x1-busy-0")]))
    )
    with pytest.raises(PackError, match="appears twice"):
        load_pack()
