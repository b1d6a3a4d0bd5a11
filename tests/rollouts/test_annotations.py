"""Flags on a step as data (rollouts/annotations.py): one row per flag under `annotations/<day>/<writer>.jsonl`,
validated on write and on read, hidden in place, read back by `datasets.load_dataset(..., "annotations")` from the
folder and from the Hub after the pusher took it there."""

from __future__ import annotations

import json
import threading

import datasets
import pytest
from huggingface_hub import snapshot_download

from rollouts.annotations import FlagBook, FlagError, flag_problem, new_flag, read_flags, validate_flag
from rollouts.archive import Archive
from rollouts.filters import Filters
from rollouts.layout import annotation_rel
from rollouts.store import RolloutStore
from testkit.fakehub import running_fakehub
from testkit.records import make_record

NOW = 1_796_680_000.0  # 2026-12-07T21:46:40Z
DAY = "2026-12-07"


def flag(episode: str = "a1b2c3d4e5f6", **change) -> dict:
    return {**new_flag(episode, "draft", 2, "misread_rule", "moved the priority ship", "ana", now=NOW), **change}


@pytest.mark.parametrize("change, field", [
    ({"label": "looks fine"}, "label"), ({"step": 0}, "step"), ({"step_kind": "check"}, "step_kind"),
    ({"note": "x" * 501}, "note"), ({"author": "<b>ana</b>"}, "author"), ({"time": "yesterday"}, "time"),
    ({"hidden": "no"}, "hidden"), ({"episode_id": "../x"}, "episode_id"), ({"extra": 1}, "extra"),
    ({"note": "a\u202eb"}, "note"),
])
def test_an_unsound_flag_is_refused_naming_the_field(change, field):
    assert flag_problem(flag(**change)).startswith(field)
    with pytest.raises(FlagError, match=field):
        validate_flag(flag(**change))


def test_the_book_appends_reads_and_hides_in_place_keeping_one_row_per_flag(tmp_path):
    told: list[str] = []
    book = FlagBook(tmp_path, "w1", on_write=told.append)
    first, second = book.add(flag()), book.add(flag(label="good_recovery", step_kind="turn", step=4, note=""))
    rel = annotation_rel(DAY, "w1")
    assert told == [rel, rel] and [r["flag_id"] for r in read_flags(tmp_path)] == [first["flag_id"],
                                                                                      second["flag_id"]]
    hidden = book.hide(first["flag_id"])
    assert hidden == {**first, "hidden": True} and told[-1] == rel
    lines = [json.loads(line) for line in (tmp_path / rel).read_text().splitlines()]
    assert lines == [hidden, second]  # rewritten in place: still one row per flag, in order
    with pytest.raises(KeyError):
        book.hide("ffffffffffff")


def test_hides_while_other_threads_flag_lose_no_appended_row(tmp_path):
    """A hide swaps the whole file under the lock appends take: a flag appended meanwhile goes into the new file."""
    book = FlagBook(tmp_path, "w1")
    first = [book.add(flag(step=n + 1)) for n in range(20)]
    added: list[dict] = []

    def flag_more(worker: int) -> None:
        writer = FlagBook(tmp_path, "w1")  # as another process's book on the same folder would
        for n in range(25):
            added.append(writer.add(flag(step=100 + worker * 25 + n)))

    threads = [threading.Thread(target=flag_more, args=(w,)) for w in range(3)]
    for thread in threads:
        thread.start()
    for row in first:
        book.hide(row["flag_id"])
    for thread in threads:
        thread.join()
    rows = {r["flag_id"]: r for r in read_flags(tmp_path)}
    assert len(rows) == len(first) + len(added) == 95
    assert all(rows[r["flag_id"]]["hidden"] for r in first) and not any(rows[r["flag_id"]]["hidden"] for r in added)


def test_rows_read_back_from_the_dataset_are_checked_like_rows_written(tmp_path):
    """The files come back from the dataset, anyone's to edit: a row that breaks the schema, lies outside its own
    day's folder or repeats a flag id is left out."""
    book = FlagBook(tmp_path, "w1")
    kept = book.add(flag())
    path = tmp_path / annotation_rel(DAY, "w1")
    with path.open("a") as f:
        f.write(json.dumps({**flag(), "note": "<script>" * 100}) + "\n")  # over 500 characters
        f.write(json.dumps({**kept, "label": "other"}) + "\n")  # a second row under a kept id
        f.write("not json\n")
    elsewhere = tmp_path / annotation_rel("2026-12-01", "w2")
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_text(json.dumps(flag(flag_id="0123456789ab")) + "\n")  # made on the 7th, filed on the 1st
    assert read_flags(tmp_path) == [kept]


def test_load_dataset_reads_the_annotations_config_and_the_archive_filters_and_counts_by_it(tmp_path):
    store = RolloutStore(tmp_path, writer_id="w1")
    a, b = make_record(seed=3), make_record(seed=4)
    store.save(a)
    store.save(b)
    book = FlagBook(tmp_path, store.writer_id)
    shown = book.add(flag(a["episode_id"]))
    gone = book.add(flag(b["episode_id"], label="arithmetic_slip"))
    book.hide(gone["flag_id"])
    cache = str(tmp_path / ".cache")
    rows = datasets.load_dataset(str(tmp_path), "annotations", split="train", cache_dir=cache)
    assert sorted(rows["flag_id"]) == sorted([shown["flag_id"], gone["flag_id"]])
    assert rows.features["time"] == datasets.Value("timestamp[us, tz=UTC]")
    assert rows.features["step"] == datasets.Value("int64") and rows.features["hidden"] == datasets.Value("bool")
    assert {r["flag_id"]: r["hidden"] for r in rows} == {shown["flag_id"]: False, gone["flag_id"]: True}
    assert len(datasets.load_dataset(str(tmp_path), "index", split="train", cache_dir=cache)) == 2  # beside it
    archive = Archive.of_folder(tmp_path)
    flagged = archive.query(Filters.parse(flagged="misread a rule"))[0]
    assert flagged.column("episode_id").to_pylist() == [a["episode_id"]]
    assert flagged.column("flags").to_pylist() == [1]
    # The hidden flag counts nowhere: not in its label's filter, not in the column.
    assert archive.query(Filters.parse(flagged="arithmetic_slip"))[1] == 0
    every = {r["episode_id"]: r["flags"] for r in archive.query(Filters())[0].to_pylist()}
    assert every == {a["episode_id"]: 1, b["episode_id"]: 0}
    assert [f["flag_id"] for f in archive.flags_of(a["episode_id"])] == [shown["flag_id"]]
    store.close()


def test_the_pusher_takes_flags_to_the_hub_where_load_dataset_reads_them(tmp_path):
    token, repo = "hf_test_flags", "arena/flags"
    with running_fakehub(token=token) as hub:
        store = RolloutStore(tmp_path / "space", writer_id="w1", dataset=repo, token=token, endpoint=hub.url,
                             push_every_s=3600, push_every_n=1000, retry_base_s=0.05, retry_max_s=0.4)
        try:
            record = make_record(seed=9)
            store.save(record)
            book = FlagBook(store.root, store.writer_id, on_write=store.notify)
            row = book.add(flag(record["episode_id"]))
            rel = annotation_rel(DAY, "w1")
            assert store.flush(timeout=30)
            assert hub.files(repo)[rel] == (store.root / rel).read_bytes()
            assert "annotations" in hub.files(repo)["README.md"].decode()
            book.hide(row["flag_id"])
            assert store.flush(timeout=30)
            assert json.loads(hub.files(repo)[rel])["hidden"] is True
            copy = snapshot_download(repo, repo_type="dataset", endpoint=hub.url, token=token,
                                     local_dir=tmp_path / "copy")
            loaded = datasets.load_dataset(copy, "annotations", split="train", cache_dir=str(tmp_path / ".cache"))
            assert loaded["flag_id"] == [row["flag_id"]] and loaded["hidden"] == [True]
            assert loaded["note"] == ["moved the priority ship"] and loaded["episode_id"] == [record["episode_id"]]
        finally:
            store.close()
