"""Arena matches as data: one row per match in `matches/<YYYY-MM-DD>/<writer_id>.jsonl` (rollouts.layout).

A match is two models on one task, each playing one episode; its row names both episodes and their rewards, the
verdict (rollouts.arena) and the visitors' votes, counted per choice:

    {"match_id": "3f9a0c1b2d4e", "started": "2026-11-29T10:15:00Z", "task_id": "dock-24B-w06x1-busy-0",
     "mode": "random", "model_a": "openai:gpt-5.5", "model_b": "baseline:greedy", "episode_a": "a1b2c3d4e5f6",
     "episode_b": "0f1e2d3c4b5a", "reward_a": 0.91, "reward_b": 0.64, "winner": "a",
     "votes": {"a": 2, "b": 0, "tie": 1, "both_bad": 0}}

Rows follow MATCH_COLUMNS exactly (no other key: the dataset card declares these columns, and `load_dataset`
refuses a file with one more), validated on write and on read (`match_problem`): a vote count is at most MAX_VOTES,
a row lies in the folder of its own day, and a match id is one match: the book writes no id twice, and a reader
takes an id's first row in path order (the index's precedence rule), so a row added later under a match's id,
in whatever file, never shadows it and is never counted twice.

A match in play is noted in `.push/matches/<match_id>.json` (local, never pushed) until its row is written or known
not to be; a process killed mid-play leaves the note, and the next start (`recover`) writes the row from both
sides' records, which the store has closed as `interrupted` by then, so the match is found like any other.

A vote rewrites its match's row in place (rollouts.jsonio.rewrite_lines) rather than appending a newer copy:
each match stays one row, so `load_dataset(repo, "matches")`, the Hub's viewer and any query read the files as
they are, with no "latest row wins" rule to know. The rewrite takes the file's lock and reads the counts under
it, so concurrent votes (other threads or processes on the folder) are all counted, and a row appended meanwhile
is kept. A match file holds one writer's matches of one day, so a rewrite stays small. Votes never enter the
ratings (rollouts.ratings).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
from typing_extensions import TypedDict

from rollouts.arena import verdict
from rollouts.jsonio import append_line, atomic_write, json_line, read_json_lines, rewrite_lines
from rollouts.layout import MATCH_GLOB, PUSH_DIR, checked_writer_id, match_rel
from rollouts.problems import id_problem, typed_problem
from rollouts.schema import new_episode_id, started_at, utc_stamp, valid_episode_id

log = logging.getLogger(__name__)

Mode = Literal["named", "random"]
Winner = Literal["a", "b", "tie"]
MODES: tuple[str, ...] = Mode.__args__  # type: ignore[attr-defined]
WINNERS: tuple[str, ...] = Winner.__args__  # type: ignore[attr-defined]
VOTE_CHOICES = ("a", "b", "tie", "both_bad")
# Column -> type, in row order (`votes` is {choice: count} for every choice of VOTE_CHOICES).
MATCH_COLUMNS: dict[str, type] = {
    "match_id": str, "started": str, "task_id": str, "mode": str, "model_a": str, "model_b": str,
    "episode_a": str, "episode_b": str, "reward_a": float, "reward_b": float, "winner": str, "votes": dict,
}
# Every vote is a visitor's, at most a few an hour each: no match on any Space comes near this many.
MAX_VOTES = 1_000_000
PENDING_DIR = f"{PUSH_DIR}/matches"
_CONFIG = pydantic.ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)
_Count = Annotated[int, pydantic.Field(ge=0, le=MAX_VOTES)]
_Text = Annotated[str, pydantic.Field(min_length=1, max_length=300)]


class Votes(TypedDict):
    __pydantic_config__ = _CONFIG  # type: ignore[misc]
    a: _Count
    b: _Count
    tie: _Count
    both_bad: _Count


class Match(TypedDict):
    __pydantic_config__ = _CONFIG  # type: ignore[misc]
    match_id: str
    started: str
    task_id: _Text
    mode: Mode
    model_a: _Text
    model_b: _Text
    episode_a: str
    episode_b: str
    reward_a: float | None  # None: that side's record had no finite reward
    reward_b: float | None
    winner: Winner
    votes: Votes


_MATCH = pydantic.TypeAdapter(Match)


class MatchError(ValueError):
    """A match row that does not follow the schema; the message names the field."""


def no_votes() -> dict[str, int]:
    return dict.fromkeys(VOTE_CHOICES, 0)


def match_problem(row: Any) -> str | None:
    """What is wrong with a match row, naming the field; None when it is sound."""
    problem = (typed_problem(row, _MATCH, "match", "a match row")
               or id_problem(row, ("match_id", "episode_a", "episode_b"), valid_episode_id))
    if problem:
        return problem
    if row["episode_a"] == row["episode_b"]:
        return "episode_b: a match is two episodes, but both sides name the same one"
    try:
        started_at(row)
    except ValueError as exc:
        return f"started: {exc}"
    return None


def validate_match(row: Any) -> dict:
    """The row in column order when it follows the schema; MatchError naming the field otherwise."""
    problem = match_problem(row)
    if problem is not None:
        raise MatchError(problem)
    # One form of `started` for the whole column, as the index writes it (the card declares it a timestamp).
    return {name: row[name] for name in MATCH_COLUMNS} | {"started": f"{started_at(row):%Y-%m-%dT%H:%M:%SZ}",
                                                          "votes": {c: row["votes"][c] for c in VOTE_CHOICES}}


def match_row(record_a: Mapping[str, Any], record_b: Mapping[str, Any], *, mode: str,
              match_id: str | None = None, started: str | None = None) -> dict:
    """A new match's row from its two finished records (same task): their rewards, the verdict, no votes yet.
    `started` defaults to the earlier episode's start; `match_id` to a new random id."""
    if record_a.get("task_id") != record_b.get("task_id"):
        raise MatchError(f"task_id: a match is one task, got {record_a.get('task_id')!r} and "
                         f"{record_b.get('task_id')!r}")
    starts = sorted(utc_stamp(started_at(dict(r)).timestamp()) for r in (record_a, record_b))
    judged = verdict(record_a, record_b)
    return validate_match({
        "match_id": match_id or new_episode_id(), "started": started or starts[0], "task_id": record_a["task_id"],
        "mode": mode, "model_a": record_a.get("model"), "model_b": record_b.get("model"),
        "episode_a": record_a.get("episode_id"), "episode_b": record_b.get("episode_id"),
        "reward_a": _reward(record_a), "reward_b": _reward(record_b), "winner": judged.winner,
        "votes": no_votes(),
    })


def _reward(record: Mapping[str, Any]) -> float | None:
    value = record.get("reward")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


class MatchBook:
    """The match rows of one rollout folder: this process appends its matches to its own files (`writer_id`, as
    the store writes its index) and counts votes on any match of the folder. Thread- and process-safe through the
    files' locks (rollouts.jsonio). `on_write(rel)` is called after each change, e.g. to tell the Hub pusher."""

    def __init__(self, root: Path, writer_id: str, *, on_write: Callable[[str], None] | None = None) -> None:
        checked_writer_id(writer_id)
        self.root = Path(root)
        self.writer_id = writer_id
        self._on_write = on_write or (lambda rel: None)
        self._where: dict[str, str] = {}  # match id -> the file (relative) that holds its row

    def add(self, row: dict) -> dict:
        """Append a new match's row (validated; missing vote choices count 0); the row as written."""
        votes = row.get("votes")
        if votes is None or isinstance(votes, dict):  # anything else is left for validation to name
            row = {**row, "votes": {**no_votes(), **(votes or {})}}
        row = validate_match(row)
        # One scan of the folder when the id is new (`get` would scan twice, then read the row it found).
        if self._locate(row["match_id"], rescan=False) is not None:
            raise MatchError(f"match_id: {row['match_id']} is a match already in this folder")
        rel = match_rel(f"{started_at(row):%Y-%m-%d}", self.writer_id)
        append_line(self.root / rel, json_line(row))
        self._where[row["match_id"]] = rel
        self._on_write(rel)
        return row

    def begin(self, match_id: str, mode: str, episode_a: str, episode_b: str) -> None:
        """Note a match in play, until `end`: a process killed before then leaves the note for `recover`."""
        if not all(valid_episode_id(i) for i in (match_id, episode_a, episode_b)) or mode not in MODES:
            raise MatchError(f"not a match to note: {match_id!r}")
        note = {"match_id": match_id, "mode": mode, "episode_a": episode_a, "episode_b": episode_b}
        atomic_write(self.root / PENDING_DIR / f"{match_id}.json", json.dumps(note).encode())

    def end(self, match_id: str) -> None:
        """The match's row is written, or known not to be: its note goes."""
        if valid_episode_id(match_id):
            (self.root / PENDING_DIR / f"{match_id}.json").unlink(missing_ok=True)

    def recover(self, load: Callable[[str], dict | None], running: Callable[[], list[str]]) -> int:
        """Write the row of each match a dead process left in play, from both sides' records (`load(episode_id)`,
        closed as `interrupted` by the store's own recovery); the number written. A note whose episodes are still
        journalled as running (`running()`: another process plays them) stays; one without both records goes."""
        written, playing = 0, set(running())
        for path in sorted((self.root / PENDING_DIR).glob("*.json")):
            try:
                note = json.loads(path.read_bytes())
                ids = (note["match_id"], note["episode_a"], note["episode_b"])
                if note["mode"] not in MODES or not all(valid_episode_id(i) for i in ids) or path.stem != ids[0]:
                    raise ValueError("not a note this book wrote")
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.error("match note %s left out: %s", path.name, exc)
                path.unlink(missing_ok=True)
                continue
            if playing & set(ids[1:]):
                continue
            try:
                records = [load(i) for i in ids[1:]]
                if None in records:
                    raise MatchError("a side's rollout was not kept")
                self.add(match_row(records[0], records[1], mode=note["mode"], match_id=ids[0]))
                written += 1
                log.warning("match %s was in play when its process died: its row is written", ids[0])
            except (MatchError, OSError, ValueError) as exc:
                log.error("match %s, interrupted, has no row: %s", ids[0], exc)
            path.unlink(missing_ok=True)
        return written

    def vote(self, match_id: str, choice: str) -> dict:
        """Count one vote (`choice` one of VOTE_CHOICES) on a match of the folder; its row as it now stands.
        KeyError when no file of the folder holds the match."""
        if choice not in VOTE_CHOICES:
            raise ValueError(f"a vote is one of {', '.join(VOTE_CHOICES)}, not {str(choice)[:40]!r}")
        counted: list[dict] = []

        def count(row: Any) -> dict | None:
            if not isinstance(row, dict) or row.get("match_id") != match_id or counted or match_problem(row):
                return None
            votes = {**row["votes"], choice: row["votes"][choice] + 1}
            counted.append({**row, "votes": votes})
            return counted[-1]

        for rescan in (False, True):
            rel = self._locate(match_id, rescan=rescan)
            if rel is not None and rewrite_lines(self.root / rel, count):
                self._on_write(rel)
                return counted[0]
        raise KeyError(f"no match {match_id!r} in {self.root}")

    def get(self, match_id: str) -> dict | None:
        """The match's row as it stands on disk now (votes from every process included), or None."""
        for rescan in (False, True):
            rel = self._locate(match_id, rescan=rescan)
            found = next((row for row in self._read(rel) if row["match_id"] == match_id), None) if rel else None
            if found is not None:
                return found
        return None

    def rows(self) -> list[dict]:
        """Every sound match row of the folder, one per match id (its first in path order), oldest file first
        (unsound ones, and later rows under an id already read, are logged and left out)."""
        rows, where = [], {}
        for path in sorted(self.root.glob(MATCH_GLOB), key=lambda p: p.relative_to(self.root).as_posix()):
            rel = path.relative_to(self.root).as_posix()
            for row in self._read(rel):
                if row["match_id"] in where:
                    log.warning("left out a second row of match %s in %s (its row is in %s)", row["match_id"], rel,
                                where[row["match_id"]])
                    continue
                where[row["match_id"]] = rel
                rows.append(row)
        self._where = where
        return rows

    def _locate(self, match_id: str, *, rescan: bool) -> str | None:
        if rescan or match_id not in self._where:
            self.rows()  # another process may have added it since
        return self._where.get(match_id)

    def _read(self, rel: str) -> list[dict]:
        try:
            data = (self.root / rel).read_bytes()
        except FileNotFoundError:
            return []
        values, _ = read_json_lines(data, where=rel)
        day, seen, sound = rel.split("/")[1], set(), []
        # A row counts in its own day's folder only, and once per file (its first), as the book writes them.
        for value in values:
            if match_problem(value) is None and f"{started_at(value):%Y-%m-%d}" == day \
                    and value["match_id"] not in seen:
                seen.add(value["match_id"])
                sound.append(value)
        if len(sound) < len(values):
            log.warning("left out %d unsound match row(s) in %s", len(values) - len(sound), rel)
        return sound


def vote_tally(rows: list[dict]) -> dict[str, dict[str, int]]:
    """Per model, over match rows: the matches it played and the votes on them, from its side: `for` (its side
    preferred), `against` (the other side preferred), `tie`, `both_bad`. Shown beside the ratings, never in them."""
    tally: dict[str, dict[str, int]] = {}
    for row in rows:
        votes = row["votes"]
        for side, other in (("a", "b"), ("b", "a")):
            counts = tally.setdefault(row[f"model_{side}"], {"matches": 0, "for": 0, "against": 0, "tie": 0,
                                                              "both_bad": 0})
            counts["matches"] += 1
            counts["for"] += votes[side]
            counts["against"] += votes[other]
            counts["tie"] += votes["tie"]
            counts["both_bad"] += votes["both_bad"]
    return tally
