"""Browse's filters: one table, one row per filter, from which everything else is made.

A `Filter` row says its name (the API's parameter and the key of a `Filters` value), its URL key, its kind, its
label, the index column it narrows and where its widget sits. A kind says how a value is read from a form, an API
call or a URL (a value that cannot be understood is left out and named in `problems`, so the rest still apply), how
it goes back into a URL, and what SQL condition it makes. So a new filter over an existing kind is one row here: the
form (viewer/browse), the URL (viewer/browse/state.py), the API's parameters (viewer/browse/api.py) and the query
(rollouts.index.engine) are all made from FILTERS. Values never enter SQL text: they go as parameters.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from rollouts.annotations import LABELS
from rollouts.schema import SOURCE_LABELS, SOURCES, TIERS

SORTABLE = {"started": "newest", "reward": "reward", "cost": "cost", "turns": "turns", "checks": "checks",
            "tokens": "tokens", "seconds": "seconds", "model": "model", "task_id": "task"}
# Newest first, rows without a start time last; then source order, then id, so every answer is reproducible.
FRAME_ORDER = "started DESC NULLS LAST, grp, episode_id"
PAGE_SIZE = 50
SEARCH_MAX_CHARS = 200
SEARCH_MAX_TERMS = 8  # each term is one more condition over every row: a long list only slows everyone down
CHOICES_MAX = 50  # values of one choice filter (a URL may repeat a key; nobody picks more by hand)
Clause = tuple[str, list[Any]]


@dataclass(frozen=True)
class Kind:
    """How a kind of filter reads, writes and queries its value. `empty` is its "any" value."""

    empty: Any
    parse: Callable[[Any, str, list[str]], Any]  # (raw value, label, problems) -> value
    to_url: Callable[[Any], list[str]]
    sql: Callable[[str, Any], Clause]  # (column, value) -> (condition, parameters)


@dataclass(frozen=True)
class Filter:
    name: str    # the API's parameter, and the key in a Filters value
    key: str     # the URL key (repeated for several values)
    kind: str    # a key of KINDS
    label: str
    column: str  # the `rollouts` view's column it narrows
    place: str = "more"  # "bar": always shown; "more": behind the Filters toggle


def order_by(sort: str = "started", descending: bool = True) -> str:
    """The SQL order of a SORTABLE column, missing values last, ties newest first."""
    if sort not in SORTABLE:
        raise ValueError(f"cannot sort by {sort!r}: use one of {', '.join(SORTABLE)}")
    if sort == "started" and descending:
        return FRAME_ORDER
    return f"{sort} {'DESC' if descending else 'ASC'} NULLS LAST, {FRAME_ORDER}"


# -- the kinds -----------------------------------------------------------------------------------------------------


def _names(value: Any, label: str = "", problems: list[str] | None = None) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else value if isinstance(value, Iterable) else [value]
    return tuple(dict.fromkeys(str(v).strip()[:200] for v in items if str(v).strip()))[:CHOICES_MAX]


def _among(allowed: tuple[str, ...]) -> Callable[[Any, str, list[str]], tuple[str, ...]]:
    def parse(value: Any, label: str, problems: list[str]) -> tuple[str, ...]:
        chosen = _names(value)
        odd = [v for v in chosen if v not in allowed]
        if odd:
            problems.append(f"unknown {label.lower()} {', '.join(v[:40] for v in odd)}: use {', '.join(allowed)}")
        return tuple(v for v in chosen if v in allowed)

    return parse


def _number(value: Any, label: str, problems: list[str]) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        problems.append(f"{label} {str(value)[:20]!r} is not a number")
        return None
    return None if math.isnan(number) else number


_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def _day(value: Any, label: str, problems: list[str]) -> str | None:
    text = str(value or "").strip()
    if not text:
        return None
    try:
        if not _DAY.fullmatch(text):
            raise ValueError
        date.fromisoformat(text)
    except ValueError:
        problems.append(f"{label} {text[:20]!r} is not a date like 2026-11-29")
        return None
    return text


def _yes_no(value: Any, label: str = "", problems: list[str] | None = None) -> bool | None:
    if isinstance(value, bool):
        return value
    text = str(value or "").strip().lower()
    return True if text in ("yes", "true", "1") else False if text in ("no", "false", "0") else None


def _search(value: Any, label: str, problems: list[str]) -> str:
    """The search box's words, each once whatever its case (as typed, so a link shows what was typed)."""
    first: dict[str, str] = {}
    for word in str(value or "").split():
        first.setdefault(word.lower(), word)
    terms = list(first.values())
    if len(terms) > SEARCH_MAX_TERMS:
        problems.append(f"the search keeps its first {SEARCH_MAX_TERMS} different words")
    return " ".join(terms[:SEARCH_MAX_TERMS])[:SEARCH_MAX_CHARS]


def _compare(op: str) -> Callable[[str, Any], Clause]:
    return lambda column, value: (f"{column} {op} ?", [value])


def _choices_sql(column: str, value: tuple[str, ...]) -> Clause:
    return f"{column} = ANY(?::VARCHAR[])", [list(value)]


def _sources_sql(column: str, value: tuple[str, ...]) -> Clause:
    # `local+hub` rows are in both sources, so either name finds them.
    return f"list_contains(?, {column})", [[lb for lb in SOURCE_LABELS if set(lb.split("+")) & set(value)]]


def _flagged_sql(column: str, value: tuple[str, ...]) -> Clause:
    # The engine's `flags` table holds the flags shown (rollouts.index.engine): an episode with one of these labels.
    return f"{column} IN (SELECT episode_id FROM flags WHERE label = ANY(?::VARCHAR[]))", [list(value)]


def _labels(value: Any, label: str, problems: list[str]) -> tuple[str, ...]:
    """Flag labels by key or by their words (`misread_rule` or `misread a rule`), as the URL and the API take them."""
    words = {v: k for k, v in LABELS.items()}
    chosen = tuple(dict.fromkeys(words.get(v.lower(), v) for v in _names(value)))
    odd = [v for v in chosen if v not in LABELS]
    if odd:
        problems.append(f"unknown flag label {', '.join(v[:40] for v in odd)}: use {', '.join(LABELS)}")
    return tuple(v for v in chosen if v in LABELS)


def _day_sql(op: str) -> Callable[[str, Any], Clause]:
    # Rows without a start time (upstream's) have no day, so a date filter leaves them out.
    return lambda column, value: (f"{column} IS NOT NULL AND {column} {op} ?", [value])


def _number_url(value: float) -> list[str]:
    return [f"{value:g}"]


KINDS: dict[str, Kind] = {
    "choices": Kind((), _names, list, _choices_sql),
    "tiers": Kind((), _among(TIERS), list, _choices_sql),
    "sources": Kind((), _among(SOURCES), list, _sources_sql),
    "yes_no": Kind(None, _yes_no, lambda v: ["yes" if v else "no"], _compare("=")),
    "at_least": Kind(None, _number, _number_url, _compare(">=")),
    "at_most": Kind(None, _number, _number_url, _compare("<=")),
    "day_from": Kind(None, _day, lambda v: [v], _day_sql(">=")),
    "day_to": Kind(None, _day, lambda v: [v], _day_sql("<=")),
    "flag_labels": Kind((), _labels, list, _flagged_sql),
    # The search's SQL needs the rows' values and the transcripts: rollouts.index.engine builds it (search_sql).
    "search": Kind("", _search, lambda v: [v], lambda column, value: ("true", [])),
}

FILTERS: tuple[Filter, ...] = (
    Filter("q", "q", "search", "🔎 Search", "", "bar"),
    Filter("model", "model", "choices", "Model", "model", "bar"),
    Filter("task", "task", "choices", "Task", "task_id", "bar"),
    Filter("tier", "tier", "tiers", "Tier", "difficulty", "bar"),
    Filter("quay", "quay", "choices", "Quay", "quay"),
    Filter("source", "source", "sources", "Source", "source"),
    Filter("submitted", "submitted", "yes_no", "Submitted", "submitted"),
    Filter("feasible", "feasible", "yes_no", "Feasible", "feasible"),
    Filter("reward_min", "rmin", "at_least", "Reward ≥", "reward"),
    Filter("reward_max", "rmax", "at_most", "Reward ≤", "reward"),
    Filter("date_from", "from", "day_from", "From (UTC)", "date"),
    Filter("date_to", "to", "day_to", "To (UTC)", "date"),
    Filter("flagged", "flagged", "flag_labels", "Flagged", "episode_id"),
)
BY_NAME = {f.name: f for f in FILTERS}


# -- a set of filter values ----------------------------------------------------------------------------------------


class Filters(Mapping[str, Any]):
    """What the list and the leaderboard are narrowed to: one value per FILTERS row ("any" when empty)."""

    __slots__ = ("_values", "problems")

    def __init__(self, values: Mapping[str, Any] | None = None, problems: Iterable[str] = ()) -> None:
        values = dict(values or {})
        unknown = set(values) - set(BY_NAME)
        if unknown:
            raise TypeError(f"unknown filter(s): {', '.join(sorted(unknown))}")
        self._values = {f.name: values.get(f.name, KINDS[f.kind].empty) for f in FILTERS}
        self.problems: tuple[str, ...] = tuple(problems)  # inputs that were not understood

    @classmethod
    def parse(cls, **raw: Any) -> Filters:
        """Filters from form or API values (lists or comma-separated text), by filter name."""
        unknown = set(raw) - set(BY_NAME)
        if unknown:
            raise TypeError(f"unknown filter(s): {', '.join(sorted(unknown))}")
        problems: list[str] = []
        values = {name: KINDS[BY_NAME[name].kind].parse(value, BY_NAME[name].label, problems)
                  for name, value in raw.items()}
        start, end = values.get("date_from"), values.get("date_to")
        if start and end and start > end:
            problems.append(f"the from date {start} is after the to date {end}: dates not applied")
            values["date_from"] = values["date_to"] = None
        return cls(values, problems)

    @classmethod
    def from_query(cls, params: Mapping[str, list[str]]) -> Filters:
        """Filters from a URL's query (parse_qs's shape: key -> every value given)."""
        raw = {}
        for f in FILTERS:
            given = [v for v in params.get(f.key, []) if str(v).strip()]
            if given:
                many = KINDS[f.kind].empty == ()
                raw[f.name] = given if many else given[-1]
        return cls.parse(**raw)

    def query_pairs(self) -> list[tuple[str, str]]:
        """The URL's (key, value) pairs for the filters that are set, in FILTERS order."""
        return [(f.key, text) for f in FILTERS if self.is_set(f.name)
                for text in KINDS[f.kind].to_url(self._values[f.name])]

    def is_set(self, name: str) -> bool:
        value = self._values[name]
        return value is not None and value != KINDS[BY_NAME[name].kind].empty

    def where(self) -> Iterator[Clause]:
        """The SQL condition of each filter that is set (the search's is rollouts.index.engine's)."""
        for f in FILTERS:
            if self.is_set(f.name) and f.kind != "search":
                yield KINDS[f.kind].sql(f.column, self._values[f.name])

    def with_(self, **changes: Any) -> Filters:
        return Filters({**self._values, **changes}, self.problems)

    @property
    def search(self) -> str:
        return self._values["q"]

    def key(self) -> tuple:
        return tuple(self._values[f.name] for f in FILTERS)

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Filters) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __repr__(self) -> str:
        return f"Filters({ {k: v for k, v in self._values.items() if self.is_set(k)} })"
