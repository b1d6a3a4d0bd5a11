"""Index rows at scale for tests and benchmarks: realistic rows from testkit/records.py, cloned fast with Arrow.

`index_table(n, seed)` gives n index rows (rollouts.schema.COLUMNS, in INDEX_SCHEMA): the flat rows of a few thousand
records from `make_records`, cloned under new episode ids, start times (60 days), models and record paths, so every
column holds what real rows hold. A million rows take a couple of seconds. `write_index_folder` lays a table out as
the dataset layout's index files, `index/<day>/<writer>.parquet` (or `.jsonl`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rollouts.index.format import INDEX_SCHEMA
from rollouts.jsonio import read_json_lines
from rollouts.layout import record_rel
from rollouts.schema import index_row, model_name
from testkit.records import MODELS, make_records

TEMPLATES = 2000
DAYS = 60


def template_rows(n: int, seed: int = 0) -> pa.Table:
    """The index rows of n records from `make_records` (as the store would write them)."""
    return pa.Table.from_pylist([index_row(r, record_rel(r)) for r in make_records(n, seed=seed)],
                                schema=INDEX_SCHEMA)


def index_table(n: int, seed: int = 0, templates: int = TEMPLATES) -> pa.Table:
    """n index rows: templates cloned under new ids (`<seed><i>`), start times over DAYS days and rotated models."""
    base = template_rows(min(templates, n), seed)
    rng = np.random.default_rng(seed)
    picks = np.arange(n) % base.num_rows
    table = base.take(pa.array(picks))
    day_of = rng.integers(0, DAYS, n)
    days = np.datetime64("2026-10-01") + day_of.astype("timedelta64[D]")
    moments = days.astype("datetime64[s]") + rng.integers(0, 86400, n).astype("timedelta64[s]")
    started = np.datetime_as_string(moments, unit="s").astype(object) + "Z"
    ids = np.array([f"{seed:02x}{i:010x}" for i in range(n)], dtype=object)
    day_text = np.datetime_as_string(days, unit="D").astype(object)
    paths = "rollouts/" + day_text + "/" + ids + ".json"
    model_index = (picks + np.arange(n) // base.num_rows) % len(MODELS)
    models = np.array(MODELS, dtype=object)[model_index]
    names = np.array([model_name(m) for m in MODELS], dtype=object)[model_index]
    replaced = {"episode_id": ids, "started": started, "path": paths, "model": models, "model_name": names}
    for name, values in replaced.items():
        table = table.set_column(INDEX_SCHEMA.get_field_index(name), name, pa.array(values, pa.string()))
    return table


def write_index_folder(root: Path, table: pa.Table, *, writers: int = 2, fmt: str = "parquet") -> list[Path]:
    """The rows as `index/<day>/<writer>.<fmt>` under root, each row in its start day, writers taking turns."""
    days = pc.utf8_slice_codeunits(table.column("started"), 0, 10).to_numpy(zero_copy_only=False)
    writer = np.arange(table.num_rows) % writers
    written = []
    for day in sorted(set(days)):
        for w in range(writers):
            rows = table.filter(pa.array((days == day) & (writer == w)))
            if not rows.num_rows:
                continue
            path = root / "index" / day / f"writer{w}.{fmt}"
            path.parent.mkdir(parents=True, exist_ok=True)
            if fmt == "parquet":
                pq.write_table(rows, path)
            else:
                path.write_text("".join(json.dumps(r) + "\n" for r in rows.to_pylist()), encoding="utf-8")
            written.append(path)
    return written


def hub_index_rows(files: dict[str, bytes], tmp: Path) -> list[dict]:
    """Every index row in the dataset, raw: each JSONL line and each Parquet row, nothing deduplicated."""
    rows = []
    for path, data in files.items():
        if path.startswith("index/") and path.endswith(".jsonl"):
            rows += read_json_lines(data)[0]
        elif path.startswith("index/") and path.endswith(".parquet"):
            local = tmp / path.replace("/", "_")
            local.write_bytes(data)
            rows += pq.read_table(local).to_pylist()
    return rows
