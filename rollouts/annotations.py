"""Flags on a step as data: one row per flag in `annotations/<YYYY-MM-DD>/<writer_id>.jsonl` (rollouts.layout).

A signed-in visitor points at one step of a rollout (a turn, or a draft: the k-th plan sent to `check_plan` or
`submit_plan`, as rollouts.record's `plan_steps` counts them, from 1) and says what happened there with a label
of LABELS and an optional note:

    {"flag_id": "5c0ffee15bad", "episode_id": "a1b2c3d4e5f6", "step_kind": "draft", "step": 3,
     "label": "misread_rule", "note": "moved the priority ship off its section", "author": "ana",
     "time": "2026-12-06T21:50:00Z", "hidden": false}

Rows follow FLAG_COLUMNS exactly (the dataset card declares them; `load_dataset` refuses a file with one more key),
validated on write and on read (`flag_problem`): the files come back from the dataset, anyone's to edit, so a row
that does not follow the schema is left out, never shown. A note is plain text of at most NOTE_CHARS characters;
the pages escape it. A flag id is one flag: a reader takes an id's first row in path order (the index's precedence
rule), so a row added later under a flag's id never shadows it.

Hiding a flag (the Space's owner's) rewrites its row in place, `hidden` true (rollouts.jsonio.rewrite_lines, as a
vote rewrites its match's row), rather than appending a second row: each flag stays one row, so
`load_dataset(repo, "annotations")` and any query read the files as they are, with no "latest row wins" rule to
know. Appends stay crash-safe: a flag is one write and an fsync, and a hide swaps the whole file under the lock
appends take (a temporary file, fsync, rename), so a crash leaves the file with the hide or without it, never half
of one, and a flag appended while the hide ran goes into the new file. A hidden flag keeps its row (the dataset says
it was hidden); no page shows it, and it counts in no filter or column.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
from typing_extensions import TypedDict

from rollouts.jsonio import append_line, json_line, read_json_lines, rewrite_lines
from rollouts.layout import ANNOTATION_GLOB, annotation_rel, checked_writer_id, inside
from rollouts.problems import id_problem, typed_problem
from rollouts.schema import new_episode_id, utc_stamp, valid_episode_id

log = logging.getLogger(__name__)

# The labels, in the order the form offers them: the key a row holds -> the words a page shows.
LABELS: dict[str, str] = {
    "misread_rule": "misread a rule",
    "arithmetic_slip": "arithmetic slip",
    "ignored_violation": "ignored a violation",
    "gave_up_early": "gave up early",
    "good_recovery": "good recovery",
    "other": "other",
}
StepKind = Literal["turn", "draft"]
STEP_KINDS: tuple[str, ...] = StepKind.__args__  # type: ignore[attr-defined]
NOTE_CHARS = 500
MAX_STEP = 100_000  # no episode comes near this many turns or drafts
# Column -> type, in row order.
FLAG_COLUMNS: dict[str, type] = {
    "flag_id": str, "episode_id": str, "step_kind": str, "step": int, "label": str, "note": str, "author": str,
    "time": str, "hidden": bool,
}
# A Hugging Face account name (and Gradio's own user names, which the same pattern covers).
AUTHOR = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
# Control characters other than newline and tab: nothing a note needs, and some reorder or hide text.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
_CONFIG = pydantic.ConfigDict(strict=True, extra="forbid")


class Flag(TypedDict):
    __pydantic_config__ = _CONFIG  # type: ignore[misc]
    flag_id: str
    episode_id: str
    step_kind: StepKind
    step: Annotated[int, pydantic.Field(ge=1, le=MAX_STEP)]
    label: Literal[tuple(LABELS)]  # type: ignore[valid-type]
    note: Annotated[str, pydantic.Field(max_length=NOTE_CHARS)]
    author: str
    time: str
    hidden: bool


_FLAG = pydantic.TypeAdapter(Flag)


class FlagError(ValueError):
    """A flag row that does not follow the schema; the message names the field."""


def flag_problem(row: Any) -> str | None:
    """What is wrong with a flag row, naming the field; None when it is sound."""
    problem = typed_problem(row, _FLAG, "flag", "a flag row") or id_problem(row, ("flag_id", "episode_id"),
                                                                           valid_episode_id)
    if problem:
        return problem
    if not AUTHOR.fullmatch(row["author"]):
        return f"author: not an account name: {row['author'][:80]!r}"
    if not _TIME.fullmatch(row["time"]):
        return f"time: not a UTC time like 2026-12-06T21:50:00Z: {row['time'][:40]!r}"
    try:
        datetime.strptime(row["time"], "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return f"time: not a real time: {row['time'][:40]!r}"
    if _CONTROL.search(row["note"]):
        return "note: holds control characters"
    return None


def validate_flag(row: Any) -> dict:
    """The row in column order when it follows the schema; FlagError naming the field otherwise."""
    problem = flag_problem(row)
    if problem is not None:
        raise FlagError(problem)
    return {name: row[name] for name in FLAG_COLUMNS}


def clean_note(text: Any) -> str:
    """A note as a row keeps it: control characters dropped, outer space trimmed (its length is checked after)."""
    return _CONTROL.sub("", str(text or "")).strip()


def new_flag(episode_id: str, step_kind: str, step: int, label: str, note: str, author: str, *,
             now: float | None = None) -> dict:
    """A new flag's row (validated): a random id, made now, not hidden."""
    moment = utc_stamp(now if now is not None else datetime.now(UTC).timestamp())
    return validate_flag({"flag_id": new_episode_id(), "episode_id": episode_id, "step_kind": step_kind,
                          "step": step, "label": label, "note": clean_note(note), "author": author, "time": moment,
                          "hidden": False})


def read_flags(root: Path) -> list[dict]:
    """Every sound flag row of the folder, one per flag id (its first in path order), oldest file first; unsound
    rows, rows outside their own day's folder and later rows under an id already read are logged and left out."""
    rows, seen = [], set()
    for path in sorted(Path(root).glob(ANNOTATION_GLOB), key=lambda p: p.relative_to(root).as_posix()):
        rel = path.relative_to(root).as_posix()
        if inside(Path(root), rel) is None:  # a link out of the folder
            continue
        for row in _read(path, rel):
            if row["flag_id"] in seen:
                log.warning("left out a second row of flag %s in %s", row["flag_id"], rel)
                continue
            seen.add(row["flag_id"])
            rows.append(row)
    return rows


def _read(path: Path, rel: str) -> list[dict]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    values, _ = read_json_lines(data, where=rel)
    day, seen, sound = rel.split("/")[1], set(), []
    for value in values:
        if flag_problem(value) is None and value["time"][:10] == day and value["flag_id"] not in seen:
            seen.add(value["flag_id"])
            sound.append(validate_flag(value))
    if len(sound) < len(values):
        log.warning("left out %d unsound flag row(s) in %s", len(values) - len(sound), rel)
    return sound


class FlagBook:
    """The flag rows of one rollout folder: this process appends its flags to its own files (`writer_id`, as the
    store writes its index) and hides any flag of the folder. Thread- and process-safe through the files' locks
    (rollouts.jsonio). `on_write(rel)` is called after each change, e.g. to tell the Hub pusher."""

    def __init__(self, root: Path, writer_id: str, *, on_write: Callable[[str], None] | None = None) -> None:
        checked_writer_id(writer_id)
        self.root, self.writer_id = Path(root), writer_id
        self._on_write = on_write or (lambda rel: None)

    def add(self, row: dict) -> dict:
        """Append a new flag's row (validated); the row as written."""
        row = validate_flag(row)
        rel = annotation_rel(row["time"][:10], self.writer_id)
        append_line(self.root / rel, json_line(row))
        self._on_write(rel)
        return row

    def hide(self, flag_id: str) -> dict:
        """Mark a flag of the folder hidden (its row rewritten in place); the row as it now stands. KeyError when
        no file of the folder holds a sound row of it."""
        done: list[dict] = []

        def mark(value: Any) -> dict | None:
            if done or not isinstance(value, dict) or value.get("flag_id") != flag_id or flag_problem(value):
                return None
            done.append({**value, "hidden": True})
            return done[-1]

        for path in sorted(self.root.glob(ANNOTATION_GLOB), key=lambda p: p.relative_to(self.root).as_posix()):
            rel = path.relative_to(self.root).as_posix()
            found = next((row for row in _read(path, rel) if row["flag_id"] == flag_id), None)
            if found is None:
                continue
            if found["hidden"]:
                return found
            if rewrite_lines(path, mark):
                self._on_write(rel)
                return validate_flag(done[0])
        raise KeyError(f"no flag {flag_id!r} in {self.root}")

    def rows(self) -> list[dict]:
        return read_flags(self.root)


def step_words(row: dict) -> str:
    """`turn 4` or `draft 3`."""
    return f"{row['step_kind']} {row['step']}"
