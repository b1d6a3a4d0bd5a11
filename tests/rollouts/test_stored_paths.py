"""Stored paths stay inside the store: a planted index row (`../`, an absolute path, another episode's record) is
skipped, counted and answered exactly like a missing rollout, by every reader; a truncated record gets the same
clear error from `/rollout`, a watch link and Browse (this folder or the Hub dataset)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import pytest

from live.runs import RunRegistry
from rollouts.archive import Archive, RolloutNotFound
from rollouts.layout import record_rel
from rollouts.sources import SourceError
from rollouts.sources.hub import HubSource
from rollouts.sources.local import LocalSource
from rollouts.store import RolloutStore
from testkit import aio
from testkit.fakehub import running_fakehub
from testkit.published import folder_files, publish
from testkit.records import make_record
from viewer.browse.views import status_markdown
from viewer.records import RecordCache
from viewer.run import api
from viewer.run.section import attach_episode

PLANTED = ["dotdot01", "absolute01", "passwd01", "otherid01"]


@pytest.fixture
def planted(tmp_path: Path) -> SimpleNamespace:
    """A store with one sound rollout, a secret outside it that reads as a record, and four planted rows."""
    root = tmp_path / "data" / "rollouts"
    store = RolloutStore(root, writer_id="honest")
    good = make_record(seed=1, episode_id="goodone01")
    store.save(good)
    secret = tmp_path / "data" / "outside" / "secret.json"
    secret.parent.mkdir(parents=True)
    secret.write_text(json.dumps(make_record(seed=2, episode_id="dotdot01")))
    paths = {"dotdot01": "../outside/secret.json", "absolute01": str(secret), "passwd01": "/etc/passwd",
             "otherid01": record_rel(good)}
    rows = [{**store.rows()[0], "episode_id": eid, "path": path} for eid, path in paths.items()]
    planted_file = root / "index" / "2026-01-01" / "planter.jsonl"
    planted_file.parent.mkdir(parents=True)
    planted_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    registry = RunRegistry(store.save)
    ctx = SimpleNamespace(store=store, registry=registry, public=lambda episode_id: True,
                          records=RecordCache(Archive.of_folder(root), registry.get))
    yield SimpleNamespace(root=root, store=store, ctx=ctx, secret=secret, paths=paths)
    store.close()


def _same(message: str, episode_id: str) -> str:
    return message.replace(episode_id, "<id>")


def _rollout_error(ctx, episode_id: str) -> str:
    with pytest.raises(gr.Error) as caught:
        api.rollout(ctx, episode_id)
    return _same(caught.value.message, episode_id)


def _attach_status(ctx, episode_id: str) -> str:
    section = SimpleNamespace(ctx=ctx, status="status")

    async def frames() -> list[dict]:
        return [frame async for frame in attach_episode(section, episode_id, None)]

    return _same(aio.run(frames())[-1]["status"], episode_id)


def test_planted_rows_answer_like_missing_rollouts_in_the_store_and_the_api(planted):
    missing = _rollout_error(planted.ctx, "neverwas01")
    assert "no rollout" in missing.lower()
    for episode_id in PLANTED:
        assert planted.store.load(episode_id) is None
        assert not planted.store.has(episode_id)
        assert _rollout_error(planted.ctx, episode_id) == missing, episode_id
        assert _attach_status(planted.ctx, episode_id) == _attach_status(planted.ctx, "neverwas01")
    assert {r["episode_id"] for r in planted.store.rows()} == {"goodone01"}
    assert planted.store.load("goodone01")["episode_id"] == "goodone01"


def test_planted_rows_are_skipped_counted_and_shown_by_browse(planted):
    source = LocalSource(planted.root)
    index = Archive(source)
    index.refresh_local(force=True)
    assert index.engine.fetch().column("episode_id").to_pylist() == ["goodone01"]
    assert index.engine.skipped["local"] == len(PLANTED)
    with pytest.raises(RolloutNotFound) as missing:
        index.record("neverwas01")
    for episode_id in PLANTED:
        with pytest.raises(RolloutNotFound) as caught:
            index.record(episode_id)
        assert _same(str(caught.value), episode_id) == _same(str(missing.value), "neverwas01")
        # Even handed the planted row itself, the source never opens the file it names.
        with pytest.raises(SourceError) as direct:
            source.record({"episode_id": episode_id, "path": planted.paths[episode_id]})
        assert "missing from the folder" in str(direct.value)
    index.refresh_local(force=True)
    line = status_markdown(index.statuses(), shown=1, total=1)
    assert f"{len(PLANTED)} index lines skipped" in line


def test_a_record_file_linked_out_of_the_store_is_not_read(planted):
    link = planted.root / "rollouts" / "2026-01-01" / "linked01.json"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(planted.secret)
    assert planted.store.load("linked01") is None
    assert LocalSource(planted.root).locate("linked01") is None
    assert _rollout_error(planted.ctx, "linked01") == _rollout_error(planted.ctx, "neverwas01")


def test_a_truncated_record_gets_one_clear_error_on_every_path(planted):
    record = make_record(seed=3, episode_id="torn01")
    path = planted.store.save(record).path
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    expected = "The record of torn01 cannot be read: the file is damaged or truncated."
    with pytest.raises(gr.Error) as caught:
        api.rollout(planted.ctx, "torn01")
    assert caught.value.message == expected
    assert _attach_status(planted.ctx, "torn01") == f"⚠️ {_same(expected, 'torn01')}"
    with pytest.raises(SourceError) as browsed:
        Archive(LocalSource(planted.root)).record("torn01")
    assert str(browsed.value) == expected


def test_a_truncated_record_on_the_hub_gets_the_same_error(tmp_path):
    token = "hf_test_secret_token"
    folder = tmp_path / "published"
    with RolloutStore(folder, writer_id="w1") as store:
        path = store.save(make_record(seed=4, episode_id="torn02")).path
    path.write_bytes(path.read_bytes()[:100])
    with running_fakehub(token=token) as hub:
        publish(hub.url, "team/torn", folder_files(folder), token=token)
        source = HubSource("team/torn", endpoint=hub.url, cache_dir=tmp_path / "cache")
        row = source.load().table.to_pylist()[0]
        with pytest.raises(SourceError) as caught:
            source.record(row)
    assert str(caught.value) == "The record of torn02 cannot be read: the file is damaged or truncated."
