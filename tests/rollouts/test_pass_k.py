"""pass^k on the leaderboard (rollouts.board): against brute-force enumeration of every k-subset of each task's
tries, and the note that says why a model has none."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from rollouts.board import PASS_K
from rollouts.board_text import board_document, board_json, board_notes, board_terminal
from testkit.boards import board_of, by_model


def row(model: str, task: str, feasible: bool, cost: int | None, optimal: int | None) -> dict:
    return {"model": model, "task_id": task, "difficulty": "busy", "reward": 1.0 if feasible else 0.0,
            "feasible": feasible, "submitted": True, "cost": cost, "optimal_cost": optimal, "input_tokens": 10,
            "output_tokens": 10, "seconds": 1.0}


def within10(r: dict) -> bool:
    return r["feasible"] and r["cost"] is not None and r["optimal_cost"] is not None and \
        r["cost"] <= 1.1 * r["optimal_cost"]


def brute_force(rows: list[dict], model: str, k: int, success, *, optimum_known: bool = False) -> float | None:
    """Per task, the share of its k-subsets of tries in which every try succeeds; the mean over the tasks with
    at least k tries (with `optimum_known`, only the tasks whose optimum is known); in percent."""
    tasks: dict[str, list[dict]] = {}
    for r in rows:
        if r["model"] == model:
            tasks.setdefault(r["task_id"], []).append(r)
    shares = []
    for tries in tasks.values():
        if len(tries) < k or (optimum_known and all(t["optimal_cost"] is None for t in tries)):
            continue
        subsets = list(itertools.combinations(tries, k))
        shares.append(sum(all(success(t) for t in subset) for subset in subsets) / len(subsets))
    return 100.0 * sum(shares) / len(shares) if shares else None


def random_rows(seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for model in ("m:steady", "m:flaky", "m:once"):
        for t in range(rng.randint(3, 7)):
            optimal = None if t == 0 else rng.randint(80, 120)
            tries = 1 if model == "m:once" else rng.randint(1, 6)
            skill = {"m:steady": 0.85, "m:flaky": 0.5, "m:once": 0.7}[model]
            for _ in range(tries):
                feasible = rng.random() < skill
                cost = None if not feasible else int((optimal or 100) * rng.uniform(1.0, 1.3))
                rows.append(row(model, f"task-{t}", feasible, cost, optimal))
    rng.shuffle(rows)
    return rows


@pytest.mark.parametrize("seed", range(6))
def test_pass_k_is_the_mean_over_tasks_of_every_k_subset_of_tries_all_succeeding(seed):
    rows = random_rows(seed)
    lines = by_model(board_of(rows))
    for model, line in lines.items():
        for k in PASS_K:
            for name, success, known in (("feasible", lambda r: r["feasible"], False),
                                         ("within10", within10, True)):
                want = brute_force(rows, model, k, success, optimum_known=known)
                got = line[f"pass{k}_{name}_pct"]
                assert (math.isnan(got) if want is None else got == pytest.approx(want, abs=1e-9)), (model, k, name)
            tasks = {r["task_id"] for r in rows if r["model"] == model
                     and sum(o["model"] == model and o["task_id"] == r["task_id"] for o in rows) >= k}
            assert line[f"pass{k}_tasks"] == len(tasks)


def test_one_try_of_each_task_has_pass_1_only_and_the_note_says_how_many_tasks_have_k_tries():
    rows = [row("a:twice", "t1", True, 100, 100), row("a:twice", "t1", False, None, 100),
            row("a:twice", "t2", True, 105, 100), row("a:twice", "t2", True, 130, 100),
            row("b:once", "t1", True, 100, 100), row("b:once", "t2", False, None, 100)]
    lines = board_of(rows)
    a, b = by_model(lines)["a:twice"], by_model(lines)["b:once"]
    # a: t1 1 of 2 feasible (pass^1 1/2, pass^2 0), t2 2 of 2 (1, 1) -> 75%, 50%; within 10%: t1 1/2, t2 1/2.
    assert (a["pass1_feasible_pct"], a["pass2_feasible_pct"]) == (75.0, 50.0)
    assert (a["pass1_within10_pct"], a["pass2_within10_pct"]) == (50.0, 0.0)
    assert b["pass1_feasible_pct"] == 50.0 and math.isnan(b["pass2_feasible_pct"])
    items = {item["model"]: item for item in board_json(lines)}
    assert items["b:once"]["pass2_feasible_pct"] is None and items["b:once"]["pass2_tasks"] == 0
    assert [items["a:twice"][f"pass{k}_tasks"] for k in PASS_K] == [2, 2, 0, 0]
    [note] = [n for n in board_notes(lines) if n.startswith("pass^k")]
    assert "C(c,k)/C(n,k)" in note and "a:twice: 2, 2, 0, 0; b:once: 2, 0, 0, 0" in note
    assert "pass^4 feasible" in board_document(lines).splitlines()[0] and note + "." in board_document(lines)
    assert "pass^k:" not in board_terminal(lines)  # the compact board has no pass^k column, nor its note


def test_every_model_with_every_k_gets_the_definition_and_no_list():
    rows = [row("a", "t1", True, 100, 100) for _ in range(4)]
    [line] = board_of(rows)
    assert [line[f"pass{k}_feasible_pct"] for k in PASS_K] == [100.0] * 4
    [note] = [n for n in board_notes([line]) if n.startswith("pass^k")]
    assert "blank where" not in note
