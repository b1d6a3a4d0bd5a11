"""The one wording of what is wrong with a JSON value checked against its type (a record, an event, a match row,
a flag row).

It sits apart so that every checked type can use it without importing the others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pydantic

ID_WORDS = "must be 1-64 letters, digits, '-' or '_'"


def first_problem(exc: pydantic.ValidationError, what: str) -> str:
    """A validation error as one line naming the field: `final.submitted: Input should be ... (and 2 more)`."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or what
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {first['msg']}{more}"


def typed_problem(value: Any, adapter: pydantic.TypeAdapter, what: str, noun: str) -> str | None:
    """What is wrong with `value` as a JSON object of the adapter's type (`noun` names it when it is no object at
    all, `what` when the error has no field); None when it fits."""
    if not isinstance(value, dict):
        return f"{noun} is a JSON object, not {type(value).__name__}"
    try:
        adapter.validate_python(value)
    except pydantic.ValidationError as exc:
        return first_problem(exc, what)
    return None


def id_problem(row: Mapping[str, Any], keys: Iterable[str], valid: Callable[[Any], bool]) -> str | None:
    """The first of `keys` whose value `valid` refuses as an id, said with the id alphabet; None when all pass."""
    for key in keys:
        if not valid(row[key]):
            return f"{key}: {ID_WORDS}, got {str(row[key])[:80]!r}"
    return None
