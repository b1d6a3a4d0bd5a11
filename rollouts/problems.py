"""The one wording of what is wrong with a JSON value checked against its type (a record, an event, a match row).

It sits apart so that every checked type can use it without importing the others.
"""

from __future__ import annotations

import pydantic


def first_problem(exc: pydantic.ValidationError, what: str) -> str:
    """A validation error as one line naming the field: `final.submitted: Input should be ... (and 2 more)`."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or what
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {first['msg']}{more}"
