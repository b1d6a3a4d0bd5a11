"""Upstream's published rollouts (one Parquet file, read-only) as a Browse source, in our shapes.

Upstream's `rollouts` config has the flat columns of its run index (PORTSIM_SPEC §9.3: `run, model, model_name,
task_id, difficulty, quay, num_ships, reward, submitted, feasible, cost, optimal_cost, naive_cost, turns, checks,
seconds, input_tokens, output_tokens, end_reason`, sometimes `errors`) plus four JSON-string columns: `final_plan`,
`grade`, `steps` and `messages`. The flat columns and `steps` (for the convergence figures of rollouts.metrics) are
read for the index; one row's other JSON columns when it is opened. It has no episode ids, so each row gets a stable one made from what identifies an upstream episode (run,
model, task), prefixed `up-` so it can never collide with ours. The file is found through the dataset card's
`rollouts` config.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import math
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from rollouts.index.format import ARROW_TYPES, INDEX_SCHEMA
from rollouts.metrics import METRIC_COLUMNS, episode_metrics
from rollouts.schema import COLUMNS, coerce_cell, valid_episode_id
from rollouts.sources import Loaded, SourceError
from rollouts.sources.hub import HubRepo, describe, offline

# Upstream's one Parquet file holds whole transcripts (JSON columns) beside the index columns: a bound for it
# alone, well above a few thousand rollouts of tens of KB each.
FILE_MAX_BYTES = 512 << 20

log = logging.getLogger(__name__)

JSON_COLUMNS = ("final_plan", "grade", "steps", "messages")
UPSTREAM_PREFIX = "up-"


def upstream_episode_id(run: Any, model: Any, task_id: Any, occurrence: int = 0) -> str:
    """A stable, store-safe id for an upstream row; `occurrence` tells apart repeats of one (run, model, task)."""
    key = json.dumps([run, model, task_id, occurrence], ensure_ascii=False)
    return UPSTREAM_PREFIX + hashlib.sha1(key.encode()).hexdigest()[:16]


def upstream_ids(rows: Iterable[tuple[Any, Any, Any]]) -> list[str]:
    """Ids for (run, model, task_id) rows in file order; a repeated triple gets the next occurrence number."""
    seen: dict[tuple, int] = {}
    ids = []
    for run, model, task_id in rows:
        key = (run, model, task_id)
        count = seen.get(key, 0)
        seen[key] = count + 1
        ids.append(upstream_episode_id(run, model, task_id, count))
    return ids


def decode_json(text: Any, column: str, problems: list[str]) -> Any:
    """A JSON-string cell decoded; an unreadable one becomes None and a line in `problems` (the viewer shows it)."""
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return None
    if not isinstance(text, str | bytes):
        return text  # already decoded (a reader that typed the column)
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        problems.append(f"upstream column `{column}` is not valid JSON; shown without it")
        return None


def record_from_row(row: Mapping[str, Any], *, episode_id: str, repo: str | None = None,
                    file: str | None = None, row_number: int | None = None) -> dict:
    """Our rollout record (DESIGN.md "The rollout record") for one upstream Parquet row.

    Fields upstream does not keep (limits, usage per turn, provider switches) are left empty or null; decoding
    problems go to `errors`, so the viewer says what is missing instead of failing.
    """
    problems: list[str] = []
    messages = decode_json(row.get("messages"), "messages", problems)
    steps = decode_json(row.get("steps"), "steps", problems)
    grade = decode_json(row.get("grade"), "grade", problems)
    plan = decode_json(row.get("final_plan"), "final_plan", problems)
    if not isinstance(messages, list):
        messages = []
    if not isinstance(steps, list):
        steps = []
    if not isinstance(grade, dict):
        grade = None
    rubric = None
    if grade is not None and isinstance(grade.get("rubric"), dict):
        rubric = grade["rubric"]
    submitted = bool(_scalar(row.get("submitted")))
    errors = row.get("errors")
    error_list = [str(e) for e in errors] if isinstance(errors, list) else []
    if isinstance(errors, int | float) and not isinstance(errors, bool) and _scalar(errors):
        error_list.append(f"{int(errors)} provider or transport error(s) (texts not published upstream)")
    ships = _scalar(row.get("num_ships", row.get("ships")))
    record = {
        "schema_version": 1,
        "episode_id": episode_id,
        "run": _scalar(row.get("run")),
        "source": "upstream",
        "model": _scalar(row.get("model")),
        "task_id": _scalar(row.get("task_id")),
        "task": {"split": _scalar(row.get("split")), "difficulty": _scalar(row.get("difficulty")),
                 "quay": _scalar(row.get("quay")), "ships": ships,
                 "optimal_cost": _scalar(row.get("optimal_cost")), "naive_cost": _scalar(row.get("naive_cost"))},
        "env_url": None,
        "limits": {},
        "started": _scalar(row.get("started")),
        "seconds": _scalar(row.get("seconds")),
        "messages": messages,
        "steps": [s for s in steps if isinstance(s, dict)],
        "final": {"submitted": submitted, "plan": plan if submitted else None,
                  "grade": grade if submitted else None, "rubric": rubric},
        "reward": _scalar(row.get("reward")) or 0.0,
        "usage": {"input_tokens": _scalar(row.get("input_tokens")) or 0,
                  "output_tokens": _scalar(row.get("output_tokens")) or 0},
        "turns": _scalar(row.get("turns")),
        "end_reason": _scalar(row.get("end_reason")),
        "errors": error_list + problems,
        "upstream": {"repo": repo, "file": file, "row": row_number},
    }
    return record


def _scalar(value: Any) -> Any:
    """NaN (pandas' missing number) as None; numpy scalars as Python ones."""
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _metric_columns(file: pq.ParquetFile, values: Any) -> dict[str, pa.Array]:
    """rollouts.metrics' columns for every row: from `steps` (JSON text) and the flat columns. Upstream keeps no
    per-turn usage and no start time, so tokens to a feasible check are known only when it came in the last turn,
    and prices are today's."""
    steps = file.read(columns=["steps"]).column("steps").to_pylist() if "steps" in file.schema_arrow.names \
        else [None] * file.metadata.num_rows
    flat = {name: values(name) for name in ("model", "turns", "input_tokens", "output_tokens", "submitted",
                                            "feasible", "cost", "naive_cost")}
    metrics = []
    for i, text in enumerate(steps):
        decoded = decode_json(text, "steps", [])
        cell = {name: _scalar(column[i]) for name, column in flat.items()}
        metrics.append(episode_metrics({
            "model": cell["model"], "turns": cell["turns"], "messages": [],
            "steps": decoded if isinstance(decoded, list) else [],
            "usage": {"input_tokens": cell["input_tokens"], "output_tokens": cell["output_tokens"]},
            "final": {"submitted": bool(cell["submitted"]),
                      "grade": {"feasible": cell["feasible"], "cost": cell["cost"]}},
            "task": {"naive_cost": cell["naive_cost"]},
        }))
    return {name: pa.array([coerce_cell(m[name], kind) for m in metrics], type=ARROW_TYPES[kind])
            for name, kind in METRIC_COLUMNS.items()}


# -- the source -----------------------------------------------------------------------------------------------


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
        self.hub = HubRepo(repo, **options)
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
                local = self.hub.download(files[0], None, max_bytes=FILE_MAX_BYTES)
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
            local = self.hub.download(files[0], None, cached_only=True, max_bytes=FILE_MAX_BYTES)
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
            target = ARROW_TYPES[kind]
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
        columns["episode_id"] = pa.array([g if valid_episode_id(g) else m
                                          for g, m in zip(given, made, strict=True)], pa.string())
        columns.update(_metric_columns(file, values))
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
