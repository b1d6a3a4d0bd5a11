"""The page's downloads (viewer/downloads.py): named by the app, inside the app's own folder, gone after a while."""

from __future__ import annotations

import json
import os
import time

import pytest

from testkit.records import make_record
from viewer import downloads
from viewer.downloads import Downloads


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
    old = time.time() - downloads.KEEP_S - 1
    os.utime(first.parent, (old, old))
    second = folder.make("rollouts-2.csv", lambda path: path.write_text("b"))
    assert not first.exists() and second.exists()
