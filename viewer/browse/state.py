"""Everything Browse shows, as one value that round-trips through the page's URL.

`?tab=browse&q=storm&model=a&model=b&tier=busy&sort=reward&order=asc&page=2&rollout=<id>&step=2`: the filters
(rollouts.filters: a key repeated for several values), the sort, the page, the open rollout and the draft its
slider shows (`step`, from 1; none: the last); a compare pair is `compare=<a>,<b>&step=<k>` (A the open rollout;
`rollout=<a>&compare=<b>` reads the same) (DESIGN.md "Links"). Opening that URL anywhere shows the same view; the browser's back and forward buttons walk
through the states the page pushed. Pure: query text in, state out, and back.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import parse_qs, urlencode

from rollouts.filters import SORTABLE, Filters
from rollouts.schema import valid_episode_id

VIEWS = ("list", "board", "compare")


@dataclass(frozen=True)
class BrowseState:
    filters: Filters = field(default_factory=Filters)
    sort: str = "started"
    descending: bool = True
    page: int = 1
    rollout: str = ""
    step: int = 0  # the open rollout's draft on the slider, from 1 (0: the last one)
    compare: str = ""
    view: str = "list"
    # Display choices that stay on this page (not in the URL): extra list columns, the board's same-tasks switch.
    columns: tuple[str, ...] = ()
    same_tasks: bool = False
    problems: tuple[str, ...] = field(default=(), compare=False)  # what the URL asked for that made no sense

    def with_(self, **changes: Any) -> BrowseState:
        return replace(self, **changes)

    def to_query(self) -> str:
        """The URL query for this state (only what differs from the defaults; `tab=browse` first)."""
        pairs: list[tuple[str, str]] = [("tab", "browse"), *self.filters.query_pairs()]
        if self.sort != "started" or not self.descending:
            pairs.append(("sort", self.sort))
            if not self.descending:
                pairs.append(("order", "asc"))
        if self.page > 1:
            pairs.append(("page", str(self.page)))
        if self.rollout and self.compare and self.view == "compare":  # a compare's own address: compare=<a>,<b>
            pairs.append(("compare", f"{self.rollout},{self.compare}"))
        elif self.rollout:
            pairs.append(("rollout", self.rollout))
        if self.step and self.rollout:
            pairs.append(("step", str(self.step)))
        if self.compare and self.view != "compare":
            pairs.append(("compare", self.compare))
        if self.view != "list" and not (self.view == "compare" and self.compare):
            pairs.append(("view", self.view))
        return urlencode(pairs)


def state_from_query(query: str | dict[str, Any]) -> BrowseState:
    """The state a URL query asks for; values that make no sense are dropped and named in `problems` (or in the
    filters' own)."""
    params = parse_qs(query.lstrip("?"), keep_blank_values=False) if isinstance(query, str) else {
        k: v if isinstance(v, list) else [v] for k, v in query.items()}

    def one(key: str, default: str = "") -> str:
        values = params.get(key) or [default]
        return str(values[-1]).strip()[:200]

    problems = []
    sort = one("sort", "started")
    if sort not in SORTABLE:
        problems.append(f"unknown sort {sort[:20]!r}")
        sort = "started"
    rollout, compare = one("rollout"), one("compare")
    if "," in compare:  # `compare=<a>,<b>`: A is the open rollout
        first, compare = (part.strip() for part in compare.split(",", 1))
        rollout = rollout or first
    for name, value in (("rollout", rollout), ("compare", compare)):
        if value and not valid_episode_id(value):
            problems.append(f"malformed {name} id")
    step = one("step")
    if step and not (step.isdigit() and 0 < int(step) < 100_000):
        problems.append("malformed step (a draft number, from 1)")
    view = one("view", "compare" if compare else "list")
    return BrowseState(filters=Filters.from_query(params), sort=sort, descending=one("order", "desc") != "asc",
                       page=max(1, _int(one("page", "1"))), rollout=rollout, compare=compare,
                       step=int(step) if step.isdigit() and 0 < int(step) < 100_000 and rollout else 0,
                       view=view if view in VIEWS else "list", problems=tuple(problems))


def _int(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        return 1
