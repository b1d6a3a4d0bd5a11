"""`python -m agent run --shard K/N`: four shards, played as four processes (four machines' rollout folders), fill
the task x model grid together, each cell once; a shard run again adds nothing, and `--repeats` tops cells up."""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from pathlib import Path

import pytest

from batch.cli import _plan_jobs, grid_cells, parse_shard
from batch.grid import spread_sample, task_ids
from berth_env import TIERS, load_pack

MODELS = ["baseline:greedy", "baseline:naive", "baseline:hasty"]
SHARDS = 4


def cells_in(folder: Path) -> list[tuple[str, str]]:
    return [(r["model"], r["task_id"]) for r in
            (json.loads(p.read_text()) for p in sorted(folder.glob("rollouts/*/*.json")))]


def test_the_slices_are_disjoint_cover_the_grid_and_ignore_the_order_given():
    tasks = [f"task-{i}" for i in range(7)]
    models = ["m-b", "m-a", "m-c"]
    slices = [grid_cells(tasks, models, (k, 5)) for k in range(1, 6)]
    assert sorted(c for s in slices for c in s) == sorted(grid_cells(tasks, models))
    assert [len(s) for s in slices] == [5, 4, 4, 4, 4]
    shuffled = [grid_cells(list(reversed(tasks)), sorted(models), (k, 5)) for k in range(1, 6)]
    assert [sorted(s) for s in shuffled] == [sorted(s) for s in slices]
    assert parse_shard("2/4") == (2, 4)
    for bad in ("0/4", "5/4", "2", "a/b", "2/0"):
        with pytest.raises(Exception, match="K/N"):
            parse_shard(bad)


def test_a_limited_sample_is_spread_over_the_tiers_by_their_share_and_seeded():
    # 40 standard, 30 busy, 20 storm, 10 extreme, given in a shuffled order.
    tasks = [(f"{tier}-{i:02d}", tier) for tier, count in zip(TIERS, (40, 30, 20, 10), strict=True)
             for i in range(count)]
    mixed = tasks[::-1][::2] + tasks[::-1][1::2]
    ten = spread_sample(tasks, 10)
    assert Counter(t.split("-")[0] for t in ten) == {"standard": 4, "busy": 3, "storm": 2, "extreme": 1}
    assert spread_sample(mixed, 10) == ten and len(set(ten)) == 10  # any order: the same sample
    assert spread_sample(tasks, 10, seed="another") != ten
    assert Counter(t.split("-")[0] for t in spread_sample(tasks, 5)) == {"standard": 2, "busy": 1, "storm": 1,
                                                                         "extreme": 1}  # one each while N allows
    assert len(set(t.split("-")[0] for t in spread_sample(tasks, 3))) == 3
    assert spread_sample(tasks, 500) == [t for t, _ in tasks]
    # Tiers of very different sizes: the minimum of one each is kept, what overshoots comes from the large tier.
    skewed = [(f"busy-{i:03d}", "busy") for i in range(200)] + [(f"{t}-0", t) for t in ("standard", "storm", "extreme")]
    assert Counter(t.split("-")[0] for t in spread_sample(skewed, 4)) == {"standard": 1, "busy": 1, "storm": 1,
                                                                          "extreme": 1}
    assert Counter(t.split("-")[0] for t in spread_sample(skewed, 6)) == {"standard": 1, "busy": 3, "storm": 1,
                                                                          "extreme": 1}
    # The bundled eval split lists its 15 busy tasks first: the first ten would all be busy.
    pack = {t["task_id"]: t["difficulty"] for t in load_pack().split("eval")}
    assert set(list(pack.values())[:10]) == {"busy"}
    assert {pack[t] for t in task_ids(None, "eval", 10, None)} == set(TIERS)
    assert {pack[t] for t in task_ids(None, "eval", None, None, ["storm"])} == {"storm"}
    assert len(task_ids(None, "eval", None, None, ["storm"])) == list(pack.values()).count("storm")
    with pytest.raises(ValueError, match="has no tasks of tier nope; its tiers: standard, busy, storm, extreme"):
        task_ids(None, "eval", None, None, ["nope"])
    with pytest.raises(ValueError, match="--tier picks from a split"):
        task_ids(["dock-x"], None, None, None, ["storm"])


class _Rows:
    def __init__(self, rows: list[dict]) -> None:
        self._rows = rows

    def rows(self) -> list[dict]:
        return self._rows


def test_repeats_top_each_cell_up_to_r_rollouts_without_errors():
    def row(model, task, **more):
        return {"run": "r", "model": model, "task_id": task, "errors": 0, "end_reason": "submitted", **more}

    store = _Rows([row("m", "t1"), row("m", "t2", errors=1), row("m", "t2", end_reason="wall_clock"),
                   row("m", "t3"), row("m", "t3"), row("m", "t3"), row("m", "t3"), row("m", "t1", run="other")])
    args = argparse.Namespace(run="r", repeats=3, force=False)
    jobs, kept = _plan_jobs(args, [("m", "t1"), ("m", "t2"), ("m", "t3")], store)
    assert sorted(jobs) == [("m", "t1")] * 2 + [("m", "t2")] * 3
    assert len(kept) == 4  # t1's one and three of t3's four
    forced, _ = _plan_jobs(argparse.Namespace(run="r", repeats=2, force=True), [("m", "t3")], store)
    assert forced == [("m", "t3")] * 2


def test_four_shard_processes_fill_the_grid_once_and_a_rerun_adds_nothing(warm_python, env_url, tmp_path):
    models = MODELS
    tasks = task_ids(None, "eval", 3, None)  # the shards ask the server; the same seeded sample
    common = [arg for m in models for arg in ("--model", m)] + ["--split", "eval", "--limit", "3", "--run", "sweep",
                                                               "--concurrency", "2", "--env-url", env_url]
    env = dict(os.environ)
    children = [warm_python.popen("agent", "run", *common, "--shard", f"{k}/{SHARDS}",
                                  "--out", str(tmp_path / f"machine{k}"), env=env) for k in range(1, SHARDS + 1)]
    for child in children:
        _, err = child.communicate(timeout=240)
        assert child.returncode == 0, err[-2000:]

    played = [cell for k in range(1, SHARDS + 1) for cell in cells_in(tmp_path / f"machine{k}")]
    grid = [(m, t) for t in tasks for m in models]
    assert sorted(played) == sorted(grid)  # the union is the whole grid, each cell once
    sizes = sorted(len(cells_in(tmp_path / f"machine{k}")) for k in range(1, SHARDS + 1))
    assert sum(sizes) == len(grid) and sizes[-1] - sizes[0] <= 1

    again = warm_python.run("agent", "run", *common, "--shard", f"2/{SHARDS}", "--out", str(tmp_path / "machine2"),
                            env=env)
    assert again.returncode == 0, again.stderr[-2000:]
    mine = len(grid_cells(tasks, models, (2, SHARDS)))
    assert f"shard 2/{SHARDS}: {mine} cells: {mine} already in" in again.stderr and "0 to play" in again.stderr
    assert len(cells_in(tmp_path / "machine2")) == mine

    twice = warm_python.run("agent", "run", *common, "--shard", f"2/{SHARDS}", "--repeats", "2",
                            "--out", str(tmp_path / "machine2"), env=env)
    assert twice.returncode == 0 and f"{mine} to play" in twice.stderr, twice.stderr[-2000:]
    assert sorted(cells_in(tmp_path / "machine2")) == sorted(grid_cells(tasks, models, (2, SHARDS)) * 2)
