"""The reproducibility card and the board's marks (rollouts.board_trust, rollouts.sample_size): verified only when
every condition holds, each failing one named; provisional under 20 tasks or 50 battles; over index rows of
hand-made records, in a real index engine, and through `python -m agent board --card`."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from batch.cli import main
from catalog.standard import default_standard
from rollouts import board as boards
from rollouts.board_trust import card_markdown, trust, verdict
from rollouts.index.engine import IndexEngine
from rollouts.index.format import INDEX_SCHEMA
from rollouts.layout import record_rel
from rollouts.sample_size import PROVISIONAL_BATTLES, PROVISIONAL_TASKS, provisional_why
from rollouts.schema import index_row
from rollouts.store import RolloutStore
from testkit.hand_records import hand_record

STANDARD = default_standard()
MODEL = "openai:gpt-5.5@low"


def records(model: str = MODEL, tasks: tuple[str, ...] = STANDARD.eval_tasks, **extra) -> list[dict]:
    stem = re.sub(r"[^A-Za-z0-9]", "-", model)
    return [hand_record(f"{stem}-{i}", model=model, task_id=task,
                        submit=(2, True, 120), started=f"2026-11-{1 + i % 28:02d}T10:00:00Z", **extra)
            for i, task in enumerate(tasks)]


def engine_of(public: list[dict], local: list[dict] = ()) -> IndexEngine:
    """Rows on the Hub (public) and rows only in the local folder."""
    engine = IndexEngine()
    for source, part in (("hub", public), ("local", local)):
        rows = [index_row(r, record_rel(r)) for r in part]
        engine.set_table(source, pa.Table.from_pylist(rows, schema=INDEX_SCHEMA) if rows else None)
    return engine


def failing(public: list[dict], local: list[dict] = ()) -> list[str]:
    facts = trust(engine_of(public, local), boards.matched("true", False, None), [], STANDARD)[MODEL]
    return verdict(facts, STANDARD)


def test_every_eval_task_by_the_book_and_public_is_verified():
    assert len(STANDARD.eval_tasks) == 50
    assert failing(records()) == []
    [line] = boards.board(engine_of(records()), standard=STANDARD)
    assert line[boards.MARK] == "verified" and line["tasks"] == 50


@pytest.mark.parametrize(("change", "named"), [
    ("task", "not every eval task played: 49 of 50"),
    ("server", "1 episode(s) on another server than `embedded` or `https://fineenvs-portsimenv.hf.space`"),
    ("limits", "1 episode(s) not under the default limits (12 turns, 24,000 tokens a turn)"),
    ("harness", "1 episode(s) with no harness version recorded"),
    ("error", "1 episode(s) with a harness error"),
    ("ended", "1 episode(s) with a harness error"),
    ("private", "1 record(s) not public"),
])
def test_each_failing_condition_is_named_alone(change, named):
    played, local = records(), []
    first = played[0]
    if change == "task":
        played = played[1:]
    elif change == "server":
        first["env_url"] = "https://someone-elses-port.hf.space"
    elif change == "limits":
        first["limits"] = {**first["limits"], "max_turns": 30}
    elif change == "harness":
        del first["app_version"]
    elif change == "error":
        first["errors"] = ["RateLimitError: Error code: 429"]
    elif change == "ended":
        first["end_reason"] = "interrupted"
    elif change == "private":
        played, local = played[1:], [first]
    [reason] = failing(played, local)
    assert reason.startswith(named)
    [line] = boards.board(engine_of(played, local), standard=STANDARD)
    assert line[boards.MARK] == ""


def test_provisional_under_twenty_tasks_or_fifty_battles():
    assert (PROVISIONAL_TASKS, PROVISIONAL_BATTLES) == (20, 50)
    assert provisional_why(20, 50) is None
    assert provisional_why(19, 50) == "19 tasks (fewer than 20)"
    assert provisional_why(20, 49) == "49 battles (fewer than 50)"
    assert provisional_why(1, None) == "1 task (fewer than 20)"
    few = records(tasks=STANDARD.eval_tasks[:19])
    [line] = boards.board(engine_of(few), standard=STANDARD)
    assert line[boards.MARK] == "provisional"
    facts = trust(engine_of(few), boards.matched("true", False, None), [], STANDARD, {MODEL: 3})[MODEL]
    card = card_markdown(facts, STANDARD)
    assert "**provisional**: 19 tasks (fewer than 20) and 3 battles (fewer than 50)" in card
    assert "not every eval task played: 19 of 50" in card


def test_the_card_names_what_was_played_under(tmp_path, capsys):
    switched = records(model="hf:org/m:cerebras|together", tasks=STANDARD.eval_tasks[:3],
                       provider_switches=["cerebras -> together: 503"])
    with RolloutStore(tmp_path, writer_id="w1") as store:
        for record in switched:
            store.save(record)
    assert main(["board", "--dir", str(tmp_path), "--card", "hf:org/m:cerebras|together"]) == 0
    card = capsys.readouterr().out
    for words in ("| harness | `0.1.0` |", "| env server | `embedded` |", "| turn limit | `12` |",
                  "| token limit per turn | `24000` |", "routes `cerebras`, `together`",
                  "| fallbacks taken | 3 in 3 episode(s) |", "| dates | 2026-11-01 to 2026-11-03 |",
                  "| episodes | 3 |", "3 (3 of the 50 eval tasks)", "3 record(s) not public", "**provisional**"):
        assert words in card, words
    assert main(["board", "--dir", str(tmp_path), "--card", "nobody"]) == 2
    assert "no model 'nobody' on this board (models: hf:org/m:cerebras|together)" in capsys.readouterr().err
