"""Where Browse reads rollouts from: the local folder, our Hub dataset and upstream's published Parquet.

Each source answers two questions: `load()` -> its index rows as an Arrow table (or a clear error), and
`record(row)` -> one full record, fetched only when someone opens it. Index rows have the columns of
`rollouts.schema.COLUMNS`; nothing here ever reads every record.

- `LocalSource`: `index/*/*.jsonl` under ROLLOUT_DIR, read incrementally: an index file is append-only, so a file
  whose size grew is read from where the last read stopped, and an unchanged file (same inode and size) is not
  opened at all. This is what makes a rollout played in the app show up in Browse within a second.
- `HubSource`: the same layout in a Hub dataset. One cheap probe (the repo's current commit, with a short timeout
  and no retries) comes first: an unchanged commit means nothing to read, an unreachable Hub means a clear message
  at once instead of huggingface_hub's retry loop (about 23 s). Then the `index/` tree is listed at that commit
  and only index files whose blob id changed are downloaded (`hf_hub_download`, cached).
- `UpstreamSource`: one Parquet file found through the dataset card's `rollouts` config; only the flat columns are
  read for the index, and one row's JSON columns when it is opened.

Offline (`HF_HUB_OFFLINE=1`) the Hub sources use what huggingface_hub has cached, if anything, and say so.
Every error message names the source and the cause, never a token.
"""

from __future__ import annotations

import fnmatch
import io
import json
import logging
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
import pyarrow.parquet as pq
import yaml

from rollouts.schema import COLUMNS, coerce_cell
from rollouts.upstream import JSON_COLUMNS, record_from_row, upstream_ids

log = logging.getLogger(__name__)

_ARROW = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}
INDEX_SCHEMA = pa.schema([(name, _ARROW[kind]) for name, kind in COLUMNS.items()])
EPISODE_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
RECORD_PATH = re.compile(r"^rollouts/(\d{4}-\d{2}-\d{2})/([A-Za-z0-9_-]{1,64})\.json$")

PROBE_TIMEOUT_S = 5.0     # the first request to a Hub: connect and answer
FILE_TIMEOUT_S = 20.0     # one index file or record download, retries included
DOWNLOAD_WORKERS = 4

_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="browse-hub")


class SourceError(Exception):
    """A source could not be read; the message says which and why, for the page."""


@dataclass
class Loaded:
    """One source's rows after a load: `table` (INDEX_SCHEMA) or `error`; `note` qualifies either."""

    name: str
    label: str
    table: pa.Table | None = None
    error: str | None = None
    note: str | None = None
    changed: bool = True
    at: float = field(default_factory=time.time)

    @property
    def rows(self) -> int:
        return self.table.num_rows if self.table is not None else 0


# -- index rows ------------------------------------------------------------------------------------------------


def parse_index_lines(data: bytes) -> pa.Table:
    """JSONL index rows -> a table in INDEX_SCHEMA. Rows without a valid episode id are dropped.

    Arrow's JSON reader does the work (a 100k-row index reads in a fraction of a second); a file it refuses (a
    bad line, a value of the wrong type) is read line by line instead, keeping every readable row.
    """
    if not data.strip():
        return INDEX_SCHEMA.empty_table()
    try:
        table = pa_json.read_json(io.BytesIO(data), read_options=pa_json.ReadOptions(block_size=1 << 22),
                                  parse_options=pa_json.ParseOptions(explicit_schema=INDEX_SCHEMA,
                                                                     unexpected_field_behavior="ignore"))
        table = table.select(INDEX_SCHEMA.names)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        table = _parse_slowly(data)
    return _valid_rows(table)


def _parse_slowly(data: bytes) -> pa.Table:
    rows = []
    for line in data.splitlines():
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(row, dict):
            rows.append({name: coerce_cell(row.get(name), kind) for name, kind in COLUMNS.items()})
    return pa.Table.from_pylist(rows, schema=INDEX_SCHEMA)


def _valid_rows(table: pa.Table) -> pa.Table:
    ids = table.column("episode_id")
    keep = pc.fill_null(pc.match_substring_regex(ids, EPISODE_ID.pattern), False)
    if pc.all(keep).as_py() is not False:
        return table
    return table.filter(keep)


def _concat(tables: list[pa.Table]) -> pa.Table:
    tables = [t for t in tables if t.num_rows]
    return pa.concat_tables(tables) if tables else INDEX_SCHEMA.empty_table()


# -- the local folder ------------------------------------------------------------------------------------------


@dataclass
class _FileRead:
    inode: int
    offset: int  # bytes read so far, always at a line end


class LocalSource:
    """`ROLLOUT_DIR`: the rollouts this Space (or this machine) played, pushed or not."""

    name = "local"
    COMPACT_AFTER = 64  # appended batches kept apart before they are joined into one table

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root).resolve()
        self.label = "this Space's rollout folder"
        self._files: dict[Path, _FileRead] = {}
        self._batches: list[pa.Table] = []  # rows in read order: first load, then each refresh's new lines
        self._lock = threading.Lock()
        self._table: pa.Table | None = None

    def load(self) -> Loaded:
        """Re-read what changed since the last load; `changed` says whether any row did."""
        with self._lock:
            changed = self._refresh()
            if changed or self._table is None:
                if len(self._batches) > self.COMPACT_AFTER:
                    self._batches = [_concat(self._batches)]
                self._table = _concat(self._batches)
            return Loaded(self.name, self.label, table=self._table, changed=changed)

    def _refresh(self) -> bool:
        present = sorted(self.root.glob("index/*/*.jsonl")) if self.root.is_dir() else []
        stats = {}
        for path in present:
            try:
                stats[path] = path.stat()
            except FileNotFoundError:
                continue
        # A file that vanished, shrank or was replaced (never done by the store, but possible by hand) means its
        # rows are unknown: start over. Otherwise only the bytes appended since the last read are read.
        reset = any(path not in stats for path in self._files) or any(
            path in self._files and (self._files[path].inode != st.st_ino or st.st_size < self._files[path].offset)
            for path, st in stats.items())
        if reset:
            self._files, self._batches = {}, []
        chunks = []
        for path, st in stats.items():
            read = self._files.setdefault(path, _FileRead(st.st_ino, 0))
            if st.st_size == read.offset:
                continue
            with open(path, "rb") as f:
                f.seek(read.offset)
                data = f.read(st.st_size - read.offset)
            end = data.rfind(b"\n") + 1  # a line without its newline is still being written (or torn)
            if end:
                chunks.append(data[:end])
                read.offset += end
        if chunks:
            # One parse for every file's new lines: Arrow's per-call setup dominates small reads.
            self._batches.append(parse_index_lines(b"".join(chunks)))
        return reset or bool(chunks)

    def record(self, row: dict) -> dict:
        """The record of an index row (or of an episode id alone, found by its file name)."""
        episode_id = str(row.get("episode_id") or "")
        if not EPISODE_ID.match(episode_id):
            raise SourceError("malformed episode id")
        path = self.locate(episode_id, row.get("path"))
        if path is None:
            raise SourceError(f"rollout {episode_id} is indexed but its record file is missing from the folder")
        try:
            return json.loads(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise SourceError(f"cannot read the record of {episode_id}: {exc}") from None

    def locate(self, episode_id: str, path: Any = None) -> Path | None:
        """The record file of `episode_id`, never outside `rollouts/` of the folder."""
        if not EPISODE_ID.match(episode_id or ""):
            return None
        match = RECORD_PATH.match(path) if isinstance(path, str) else None
        if match and match.group(2) == episode_id:
            candidate = self.root / path
            if candidate.is_file():
                return candidate
        return next(iter(self.root.glob(f"rollouts/*/{episode_id}.json")), None) if self.root.is_dir() else None


# -- the Hub ---------------------------------------------------------------------------------------------------


def _hub():
    import huggingface_hub

    return huggingface_hub


def offline() -> bool:
    """huggingface_hub's offline switch (HF_HUB_OFFLINE), read now rather than at its import."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE) or os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")


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


class _HubRepo:
    """A dataset repo on a Hub endpoint: the probe, listing and downloads every Hub source needs."""

    def __init__(self, repo: str, *, endpoint: str | None = None, token: str | None = None,
                 cache_dir: str | os.PathLike | None = None, probe_timeout: float = PROBE_TIMEOUT_S,
                 file_timeout: float = FILE_TIMEOUT_S) -> None:
        from huggingface_hub import constants

        self.repo = repo
        self.endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")
        self.token = token
        self.cache_dir = str(cache_dir) if cache_dir else None
        self.probe_timeout = probe_timeout
        self.file_timeout = file_timeout

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
                return [(e.path, e.blob_id) for e in entries if isinstance(e, hub.hf_api.RepoFile)]
            except hub.errors.EntryNotFoundError:
                return []

        return bounded(listing, self.file_timeout, f"listing {folder}/ of {self.repo}")

    def download(self, path: str, revision: str | None, *, cached_only: bool = False) -> str:
        hub = _hub()

        def fetch() -> str:
            return hub.hf_hub_download(self.repo, path, repo_type="dataset", revision=revision,
                                       endpoint=self.endpoint, token=self.token or False, cache_dir=self.cache_dir,
                                       etag_timeout=self.probe_timeout, local_files_only=cached_only)

        if cached_only:
            return fetch()
        return bounded(fetch, self.file_timeout, f"downloading {path}")


class HubSource:
    """Our rollout dataset on the Hub (ROLLOUT_DATASET): its index files, and records on demand."""

    name = "hub"

    def __init__(self, repo: str, **options: Any) -> None:
        self.hub = _HubRepo(repo, **options)
        self.label = f"Hub dataset {repo}"
        self.revision: str | None = None
        self._files: dict[str, tuple[str, pa.Table]] = {}  # path -> (blob id, rows)
        self._table: pa.Table | None = None
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
                    return Loaded(self.name, self.label, table=self._table, changed=False)
                listed = dict(self.hub.list_files("index", sha))
                wanted = {p: oid for p, oid in listed.items() if p.endswith(".jsonl")}
                fetch = [p for p, oid in wanted.items() if self._files.get(p, ("",))[0] != oid]
                with ThreadPoolExecutor(DOWNLOAD_WORKERS) as workers:
                    tables = list(workers.map(lambda p: self._read(p, sha), fetch))
                files = {p: v for p, v in self._files.items() if p in wanted}
                files.update({p: (wanted[p], t) for p, t in zip(fetch, tables, strict=True)})
                self._files, self.revision = files, sha
                self._table = _concat([files[p][1] for p in sorted(files)])
                note = None if wanted else "no index files yet"
                return Loaded(self.name, self.label, table=self._table, note=note)
            except Exception as exc:  # any failure: a message for the page, the other sources still load
                log.info("hub source %s: %s", self.hub.repo, describe(exc))
                return Loaded(self.name, self.label, table=self._table, error=describe(exc),
                              note="showing rows from the last successful load" if self._table is not None else None,
                              changed=False)

    def _read(self, path: str, revision: str) -> pa.Table:
        with open(self.hub.download(path, revision), "rb") as f:
            return parse_index_lines(f.read())

    def record(self, row: dict) -> dict:
        episode_id = str(row.get("episode_id") or "")
        path = row.get("path")
        match = RECORD_PATH.match(path) if isinstance(path, str) else None
        if not match or match.group(2) != episode_id:
            started = str(row.get("started") or "")
            if not EPISODE_ID.match(episode_id) or not re.match(r"^\d{4}-\d{2}-\d{2}", started):
                raise SourceError(f"the Hub index row of {episode_id or '?'} does not say where its record is")
            path = f"rollouts/{started[:10]}/{episode_id}.json"
        try:
            try:
                local = self.hub.download(path, self.revision, cached_only=True)
            except Exception:
                if offline():
                    raise
                local = self.hub.download(path, self.revision)
            with open(local, "rb") as f:
                return json.loads(f.read())
        except Exception as exc:
            raise SourceError(f"{self.label}: cannot fetch {path}: {describe(exc)}") from None


# -- upstream's Parquet ----------------------------------------------------------------------------------------


def card_patterns(card: str, config: str) -> list[str]:
    """The `data_files` paths (or globs) a dataset card's YAML gives for `config`."""
    if not card.startswith("---"):
        return []
    try:
        meta = yaml.safe_load(card[3:].partition("\n---")[0]) or {}
    except yaml.YAMLError:
        return []
    patterns: list[str] = []
    for item in (meta.get("configs") or []) if isinstance(meta, dict) else []:
        if not isinstance(item, dict) or item.get("config_name") != config:
            continue
        files = item.get("data_files")
        for entry in files if isinstance(files, list) else [files]:
            paths = entry.get("path") if isinstance(entry, dict) else entry
            patterns += [paths] if isinstance(paths, str) else [p for p in paths or [] if isinstance(p, str)]
    return patterns


def parquet_files(card: str, config: str, listed: list[str]) -> list[str]:
    """The Parquet files of `config`: the card's `data_files` matched against the repo's files; without a usable
    card, any Parquet file under a folder named like the config."""
    patterns = card_patterns(card, config)
    if patterns:
        found = [p for p in listed if any(fnmatch.fnmatch(p, pat) for pat in patterns)]
    else:
        found = [p for p in listed if config in p.split("/")[:-1]]
    return sorted(p for p in found if p.endswith(".parquet"))


class UpstreamSource:
    """Upstream's published rollouts (PUBLIC_ROLLOUTS, config `rollouts`), read-only."""

    name = "upstream"

    def __init__(self, repo: str, config: str = "rollouts", **options: Any) -> None:
        self.hub = _HubRepo(repo, **options)
        self.config = config
        self.label = f"upstream rollouts {repo}"
        self.revision: str | None = None
        self._file: str | None = None      # the repo path of the Parquet file
        self._local: str | None = None     # its cached copy
        self._table: pa.Table | None = None
        self._lock = threading.Lock()

    def load(self) -> Loaded:
        with self._lock:
            if offline():
                return self._load_cached()
            try:
                sha = self.hub.head_commit()
                if sha == self.revision and self._table is not None:
                    return Loaded(self.name, self.label, table=self._table, changed=False)
                listed = [p for p, _ in self.hub.list_files("", sha)]
                # Files are fetched at `main` (not the sha) so huggingface_hub records the ref in its cache and an
                # offline start finds them there.
                card = ""
                if "README.md" in listed:
                    card = Path(self.hub.download("README.md", None)).read_text(encoding="utf-8", errors="replace")
                files = parquet_files(card, self.config, listed)
                if not files:
                    return Loaded(self.name, self.label, error=f"no Parquet file for config `{self.config}`",
                                  changed=self._table is not None)
                local = self.hub.download(files[0], None)
                self._table = self._index(local)
                self._file, self._local, self.revision = files[0], local, sha
                note = f"{len(files) - 1} more Parquet files not read" if len(files) > 1 else None
                return Loaded(self.name, self.label, table=self._table, note=note)
            except Exception as exc:
                log.info("upstream source %s: %s", self.hub.repo, describe(exc))
                if self._table is None:
                    cached = self._load_cached(reason=describe(exc))
                    if cached.table is not None:
                        return cached
                return Loaded(self.name, self.label, table=self._table, error=describe(exc),
                              note="showing rows from the last successful load" if self._table is not None else None,
                              changed=False)

    def _load_cached(self, reason: str | None = None) -> Loaded:
        """huggingface_hub's offline behaviour: the copy it cached on an earlier online start, if any."""
        if self._table is not None:
            return Loaded(self.name, self.label, table=self._table, changed=False,
                          note=f"{reason or 'offline'}: rows as last loaded")
        try:
            card = Path(self.hub.download("README.md", None, cached_only=True)).read_text(encoding="utf-8")
            # Offline there is no listing: only a card that names its file (no glob) leads to the cached copy.
            files = sorted(p for p in card_patterns(card, self.config)
                           if p.endswith(".parquet") and not any(c in p for c in "*?["))
            if not files:
                raise FileNotFoundError
            local = self.hub.download(files[0], None, cached_only=True)
            self._table, self._file, self._local = self._index(local), files[0], local
            return Loaded(self.name, self.label, table=self._table,
                          note=f"{reason or 'offline (HF_HUB_OFFLINE)'}: using the cached copy")
        except Exception:
            why = reason or "offline (HF_HUB_OFFLINE is set)"
            return Loaded(self.name, self.label, error=f"{why}; no cached copy", changed=False)

    def _index(self, local: str) -> pa.Table:
        """The flat columns of the Parquet file as index rows (JSON columns are not read)."""
        file = pq.ParquetFile(local)
        names = [n for n in file.schema_arrow.names if n not in JSON_COLUMNS]
        raw = file.read(columns=names)
        n = raw.num_rows
        columns = {}
        for name, kind in COLUMNS.items():
            source = name if name in raw.column_names else ("ships" if name == "num_ships" and "ships" in
                                                              raw.column_names else None)
            target = _ARROW[kind]
            if source is None:
                columns[name] = pa.nulls(n, target)
                continue
            column = raw.column(source)
            try:
                columns[name] = column.cast(target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                columns[name] = pa.array([coerce_cell(v, kind) for v in column.to_pylist()], type=target)
        def values(name: str) -> list:
            return raw.column(name).to_pylist() if name in raw.column_names else [None] * n

        given = values("episode_id")
        made = upstream_ids(zip(values("run"), values("model"), values("task_id"), strict=True))
        columns["episode_id"] = pa.array([g if isinstance(g, str) and EPISODE_ID.match(g) else m
                                          for g, m in zip(given, made, strict=True)], pa.string())
        columns["source"] = pa.array(["upstream"] * n, pa.string())
        columns["path"] = pa.array([f"#{i}" for i in range(n)], pa.string())  # the row number in the file
        if "errors" in raw.column_names and not pa.types.is_integer(raw.column("errors").type):
            columns["errors"] = pa.nulls(n, pa.int64())
        return pa.table(columns, schema=INDEX_SCHEMA)

    def record(self, row: dict) -> dict:
        path = str(row.get("path") or "")
        if self._local is None or not path.startswith("#") or not path[1:].isdigit():
            raise SourceError(f"{self.label}: this row is not loaded; press Refresh")
        number = int(path[1:])
        file = pq.ParquetFile(self._local)
        start = 0
        for group in range(file.num_row_groups):
            size = file.metadata.row_group(group).num_rows
            if number < start + size:
                table = file.read_row_group(group).slice(number - start, 1)
                cells = table.to_pylist()[0]
                return record_from_row(cells, episode_id=str(row["episode_id"]), repo=self.hub.repo,
                                       file=self._file, row_number=number)
            start += size
        raise SourceError(f"{self.label}: row {number} is past the end of the file")
