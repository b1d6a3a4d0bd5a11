"""What of a dataset file may go to the Hub while some episodes are withheld (not public yet).

Which episodes are withheld is the app's rule, decided in one place (live.match_runs.MatchRegistry
.withheld_episodes: both sides of a random match nobody has voted or skipped on, for at most a day); the store hands
that question to its pusher (RolloutStore.hold_back), which asks it before each commit and sends of each file only
what names no withheld episode (`public_part`):

- a record or an agent trace of a withheld episode (its path names it) is not sent at all;
- a JSONL file of rows (an index file, a match file) is sent without the rows naming one: every other row goes now,
  so a Space with a random match always undecided still publishes the rest, and the held rows follow once their
  episode is public, the file then sent whole. The push log marks such a partial copy (`held`), so the file stays
  pending until it is sent whole;
- a Parquet index file naming one is not sent (the pusher's own compaction leaves a JSONL file naming a withheld
  episode alone, `names_none`, so only a `python -m rollouts compact` run beside the app can fold such a row in).

A row names an episode when its bytes hold the episode's id. Ids are 12 random hex digits, so a row that holds one
by chance (a match id equal to it) is only held back a while longer, never sent early.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import pyarrow as pa
import pyarrow.parquet as pq

from rollouts.layout import RECORD_REL, TRACE_REL

# Asked before each commit: the ids of the episodes that are not public yet.
Withheld = Callable[[], Collection[str]]


def public_part(rel: str, data: bytes, withheld: Collection[str]) -> bytes | None:
    """What of the file at `rel` (its bytes `data`, whole rows only for JSONL) may go to the Hub now: `data`, the
    JSONL rows naming no withheld episode, or None when nothing may go yet."""
    if not withheld:
        return data
    named = RECORD_REL.fullmatch(rel) or TRACE_REL.fullmatch(rel)
    if named is not None:
        return None if named["episode_id"] in withheld else data
    if rel.endswith(".jsonl"):
        rows = data.splitlines(keepends=True)
        sent = b"".join(row for row in rows if not _names(row, withheld))
        return sent if sent or not data else None  # only held rows: nothing yet (not an empty copy: a deletion)
    if rel.endswith(".parquet"):
        return None if _parquet_names(data, withheld) else data
    return data


def names_none(data: bytes, withheld: Collection[str]) -> bool:
    """True when no row of these JSONL bytes names a withheld episode."""
    return not withheld or not any(_names(row, withheld) for row in data.splitlines())


def _names(row: bytes, withheld: Collection[str]) -> bool:
    return any(episode_id.encode() in row for episode_id in withheld)


def _parquet_names(data: bytes, withheld: Collection[str]) -> bool:
    try:
        ids = pq.read_table(pa.BufferReader(data), columns=["episode_id"]).column("episode_id").to_pylist()
    except (pa.ArrowException, KeyError, ValueError):  # unreadable: no reader learns anything from it either
        return False
    return not set(withheld).isdisjoint(ids)
