"""Our rollout dataset on the Hub as a Browse source, and the Hub access every Hub source shares.

One cheap probe (the repo's current commit, with a short timeout and no retries) comes first: an unchanged commit
means nothing to read, an unreachable Hub means a clear message at once instead of huggingface_hub's retry loop
(about 23 s). Then the `index/` tree is listed at that commit and only index files (JSONL, and compacted Parquet)
whose blob id changed are downloaded (`hf_hub_download`, cached); the rows are one per episode id. Offline
(`HF_HUB_OFFLINE=1`) what huggingface_hub has cached is used, and the page says so. Every error message names the
source and the cause, never a token.

Every download is bounded in time (`bounded`) and in size: a file the listing (or, for a single file, the Hub's
paths-info) says is larger than the caller's `max_bytes` is refused before a byte of it is fetched, and a cached
copy larger than that is not read. The bounds are far above real files: an index file is folded into Parquet at
4 MB (rollouts.hub_push) and a writer's day of Parquet rows is a few MB; a record is tens of KB, and the largest
this app can write (ten checks of a hostile plan, each answered with 0.33 MB of violations, twice over: the
message and the step) about 7 MB.
"""

from __future__ import annotations

import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import pyarrow as pa

from rollouts import settings
from rollouts.index.format import concat_tables, first_per_episode, in_precedence, read_jsonl, read_parquet
from rollouts.layout import is_record_rel, record_rel_for
from rollouts.schema import RecordError, parse_record
from rollouts.sources import Loaded, SourceError

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 5.0     # the first request to a Hub: connect and answer
FILE_TIMEOUT_S = 20.0     # one index file or record download, retries included
INDEX_FILE_MAX_BYTES = 128 << 20
RECORD_MAX_BYTES = 32 << 20
DOWNLOAD_WORKERS = 4

_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="browse-hub")


def _hub():
    # The submodules used through the package (`hub.utils`, `hub.errors`) are lazy attributes that exist only once
    # imported; a process that has not imported them elsewhere would fail on the first probe.
    import huggingface_hub
    import huggingface_hub.errors
    import huggingface_hub.utils

    return huggingface_hub


def offline() -> bool:
    """huggingface_hub's offline switch (HF_HUB_OFFLINE), read now rather than at its import."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE) or settings.HF_HUB_OFFLINE.get()


def bounded(fn, timeout: float, what: str):
    """Run `fn()` with a deadline: huggingface_hub retries a refused connection for about 23 s, and a page must
    not wait that long. Past the deadline the call is left to finish in the background."""
    future = _pool.submit(fn)
    try:
        return future.result(timeout=timeout)
    except FutureTimeout:
        raise SourceError(f"{what}: no answer within {timeout:.0f} s") from None


def describe(exc: BaseException) -> str:
    """A short, token-free reason for a Hub failure."""
    hub = _hub()
    errors = hub.errors
    if isinstance(exc, SourceError):
        return str(exc)
    if isinstance(exc, errors.OfflineModeIsEnabled):
        return "offline mode (HF_HUB_OFFLINE) and nothing cached"
    if isinstance(exc, errors.GatedRepoError):
        return "the dataset is gated: accept its terms and set HF_TOKEN"
    if isinstance(exc, errors.RepositoryNotFoundError):
        return "no such dataset (or it is private and HF_TOKEN cannot read it)"
    if isinstance(exc, errors.RevisionNotFoundError):
        return "the dataset has no main branch"
    if isinstance(exc, errors.EntryNotFoundError):
        return "file not found in the dataset"
    if isinstance(exc, errors.LocalEntryNotFoundError):
        return "the Hub cannot be reached and nothing is cached"
    if isinstance(exc, errors.HfHubHTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", None)
        return f"the Hub answered HTTP {status}" if status else "the Hub refused the request"
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"cannot reach the Hub ({type(exc).__name__}: {text[:160]})"


class HubRepo:
    """A dataset repo on a Hub endpoint: the probe, listing and downloads every Hub source needs."""

    def __init__(self, repo: str, *, endpoint: str | None = None, token: str | None = None,
                 cache_dir: str | os.PathLike | None = None, probe_timeout: float = PROBE_TIMEOUT_S,
                 file_timeout: float = FILE_TIMEOUT_S) -> None:
        from huggingface_hub import constants

        self.repo = repo
        self.endpoint = (endpoint or settings.HF_ENDPOINT.get() or constants.ENDPOINT).rstrip("/")
        self.token = token
        self.cache_dir = str(cache_dir) if cache_dir else None
        self.probe_timeout = probe_timeout
        self.file_timeout = file_timeout
        self._listed: tuple[str | None, dict[str, int]] = (None, {})  # the last listing: revision, path -> bytes

    def head_commit(self) -> str:
        """The sha of `main` now: one GET, a short timeout, no retries (huggingface_hub's raise_for_status)."""
        hub = _hub()
        url = f"{self.endpoint}/api/datasets/{self.repo}/revision/main"
        headers = hub.utils.build_hf_headers(token=self.token or False)
        response = hub.get_session().get(url, headers=headers, timeout=self.probe_timeout)
        hub.utils.hf_raise_for_status(response)
        sha = response.json().get("sha")
        if not isinstance(sha, str):
            raise SourceError("the Hub's answer has no commit sha")
        return sha

    def list_files(self, folder: str, revision: str) -> list[tuple[str, str]]:
        """(path, blob id) of every file under `folder` at `revision`; [] when the folder does not exist."""
        hub = _hub()
        api = hub.HfApi(endpoint=self.endpoint, token=self.token or False)

        def listing() -> list[tuple[str, str]]:
            try:
                entries = api.list_repo_tree(self.repo, path_in_repo=folder, recursive=True, repo_type="dataset",
                                             revision=revision)
                files = [e for e in entries if isinstance(e, hub.hf_api.RepoFile)]
            except hub.errors.EntryNotFoundError:
                return []
            self._listed = (revision, {e.path: _size(e) for e in files})
            return [(e.path, e.blob_id) for e in files]

        return bounded(listing, self.file_timeout, f"listing {folder}/ of {self.repo}")

    def download(self, path: str, revision: str | None, *, cached_only: bool = False,
                 max_bytes: int | None = None) -> str:
        """The local copy of `path` (huggingface_hub's cache), fetched unless `cached_only`; SourceError for a file
        over `max_bytes` (default INDEX_FILE_MAX_BYTES), or one that takes longer than the file timeout."""
        hub = _hub()
        max_bytes = INDEX_FILE_MAX_BYTES if max_bytes is None else max_bytes

        def fetch() -> str:
            if not cached_only:
                self._refuse_over(path, revision, self._size_of(path, revision), max_bytes)
            local = hub.hf_hub_download(self.repo, path, repo_type="dataset", revision=revision,
                                        endpoint=self.endpoint, token=self.token or False, cache_dir=self.cache_dir,
                                        etag_timeout=self.probe_timeout, local_files_only=cached_only)
            self._refuse_over(path, revision, os.path.getsize(local), max_bytes)  # what arrived, whatever was said
            return local

        if cached_only:
            return fetch()
        return bounded(fetch, self.file_timeout, f"downloading {path}")

    def _size_of(self, path: str, revision: str | None) -> int | None:
        """The file's size as the last listing said (same revision), else as the Hub's paths-info says now (None:
        not in the repo, and the download will say so)."""
        listed_at, sizes = self._listed
        if revision is not None and revision == listed_at and path in sizes:
            return sizes[path]
        hub = _hub()
        api = hub.HfApi(endpoint=self.endpoint, token=self.token or False)
        for entry in api.get_paths_info(self.repo, [path], revision=revision, repo_type="dataset"):
            if isinstance(entry, hub.hf_api.RepoFile) and entry.path == path:
                return _size(entry)
        return None

    @staticmethod
    def _refuse_over(path: str, revision: str | None, size: int | None, max_bytes: int) -> None:
        if size is not None and size > max_bytes:
            raise SourceError(f"{path} is {_bytes_text(size)}, more than the {_bytes_text(max_bytes)} this app "
                              "reads from one file")


class HubSource:
    """Our rollout dataset on the Hub (ROLLOUT_DATASET): its index files, and records on demand."""

    name = "hub"

    def __init__(self, repo: str, **options: Any) -> None:
        self.hub = HubRepo(repo, **options)
        self.label = f"Hub dataset {repo}"
        self.revision: str | None = None
        self._files: dict[str, tuple[str, pa.Table, int]] = {}  # path -> (blob id, rows, lines left out)
        self._table: pa.Table | None = None
        self._skipped = 0
        self._lock = threading.Lock()

    def load(self) -> Loaded:
        with self._lock:
            if offline():
                return Loaded(self.name, self.label, table=self._table,
                              error=None if self._table is not None else
                              "offline (HF_HUB_OFFLINE is set): the Hub dataset is not read",
                              note="offline: rows as last loaded" if self._table is not None else None,
                              changed=False)
            try:
                sha = self.hub.head_commit()
                if sha == self.revision and self._table is not None:
                    return Loaded(self.name, self.label, table=self._table, changed=False, skipped=self._skipped)
                listed = dict(self.hub.list_files("index", sha))
                wanted = {p: oid for p, oid in listed.items() if p.endswith((".jsonl", ".parquet"))}
                fetch = [p for p, oid in wanted.items() if self._files.get(p, ("",))[0] != oid]
                with ThreadPoolExecutor(DOWNLOAD_WORKERS) as workers:
                    tables = list(workers.map(lambda p: self._read(p, sha), fetch))
                files = {p: v for p, v in self._files.items() if p in wanted}
                files.update({p: (wanted[p], *read) for p, read in zip(fetch, tables, strict=True)})
                self._files, self.revision = files, sha
                self._table = first_per_episode(concat_tables(files[p][1] for p in in_precedence(files)))
                self._skipped = sum(files[p][2] for p in files)
                note = None if wanted else "no index files yet"
                return Loaded(self.name, self.label, table=self._table, note=note, skipped=self._skipped)
            except Exception as exc:  # any failure: a message for the page, the other sources still load
                log.info("hub source %s: %s", self.hub.repo, describe(exc))
                return Loaded(self.name, self.label, table=self._table, error=describe(exc),
                              note="showing rows from the last successful load" if self._table is not None else None,
                              changed=False)

    def _read(self, path: str, revision: str) -> tuple[pa.Table, int]:
        local = self.hub.download(path, revision)
        if path.endswith(".parquet"):
            table, skipped = read_parquet(local)
        else:
            with open(local, "rb") as f:
                table, skipped = read_jsonl(f.read())
        if skipped:  # read once per blob id, so reported once
            log.warning("%s %s: skipped %d index line(s) that are unreadable or do not point at their record",
                        self.hub.repo, path, skipped)
        return table, skipped

    def record(self, row: dict) -> dict:
        episode_id = str(row.get("episode_id") or "")
        path = row.get("path")
        if not is_record_rel(path, episode_id):
            try:
                path = record_rel_for(episode_id, str(row.get("started") or "")[:10])
            except ValueError:
                raise SourceError(f"the Hub index row of {episode_id or '?'} does not say where its record is") \
                    from None
        try:
            try:
                local = self.hub.download(path, self.revision, cached_only=True, max_bytes=RECORD_MAX_BYTES)
            except SourceError:
                raise
            except Exception:
                if offline():
                    raise
                local = self.hub.download(path, self.revision, max_bytes=RECORD_MAX_BYTES)
            with open(local, "rb") as f:
                data = f.read()
        except Exception as exc:
            raise SourceError(f"{self.label}: cannot fetch {path}: {describe(exc)}") from None
        try:
            return parse_record(data, episode_id)
        except RecordError as exc:
            raise SourceError(str(exc)) from None


def _size(entry: Any) -> int:
    """A listed file's size: its LFS object's when it is one (the pointer's own size says nothing)."""
    lfs = getattr(entry, "lfs", None)
    return int(getattr(lfs, "size", None) or entry.size or 0)


def _bytes_text(size: int) -> str:
    if size >= 1 << 20:
        return f"{size / 2**20:,.1f} MB"
    return f"{size / 1024:,.1f} KB" if size >= 1024 else f"{size:,} bytes"
