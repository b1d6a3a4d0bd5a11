"""Everything Browse shows, as one value that round-trips through the page's URL.

`?tab=browse&q=storm&model=a&model=b&tier=busy&sort=reward&order=asc&page=2&rollout=<id>&compare=<id>`: the
search, the filters (a key repeated for several values), the sort, the page, the open rollout and a compare pair
(DESIGN.md "Links"). Opening that URL anywhere shows the same view; the browser's back and forward buttons walk
through the states the page pushed. Pure: query text in, state out, and back.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import parse_qs, urlencode

from rollouts.query import SORTABLE, SOURCES, Filters
from rollouts.schema import TIERS, valid_episode_id

VIEWS = ("list", "board", "compare")


@dataclass(frozen=True)
class BrowseState:
    q: str = ""
    models: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    tiers: tuple[str, ...] = ()
    quays: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    submitted: str = "any"
    feasible: str = "any"
    reward_min: float | None = None
    reward_max: float | None = None
    date_from: str = ""
    date_to: str = ""
    sort: str = "started"
    descending: bool = True
    page: int = 1
    rollout: str = ""
    compare: str = ""
    view: str = "list"
    # Display choices that stay on this page (not in the URL): extra list columns, the board's same-tasks switch.
    columns: tuple[str, ...] = ()
    same_tasks: bool = False
    problems: tuple[str, ...] = field(default=(), compare=False)

    def filters(self) -> Filters:
        return Filters.parse(models=self.models, tasks=self.tasks, tiers=self.tiers, quays=self.quays,
                             reward_min=self.reward_min, reward_max=self.reward_max, submitted=self.submitted,
                             feasible=self.feasible, date_from=self.date_from, date_to=self.date_to,
                             sources=self.sources, search=self.q)

    def with_(self, **changes: Any) -> BrowseState:
        return replace(self, **changes)

    def to_query(self) -> str:
        """The URL query for this state (only what differs from the defaults; `tab=browse` first)."""
        pairs: list[tuple[str, str]] = [("tab", "browse")]
        if self.q:
            pairs.append(("q", self.q))
        for key, values in (("model", self.models), ("task", self.tasks), ("tier", self.tiers),
                            ("quay", self.quays), ("source", self.sources)):
            pairs += [(key, v) for v in values]
        for key, value, default in (("submitted", self.submitted, "any"), ("feasible", self.feasible, "any"),
                                    ("from", self.date_from, ""), ("to", self.date_to, "")):
            if value != default:
                pairs.append((key, value))
        for key, number in (("rmin", self.reward_min), ("rmax", self.reward_max)):
            if number is not None:
                pairs.append((key, f"{number:g}"))
        if self.sort != "started" or not self.descending:
            pairs.append(("sort", self.sort))
            if not self.descending:
                pairs.append(("order", "asc"))
        if self.page > 1:
            pairs.append(("page", str(self.page)))
        if self.rollout:
            pairs.append(("rollout", self.rollout))
        if self.compare:
            pairs.append(("compare", self.compare))
        if self.view != "list" and not (self.view == "compare" and self.compare):
            pairs.append(("view", self.view))
        return urlencode(pairs)


def state_from_query(query: str | dict[str, Any]) -> BrowseState:
    """The state a URL query asks for; values that make no sense are dropped and named in `problems`."""
    params = parse_qs(query.lstrip("?"), keep_blank_values=False) if isinstance(query, str) else {
        k: v if isinstance(v, list) else [v] for k, v in query.items()}

    def many(key: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v.strip() for v in params.get(key, []) if v.strip()))[:50]

    def one(key: str, default: str = "") -> str:
        values = params.get(key) or [default]
        return str(values[-1]).strip()[:200]

    problems = []
    sort = one("sort", "started")
    if sort not in SORTABLE:
        problems.append(f"unknown sort {sort[:20]!r}")
        sort = "started"
    tiers = tuple(t for t in many("tier") if t in TIERS)
    sources = tuple(s for s in many("source") if s in SOURCES)
    rollout, compare = one("rollout"), one("compare")
    for name, value in (("rollout", rollout), ("compare", compare)):
        if value and not valid_episode_id(value):
            problems.append(f"malformed {name} id")
    view = one("view", "compare" if compare else "list")
    return BrowseState(
        q=one("q"), models=many("model"), tasks=many("task"), tiers=tiers, quays=many("quay"), sources=sources,
        submitted=_yes_no(one("submitted", "any")), feasible=_yes_no(one("feasible", "any")),
        reward_min=_number(one("rmin")), reward_max=_number(one("rmax")), date_from=one("from"), date_to=one("to"),
        sort=sort, descending=one("order", "desc") != "asc", page=max(1, _int(one("page", "1"))),
        rollout=rollout, compare=compare, view=view if view in VIEWS else "list", problems=tuple(problems))


def _yes_no(value: str) -> str:
    return value if value in ("yes", "no") else "any"


def _number(value: str) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def _int(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        return 1
