"""The board to take home: `/board.json` and `/board.csv` over real HTTP from the launched app, the same numbers as
`python -m agent board --json`; `--snapshot`'s day files read back by `datasets.load_dataset` and pushed."""

from __future__ import annotations

import csv
import io
import json
import math
import xml.etree.ElementTree as ET

import httpx
import pytest

from batch.cli import main
from rollouts.board_files import today
from rollouts.frontier import frontier, point_json
from rollouts.hub_push import dataset_files
from rollouts.store import RolloutStore
from testkit.app import launched_app
from testkit.fakehub import running_fakehub
from testkit.hand_records import hand_record
from tests.agent.test_cli_board import A, B, board_records

FORMULA = "=HYPERLINK(\"http://evil.example\")"


def cli_board(root, capsys) -> list[dict]:
    assert main(["board", "--dir", str(root), "--json"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    records = [*board_records(), hand_record("f1", model=FORMULA, submit=(2, True, 400))]
    with launched_app(tmp_path_factory.mktemp("board-files"), records=records) as app:
        yield app


def get(app, path: str, **headers: str) -> httpx.Response:
    return httpx.get(f"{app.url}{path}", headers=headers, timeout=60)


def test_board_json_is_the_clis_board_json_and_is_cached_by_its_etag(world, capsys):
    response = get(world, "board.json")
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    board = response.json()
    assert board == cli_board(world.root, capsys)
    assert {item["model"] for item in board} == {A, B, FORMULA} and "pass4_feasible_pct" in board[0]
    assert response.headers["cache-control"] == "public, max-age=60"
    again = get(world, "board.json", **{"If-None-Match": response.headers["etag"]})
    assert again.status_code == 304 and again.content == b""


def test_the_filters_are_browses_url_keys_and_a_bad_one_is_refused(world):
    only_a = get(world, "board.json", ).json()
    [line] = get(world, f"board.json?model={A}").json()
    assert line == next(item for item in only_a if item["model"] == A) | {"arena": None, "arena_low": None,
                                                                           "arena_high": None, "arena_rank": None,
                                                                           "arena_note": line["arena_note"],
                                                                           "arena_battles": line["arena_battles"]}
    assert [item["model"] for item in get(world, f"board.json?model={A}&model={B}&tab=browse&view=board").json()] \
        == [A, B]
    refused = get(world, "board.csv?tier=hurricane")
    assert refused.status_code == 400 and "hurricane" in refused.text and refused.headers["cache-control"] == "no-store"


def test_board_csv_has_the_same_numbers_and_model_text_stays_text(world):
    board = {item["model"]: item for item in get(world, "board.json").json()}
    response = get(world, "board.csv")
    assert response.headers["content-type"].startswith("text/csv")
    assert response.headers["content-disposition"] == 'attachment; filename="board.csv"'
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert len(rows) == len(board) and list(rows[0]) == list(next(iter(board.values())))
    for row in rows:
        model = row["model"].removeprefix("'") if row["model"].startswith("'=") else row["model"]
        item = board[model]
        for key, value in item.items():
            cell = row[key]
            if value is None:
                assert cell == "", key
            elif isinstance(value, bool | str):
                assert cell in (str(value), f"'{value}"), key
            else:
                assert math.isclose(float(cell), value, rel_tol=0, abs_tol=0), (key, cell, value)
    assert any(row["model"] == f"'{FORMULA}" for row in rows)  # a spreadsheet shows it, never runs it


def test_a_snapshot_is_read_back_by_datasets_in_the_boards_and_battles_configs(tmp_path, capsys):
    datasets = pytest.importorskip("datasets")
    with RolloutStore(tmp_path, writer_id="w1") as store:
        for record in board_records():
            store.save(record)
    before = cli_board(tmp_path, capsys)
    assert main(["board", "--dir", str(tmp_path), "--snapshot"]) == 0
    day = today()
    assert capsys.readouterr().out.splitlines() == [f"wrote {tmp_path}/boards/{day}.jsonl",
                                                    f"wrote {tmp_path}/battles/{day}.jsonl"]
    boards = datasets.load_dataset(str(tmp_path), "boards", split="train").to_list()
    assert [str(row.pop("date")) for row in boards] == [day] * len(before)
    for row, item in zip(boards, before, strict=True):
        assert {k: row[k] for k in item} == pytest.approx(item, nan_ok=True)
        assert {k for k, v in row.items() if v is not None} <= set(item)
    battles = datasets.load_dataset(str(tmp_path), "battles", split="train").to_list()
    # Both models played task dock-24B-w06x1-busy-0 (hand_records' task): one battle, A's mean 0.6 against B's 0.5.
    assert [(b["model_a"], b["model_b"], b["winner"]) for b in battles] == [(A, B, "a")]
    assert battles[0]["mean_a"] == pytest.approx(0.6) and battles[0]["mean_b"] == pytest.approx(0.5)
    assert len(datasets.load_dataset(str(tmp_path), "index", split="train")) == 5  # the other configs still load
    assert {f"boards/{day}.jsonl", f"battles/{day}.jsonl"} <= set(dataset_files(tmp_path))
    # A day written by an older version, before most figures existed, still loads beside it: its figures null.
    (tmp_path / "boards" / "2026-01-02.jsonl").write_text('{"date": "2026-01-02", "model": "old:one", "n": 3}\n')
    fresh = str(tmp_path.parent / f"{tmp_path.name}-cache")  # not the first load's cache, which knew one day
    both = datasets.load_dataset(str(tmp_path), "boards", split="train", cache_dir=fresh).to_list()
    old = next(row for row in both if row["model"] == "old:one")
    assert len(both) == len(before) + 1 and old["n"] == 3 and old["pass1_feasible_pct"] is None


def test_a_snapshot_with_a_dataset_is_pushed(tmp_path, capsys, monkeypatch):
    with RolloutStore(tmp_path, writer_id="w1") as store:
        for record in board_records():
            store.save(record)
    with running_fakehub(token="hf_snapshot_token_0123") as hub:
        monkeypatch.setenv("HF_TOKEN", "hf_snapshot_token_0123")
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        assert main(["board", "--dir", str(tmp_path), "--snapshot", "--dataset", "arena/rollouts"]) == 0
        assert capsys.readouterr().out.splitlines()[-1] == "pushed to arena/rollouts"
        files = hub.files("arena/rollouts")
        day = today()
        assert files[f"boards/{day}.jsonl"] == (tmp_path / f"boards/{day}.jsonl").read_bytes()
        assert f"battles/{day}.jsonl" in files and "README.md" in files
    monkeypatch.delenv("HF_TOKEN")
    assert main(["board", "--dir", str(tmp_path), "--snapshot", "--dataset", "arena/rollouts"]) == 2
    assert "needs HF_TOKEN" in capsys.readouterr().err
    assert main(["board", "--dir", str(tmp_path), "--dataset", "arena/rollouts"]) == 2


PNG = b"\x89PNG\r\n\x1a\n"


def test_board_svg_and_png_are_the_frontier_cached_by_their_etag(world):
    svg = get(world, "board.svg")
    assert svg.status_code == 200 and svg.headers["content-type"] == "image/svg+xml"
    words = "".join(ET.fromstring(svg.text).itertext())
    assert all(model in words for model in (A, B, FORMULA)) and "$0" in words
    png = get(world, "board.png")
    assert png.status_code == 200 and png.headers["content-type"] == "image/png" and png.content[:8] == PNG
    assert (int.from_bytes(png.content[16:20], "big"), int.from_bytes(png.content[20:24], "big")) == (1200, 630)
    for path, answer in (("board.svg", svg), ("board.png", png)):
        assert answer.headers["cache-control"] == "public, max-age=60"
        again = get(world, path, **{"If-None-Match": answer.headers["etag"]})
        assert again.status_code == 304 and again.content == b""
    only_a = "".join(ET.fromstring(get(world, f"board.svg?model={A}").text).itertext())
    assert A in only_a and B not in only_a


def test_the_frontier_points_are_the_boards_figures_in_the_cli_and_the_api(world, capsys, tmp_path):
    """`board --plot --json` prints the figure's points; they are the board's figures, and the API's board gives
    the same points."""
    assert main(["board", "--dir", str(world.root), "--plot", str(tmp_path / "f.svg"), "--json"]) == 0
    points = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    board = {item["model"]: item for item in get(world, "board.json").json()}
    assert {p["model"] for p in points} >= {A, B}  # a priced model and a free one (FORMULA's is priced too)
    assert points == [point_json(p) for p in frontier(list(board.values())).points]
    for point in points:
        line = board[point["model"]]
        assert point["mean_reward"] == line["mean_reward"] and point["ci_low"] == line["ci_low"]
        assert point["usd_per_episode"] == (0.0 if point["free"] else line["usd_per_episode"])
    written = ET.parse(tmp_path / "f.svg").getroot()
    assert all(point["model"] in "".join(written.itertext()) for point in points)
