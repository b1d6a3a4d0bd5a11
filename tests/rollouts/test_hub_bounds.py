"""Hub files are read within a size bound (rollouts/sources/hub.py): an index file or a record larger than the
bound is refused before it is fetched, and a cached copy larger than it is not read, against testkit/fakehub.py
with the real huggingface_hub."""

from __future__ import annotations

import pytest

import rollouts.sources.hub as hub_module
from rollouts.sources import SourceError
from rollouts.sources.hub import HubSource
from rollouts.store import RolloutStore
from testkit.fakehub import running_fakehub
from testkit.published import folder_files, publish
from testkit.records import make_records

REPO = "team/bounded"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bounded")
    with running_fakehub() as server:
        with RolloutStore(folder / "rollouts", writer_id="w1") as store:
            for record in make_records(3, seed=5):
                store.save(record)
        publish(server.url, REPO, folder_files(folder / "rollouts"))
        yield server


def fetched(hub, since: int) -> int:
    """Files downloaded since request number `since`."""
    return sum(1 for _, method, route, _ in hub.requests[since:] if route == "resolve" and method == "GET")


def test_an_index_file_over_the_bound_is_refused_before_a_byte_of_it_is_fetched(hub, tmp_path, monkeypatch):
    monkeypatch.setattr(hub_module, "INDEX_FILE_MAX_BYTES", 200)  # the real one is 128 MB; this index is ~3 KB
    before = len(hub.requests)
    loaded = HubSource(REPO, endpoint=hub.url, cache_dir=tmp_path).load()
    assert loaded.table is None and "more than the 200 bytes this app reads from one file" in loaded.error
    assert fetched(hub, before) == 0


def test_a_record_over_the_bound_is_refused_fetched_or_cached(hub, tmp_path, monkeypatch):
    source = HubSource(REPO, endpoint=hub.url, cache_dir=tmp_path)
    row = source.load().table.to_pylist()[0]
    monkeypatch.setattr(hub_module, "RECORD_MAX_BYTES", 1000)  # a test record is a few KB
    before = len(hub.requests)
    with pytest.raises(SourceError, match=r"rollouts/.*\.json is [\d.]+ KB, more than the 1,000 bytes"):
        source.record(row)
    assert fetched(hub, before) == 0  # refused on the size the Hub gave

    monkeypatch.setattr(hub_module, "RECORD_MAX_BYTES", 32 << 20)
    assert source.record(row)["episode_id"] == row["episode_id"]  # now in huggingface_hub's cache
    monkeypatch.setattr(hub_module, "RECORD_MAX_BYTES", 1000)
    with pytest.raises(SourceError, match="more than"):
        source.record(row)  # the cached copy is held to the same bound
