"""The app's limits: an episode's defaults (the loop's, the CLI's flags and the Run form's fields all start from
these), and the bounds on what it takes in: from a visitor, from a server and from a tasks dataset.

Bounds are set from real sizes, with room to spare, so no real input meets them and nothing hostile gets far:

- a visitor's input (a plan, a model spec, a task id, a server URL, a key, a name): INPUT_MAX_BYTES. The largest
  dock-v1 plan (59 ships) is 3.4 KB as JSON and about 5 KB pasted pretty-printed; 64 KB leaves twelve times that.
  `check_input` is the one check every door calls before anything is recorded or sent;
- a task (a tasks-dataset row, or one a server shows): the largest dock-v1 task has 59 ships, 18 disruptions and
  35 KB of JSON with its references; the bounds below are about three times that, and grading stays in
  milliseconds;
- a server's answer: a Task API answer at most ANSWER_MAX_BYTES within ANSWER_MAX_S (the train split's public
  task list, 1,050 tasks, is about 16 MB), one OpenEnv message at most MESSAGE_MAX_BYTES (the largest answer
  measured, a check of 59 ships all berthed at hour 0, is 0.33 MB of text).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from itertools import islice
from typing import Any

DEFAULT_MAX_TURNS = 12
DEFAULT_MAX_TOKENS = 24000  # per turn
DEFAULT_WALL_CLOCK_S = 1800.0

INPUT_MAX_BYTES = 64 * 1024
TASK_MAX_SHIPS = 200
TASK_MAX_DISRUPTIONS = 60
TASK_MAX_BYTES = 256 * 1024  # a row's `task` JSON, and each of its plan columns
ANSWER_MAX_BYTES = 32 * 1024 * 1024
ANSWER_MAX_S = 60.0
MESSAGE_MAX_BYTES = 4 * 1024 * 1024


# Task ids name a path segment, so only a safe alphabet gets in (checked with fullmatch: `$` would let a trailing
# newline through); "." and ".." fit the alphabet but are path steps, not names.
TASK_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")


def valid_task_id(task_id: Any) -> bool:
    return isinstance(task_id, str) and TASK_ID.fullmatch(task_id) is not None and task_id not in (".", "..")


class InputTooLarge(ValueError):
    """A visitor's input over INPUT_MAX_BYTES; the message says what and the limit (plain text)."""


def input_size(value: Any, limit: int = INPUT_MAX_BYTES) -> int:
    """About the size of `value` as JSON, in bytes; counting stops past `limit` (then any number over it is
    returned), so a 16 MB plan costs no more to refuse than a 64 KB one. No recursion: any depth is fine."""
    total, stack = 0, [value]
    while stack and total <= limit:
        item = stack.pop()
        if isinstance(item, str):
            # A character is at least one byte: a long text is over without encoding it.
            total += 2 + (len(item) if len(item) > limit else len(item.encode("utf-8", "surrogatepass")))
        elif isinstance(item, bytes | bytearray):
            total += 2 + len(item)
        elif item is None or isinstance(item, bool | float):
            total += 5
        elif isinstance(item, int):
            total += 1 + item.bit_length() // 3  # str() of a huge int would raise; this is its digit count
        elif isinstance(item, Mapping):
            total += 2 + len(item)
            for key, inner in islice(item.items(), limit + 1):
                stack += [key, inner]
        elif isinstance(item, list | tuple):
            total += 2 + len(item)
            stack.extend(item[: limit + 1])
        else:  # what Gradio hands over is JSON; anything else is counted by its text
            total += len(str(item))
    return total


def check_input(value: Any, what: str) -> None:
    """Refuse a visitor's input over INPUT_MAX_BYTES with InputTooLarge naming `what` ("the plan")."""
    if input_size(value) > INPUT_MAX_BYTES:
        raise InputTooLarge(f"{what[:1].upper()}{what[1:]} is too large: this app takes at most "
                            f"{INPUT_MAX_BYTES // 1024} KB from a visitor (the largest plan is about 4 KB). "
                            "Nothing was sent or saved.")


def task_size_problem(task: Mapping[str, Any]) -> str | None:
    """Why a task is too large to offer (its ships or disruptions over the bounds), or None."""
    for field, bound in (("ships", TASK_MAX_SHIPS), ("disruptions", TASK_MAX_DISRUPTIONS)):
        items = task.get(field)
        if isinstance(items, list | tuple) and len(items) > bound:
            return f"it is too large: {len(items):,} {field} (at most {bound})"
    return None
