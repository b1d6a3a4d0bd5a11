"""Where Browse reads rollouts from: the local folder, our Hub dataset and upstream's published Parquet.

A source answers `record(row)` -> one full record, fetched only when someone opens it; a remote one also `load()`
-> its index rows as an Arrow table in rollouts.index.format's schema (or a clear error). Nothing here ever reads
every record.

- `LocalSource`: ROLLOUT_DIR. Its index files are read in place by the index engine (rollouts.index.engine).
- `HubSource`: the same layout in a Hub dataset. One cheap probe (the repo's current commit, with a short timeout
  and no retries) comes first: an unchanged commit means nothing to read, an unreachable Hub means a clear message
  at once instead of huggingface_hub's retry loop (about 23 s). Then the `index/` tree is listed at that commit and
  only index files whose blob id changed are downloaded (`hf_hub_download`, cached), and read with the index's
  readers and its precedence rule.
- `UpstreamSource`: one Parquet file found through the dataset card's `rollouts` config; only the flat columns are
  read for the index, and one row's JSON columns when it is opened.

Offline (`HF_HUB_OFFLINE=1`) the Hub sources use what huggingface_hub has cached, if anything, and say so.
Every error message names the source and the cause, never a token.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pyarrow as pa

# The sources' names and their precedence are the index's rule (the engine applies it), so they live below it.
from rollouts.schema import SOURCE_LABELS, SOURCES


class SourceError(Exception):
    """A source could not be read; the message says which and why, for the page."""


@dataclass
class Loaded:
    """One remote source's rows after a load: `table` (rollouts.index.format.INDEX_SCHEMA) or `error`; `note`
    qualifies either."""

    name: str
    label: str
    table: pa.Table | None = None
    error: str | None = None
    note: str | None = None
    changed: bool = True
    skipped: int = 0  # index lines left out: unreadable, or pointing outside the layout
    at: float = field(default_factory=time.time)

    @property
    def rows(self) -> int:
        return self.table.num_rows if self.table is not None else 0


__all__ = ["SOURCES", "SOURCE_LABELS", "Loaded", "SourceError"]
