"""`python -m agent board`: the leaderboard of a folder, in Markdown and as JSON, worked out by hand.

Model A (anthropic:claude-sonnet-5-5, $2 / $10 per million input / output tokens on 2026-11-25):
  a1: checks infeasible then feasible (2 checks), submits 280 < naive 500, reward 0.9, 6,000 in / 600 out: $0.018
  a2: first check feasible, submits 520 > naive 500, reward 0.9, 3,000 in / 100 out: $0.007
  a3: no check, no submission, reward 0, 6,000 in / 30 out: $0.0123
  -> mean 0.6, beat naive 1 of 3, median checks to feasible 1.5 (of a1, a2), mean output tokens 730 / 3,
     $ per episode 0.0373 / 3, reward per $ 1.8 / 0.0373.
Model B (baseline:greedy, no price): b1 one feasible check, submits 400 (beats naive), reward 0.9; b2 submits an
  infeasible plan, reward 0.1 -> mean 0.5, beat naive 50%, median checks 1, mean output tokens 0, no dollars.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from batch.cli import main
from rollouts import cli as rollouts_cli
from rollouts.archive import Archive
from rollouts.filters import Filters
from rollouts.store import RolloutStore
from testkit.hand_records import age, feasible, hand_record, infeasible

ROOT = Path(__file__).resolve().parents[2]
A, B = "anthropic:claude-sonnet-5-5", "baseline:greedy"
# The keys of `--json`, in order, the same as Browse's `/browse_leaderboard` gives (README "The leaderboard").
JSON_KEYS = ["model", "n", "mark", "tasks", "mean_reward", "ci_low", "ci_high", "arena", "arena_low", "arena_high",
             "arena_rank", "arena_note", "arena_battles", "mean_standard", "mean_busy", "mean_storm", "mean_extreme", "beat_naive_pct",
             "beat_naive_low", "beat_naive_high", "feasible_pct", "optimal_pct",
             *(f"pass{k}_feasible_pct" for k in (1, 2, 3, 4)), *(f"pass{k}_within10_pct" for k in (1, 2, 3, 4)),
             *(f"pass{k}_tasks" for k in (1, 2, 3, 4)), "no_submit",
             "median_checks_to_feasible", "mean_output_tokens", "usd_per_episode", "reward_per_usd",
             "reward_per_usd_low", "reward_per_usd_high", "median_seconds", "median_tokens", "feasible_check_pct"]


def board_records() -> list[dict]:
    zero = {"input_tokens": 0, "output_tokens": 0}
    return [
        hand_record("a1", model=A, checks=[(1, infeasible()), (2, feasible(300))], submit=(3, True, 280),
                    per_turn=[100, 200, 300], run="r1"),
        hand_record("a2", model=A, checks=[(1, feasible(450))], submit=(2, True, 520), per_turn=[50, 50], run="r1"),
        hand_record("a3", model=A, per_turn=[10, 10, 10], run="r2"),
        hand_record("b1", model=B, checks=[(1, feasible(600))], submit=(2, True, 400), usage=zero, run="r1"),
        hand_record("b2", model=B, submit=(2, False, None), usage=zero, run="r1"),
    ]


@pytest.fixture
def folder(tmp_path):
    with RolloutStore(tmp_path, writer_id="w1") as store:
        for record in board_records():
            store.save(record)
    return tmp_path


def board_json(root: Path, *args: str, capsys) -> list[dict]:
    assert main(["board", "--dir", str(root), "--json", *args]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def expected() -> dict[str, dict]:
    return {
        A: {"model": A, "n": 3, "mean_reward": 0.6, "beat_naive_pct": 100 / 3, "median_checks_to_feasible": 1.5,
            "mean_output_tokens": 730 / 3, "usd_per_episode": 0.0373 / 3, "reward_per_usd": 1.8 / 0.0373},
        B: {"model": B, "n": 2, "mean_reward": 0.5, "beat_naive_pct": 50.0, "median_checks_to_feasible": 1.0,
            "mean_output_tokens": 0.0, "usd_per_episode": None, "reward_per_usd": None},
    }


def check_figures(items: list[dict]) -> None:
    for item in items:
        assert list(item) == list(JSON_KEYS)
        want = expected()[item["model"]]
        for key, value in want.items():
            assert item[key] == (pytest.approx(value, rel=1e-9) if isinstance(value, float) else value), key
        assert item["ci_low"] <= item["mean_reward"] <= item["ci_high"]


def test_board_json_gives_the_hand_worked_figures(folder, capsys):
    items = board_json(folder, capsys=capsys)
    assert [item["model"] for item in items] == [A, B]  # best mean reward first
    check_figures(items)


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_board_reads_and_writes_nothing_rows_of_an_older_version_are_filled_by_fill_index(folder, capsys):
    age(folder)
    before = snapshot(folder)
    stale = {item["model"]: item for item in board_json(folder, capsys=capsys)}
    assert snapshot(folder) == before  # a command that reads leaves the folder byte for byte as it was
    assert stale[A]["mean_reward"] == pytest.approx(0.6) and stale[A]["beat_naive_pct"] is None  # not filled in: unknown
    assert rollouts_cli.main(["fill-index", "--dir", str(folder)]) == 0
    assert "filled in the index columns of 5 row(s)" in capsys.readouterr().out
    check_figures(board_json(folder, capsys=capsys))


def test_the_board_sorts_by_any_column_with_unknowns_last(folder, capsys):
    by_beating = board_json(folder, "--sort", "beat_naive_pct", capsys=capsys)
    assert [item["model"] for item in by_beating] == [B, A]
    cheapest = board_json(folder, "--sort", "usd_per_episode", "--ascending", capsys=capsys)
    assert [item["model"] for item in cheapest] == [A, B]
    dearest = board_json(folder, "--sort", "usd_per_episode", capsys=capsys)
    assert [item["model"] for item in dearest] == [A, B]  # no price is last either way


def test_board_markdown_shows_the_same_columns_and_the_price_table(folder, capsys):
    assert main(["board", "--dir", str(folder), "--wide"]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0]
    for title in ("mean reward (95% CI)", "beat naive (95% CI)", "median checks to feasible", "mean output tokens",
                  "$ / episode", "reward / $ (95% CI)"):
        assert title in header
    line_a = next(line for line in out.splitlines() if line.startswith(f"| {A} |"))
    assert "| 33% (" in line_a and "| 1.5 |" in line_a and "| 243 |" in line_a and "| $0.0124 |" in line_a
    assert f"| {1.8 / 0.0373:.1f} (" in line_a
    line_b = next(line for line in out.splitlines() if line.startswith(f"| {B} |"))
    assert "| - | - |" in line_b and "(-" not in line_b  # no dollars, no reward per dollar: a plain dash
    # Both models have fewer than 5 episodes: the notes say what that means, then the prices.
    assert "every model has fewer than 5 episodes, so none is ranked (no arena rating or rank)" in out
    assert "genai-prices 0." in out.splitlines()[-1] and "uncached input rate" in out


def test_the_default_board_is_compact_and_fits_a_100_column_terminal(folder, capsys):
    assert main(["board", "--dir", str(folder)]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 100, out
    header = out.splitlines()[0].split()
    assert header[:2] == ["model", "n"] and header[-5:] == ["standard", "busy", "storm", "extreme", "feasible"]
    line_a = next(line for line in out.splitlines() if line.startswith(A))
    assert line_a.split()[1:3] == ["3", "0.600"] and "$" not in out.split("\n\n")[0]
    assert "- (" not in out and "(---)" not in out
    assert "every figure (tokens, checks, dollars, pass^k and the intervals of each): --wide" in out
    assert main(["board", "--dir", str(folder), "--run", "r2"]) == 0
    single = capsys.readouterr().out
    assert f"{A}  1  0.000 (n too small)" in single  # a's one episode of run r2, which scored 0 and "n too small: no interval from fewer than 2 episodes." in single


def test_board_of_one_run_and_of_nothing(folder, tmp_path, capsys):
    items = board_json(folder, "--run", "r2", capsys=capsys)
    assert [(item["model"], item["n"]) for item in items] == [(A, 1)]
    assert main(["board", "--dir", str(tmp_path / "missing")]) == 2
    assert "no rollouts in" in capsys.readouterr().err


def test_the_board_command_runs_as_a_program(folder, warm_python):
    done = warm_python.run("agent", "board", "--dir", str(folder), "--json", timeout=120)
    assert done.returncode == 0, done.stderr
    check_figures([json.loads(line) for line in done.stdout.splitlines()])


def test_a_figure_added_to_the_data_layer_alone_reaches_browse_the_api_and_the_cli(folder, capsys, monkeypatch):
    """ARCHITECTURE.md's recipe: one Figure in rollouts.board.FIGURES, and no viewer edit, shows it on Browse's
    board (its header, width and digits), in /browse_leaderboard's JSON, /board.json and /board.csv, and in the
    CLI's --wide, --json and --sort;
    the arena's figures reach all three the same way."""
    from rollouts import board as boards
    from viewer.browse.api import browse_leaderboard
    from viewer.browse.views import board_layout, board_table
    from viewer.share.board_files import BoardFiles

    fewest = boards.Figure("fewest_turns", "min(turns)", "fewest turns", "int", page="turns, fewest", width="88px")
    monkeypatch.setattr(boards, "FIGURES", (*boards.FIGURES, fewest))
    archive = Archive.of_folder(folder)
    headers, types, widths = board_layout()
    assert (headers[-1], types[-1], widths[-1]) == ("turns, fewest", "number", "88px")
    table = board_table(archive.board(Filters()))
    assert dict(zip(table["model"], table["turns, fewest"], strict=True)) == {A: 2, B: 3}  # a2 took 2 turns
    assert {"arena", "arena 95% CI", "arena rank"} <= set(table.columns)
    api = browse_leaderboard(SimpleNamespace(archive=archive))
    cli = board_json(folder, capsys=capsys)
    assert api == cli and [item["fewest_turns"] for item in cli] == [2, 3]  # one JSON, under the same keys
    files = BoardFiles(SimpleNamespace(archive=archive))  # /board.json and /board.csv
    assert json.loads(files.body("json", Filters(), False)) == cli
    assert files.body("csv", Filters(), False).decode().splitlines()[0].endswith(',"fewest_turns"')
    assert list(cli[0])[-1] == "fewest_turns" and {"arena", "arena_rank", "arena_note"} <= set(cli[0])
    assert [item["model"] for item in board_json(folder, "--sort", "fewest_turns", capsys=capsys)] == [B, A]
    assert main(["board", "--dir", str(folder), "--wide"]) == 0
    wide = capsys.readouterr().out.splitlines()
    assert wide[0].endswith("| fewest turns |") and "| arena (95% CI) | arena rank |" in wide[0]
    assert next(line for line in wide if line.startswith(f"| {B} |")).endswith("| 3 |")
