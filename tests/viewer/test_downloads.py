"""The page's downloads (viewer/downloads.py): named by the app, inside the app's own folder, gone after a while."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import pytest
from gradio.utils import get_upload_folder

from testkit.records import make_record
from viewer import downloads
from viewer.downloads import DownloadRefused, Downloads


def test_a_download_is_named_by_the_app_not_by_the_record(tmp_path):
    folder = Downloads(tmp_path / "downloads")
    record = {**make_record(seed=1), "episode_id": "../../.push/running/forged01"}  # a Hub record's own claim
    for asked in ("../../.push/running/forged01", "/etc/passwd", "ok_id01"):
        path = folder.record_json(asked, record)
        assert path.resolve().is_relative_to(folder.folder.resolve()) and path.parent.parent == folder.folder
        assert path.name == ("ok_id01.json" if asked == "ok_id01" else "rollout.json")
        assert json.loads(path.read_text()) == record
    assert not (tmp_path / ".push").exists()
    with pytest.raises(ValueError, match="not a download name"):
        folder.make("../x.csv", lambda path: path.write_text(""))


def test_old_downloads_are_removed_when_the_next_one_is_made(tmp_path, monkeypatch):
    folder = Downloads(tmp_path / "downloads")
    first = folder.make("rollouts-1.csv", lambda path: path.write_text("a"))
    now = time.monotonic()
    monkeypatch.setattr(downloads.time, "monotonic", lambda: now + downloads.KEEP_S + 1)
    second = folder.make("rollouts-2.csv", lambda path: path.write_text("b"))
    assert not first.exists() and second.exists()


def test_a_visitor_prepares_only_a_few_downloads_at_once(tmp_path):
    folder = Downloads(tmp_path / "downloads", at_once=2)
    release, started = threading.Event(), threading.Barrier(3)

    def slow(path):
        started.wait(5)
        release.wait(5)
        path.write_text("x")

    workers = [threading.Thread(target=folder.make, args=(f"e{i}.csv", slow), kwargs={"visitor": "ip:10.0.0.1"})
               for i in range(2)]
    for worker in workers:
        worker.start()
    started.wait(5)
    with pytest.raises(DownloadRefused, match="2 downloads being prepared already"):
        folder.make("e3.csv", lambda path: path.write_text("x"), visitor="ip:10.0.0.1")
    other = folder.make("e4.csv", lambda path: path.write_text("x"), visitor="ip:10.0.0.2")  # another visitor
    release.set()
    for worker in workers:
        worker.join(5)
    assert other.exists() and folder.make("e5.csv", lambda path: path.write_text("x"), visitor="ip:10.0.0.1")


def test_a_visitors_bytes_are_bounded_and_a_refused_file_is_not_kept(tmp_path):
    folder = Downloads(tmp_path / "downloads", visitor_bytes=1024)
    first = folder.make("a.csv", lambda path: path.write_bytes(b"x" * 600), visitor="ip:10.0.0.1")
    with pytest.raises(DownloadRefused, match="Your downloads already hold 1 KB here"):
        folder.make("b.csv", lambda path: path.write_bytes(b"x" * 600), visitor="ip:10.0.0.1")
    with pytest.raises(DownloadRefused, match="would be 2 KB, more than the 1 KB one download may be"):
        folder.make("c.csv", lambda path: path.write_bytes(b"x" * 2000), visitor="ip:10.0.0.2")
    assert [p.name for p in folder.folder.rglob("*.csv")] == ["a.csv"] and folder.held_bytes() == 600
    folder.served(first)  # fetched: gone, and the visitor's budget is free again
    assert not first.exists() and folder.held_bytes() == 0
    assert folder.make("b.csv", lambda path: path.write_bytes(b"x" * 600), visitor="ip:10.0.0.1").exists()


def test_a_visitors_rollouts_opened_one_after_another_hold_one_json(tmp_path):
    folder = Downloads(tmp_path / "downloads")
    first = folder.record_json("ok_id01", make_record(seed=1), visitor="ip:10.0.0.1")
    other = folder.record_json("ok_id01", make_record(seed=1), visitor="ip:10.0.0.2")
    second = folder.record_json("ok_id02", make_record(seed=2), visitor="ip:10.0.0.1")
    assert not first.exists() and second.exists() and other.exists()


def test_every_download_together_is_bounded(tmp_path):
    folder = Downloads(tmp_path / "downloads", total_bytes=1000)
    for i in range(2):
        folder.make(f"{i}.csv", lambda path: path.write_bytes(b"x" * 500), visitor=f"ip:10.0.0.{i}")
    with pytest.raises(DownloadRefused, match="as many downloads as it may"):
        folder.make("2.csv", lambda path: path.write_bytes(b"x"), visitor="ip:10.0.0.9")


def test_downloads_written_at_the_same_time_together_stay_within_the_total(tmp_path):
    # Each reservation sees the others' sizes as 0 while they are written: the total is checked again once written.
    folder = Downloads(tmp_path / "downloads", total_bytes=1000)
    started, release = threading.Barrier(4), threading.Event()
    outcomes: list[object] = []

    def write(path):
        started.wait(5)
        release.wait(5)
        path.write_bytes(b"x" * 400)

    def one(i):
        try:
            outcomes.append(folder.make(f"{i}.csv", write, visitor=f"ip:10.0.1.{i}"))
        except DownloadRefused as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    release.set()
    for thread in threads:
        thread.join(10)
    assert sum(isinstance(o, Path) for o in outcomes) == 2 and folder.held_bytes() <= 1000
    refused = [o for o in outcomes if isinstance(o, DownloadRefused)]
    assert len(refused) == 2 and all("as many downloads as it may" in str(o) for o in refused)
    assert sorted(p.name for p in (tmp_path / "downloads").rglob("*.csv")) == sorted(
        o.name for o in outcomes if isinstance(o, Path))


def test_a_download_goes_once_the_app_has_served_it_whole(arena):
    """Through the app as it runs (app.serve's middleware around Gradio's own file route)."""
    ctx = arena.ctx
    path = ctx.downloads.make("rollouts-3.csv", lambda p: p.write_text("a,b\n1,2\n"), visitor="ip:10.9.9.9")
    assert path.resolve().is_relative_to(Path(get_upload_folder()).resolve())  # Gradio serves it, no copy kept
    answer = httpx.get(f"{arena.url}gradio_api/file={path}")
    assert answer.status_code == 200 and answer.text == "a,b\n1,2\n"
    deadline = time.monotonic() + 5  # removed as the last byte goes, which the client may see first
    while path.parent.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not path.exists() and not path.parent.exists()
    assert httpx.get(f"{arena.url}gradio_api/file={path}").status_code in (403, 404)
    kept = ctx.downloads.make("rollouts-4.csv", lambda p: p.write_text("x"))
    assert httpx.head(f"{arena.url}gradio_api/file={kept}").status_code == 200 and kept.exists()  # not a fetch
