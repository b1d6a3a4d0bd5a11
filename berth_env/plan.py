"""Reading a plan: anything an agent might send (text, fenced JSON, a list, a mapping) into checked entries (§2).

The parser is deliberately lenient about *form* (names for ids, numeric strings, a `{"plan": ...}` wrapper) and
strict about *content*: every entry either becomes `(berth_hour, section, cranes)` for a known ship or is rejected
with one entry problem. Input it cannot read at all raises `PlanError`. No input makes it raise anything else.
"""

from __future__ import annotations

import json
import math
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from berth_env.rules import Task, is_crane_task

Entry = tuple[int, int, int | None]
"""(berth_hour, first section, cranes); cranes is None on plain tasks."""

HOUR_LIMIT = 16_800  # 100 weeks either side of hour 0
SECTION_LIMIT = 1_000
CRANE_LIMIT = 1_000

# Fatal categories (PlanError) and entry-problem categories, as named in the spec.
INVALID_JSON = "INVALID_JSON"
ENTRY_NOT_OBJECT = "ENTRY_NOT_OBJECT"
WRONG_SHAPE = "WRONG_SHAPE"
TOO_MANY_ENTRIES = "TOO_MANY_ENTRIES"
UNKNOWN_SHIP = "UNKNOWN_SHIP"
DUPLICATE = "DUPLICATE"
NOT_WHOLE = "NOT_WHOLE"
OUT_OF_RANGE = "OUT_OF_RANGE"
BAD_CRANES = "BAD_CRANES"

_FENCE = "```"
_EXAMPLE = '{"ship": 0, "berth_hour": 12, "section": 4, "cranes": 2}'
_ABSENT = object()  # a field the entry does not have at all (distinct from an explicit null)


class PlanError(ValueError):
    """A plan that cannot be read at all. `category` is one of the fatal categories; `message` says why."""

    def __init__(self, category: str, message: str) -> None:
        super().__init__(message)
        self.category = category
        self.message = message


@dataclass(slots=True)
class ParsedPlan:
    """The accepted entries by ship id, plus one (category, text) pair per rejected entry, in input order."""

    entries: dict[int, Entry] = field(default_factory=dict)
    issues: list[tuple[str, str]] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        """The entry-problem texts (what `check_plan` reports as `entry_problems`)."""
        return [text for _, text in self.issues]


# --- showing values in messages -------------------------------------------------------------------------------

_short = reprlib.Repr()
_short.maxstring = 40
_short.maxother = 40
_short.maxlevel = 2
_short.maxlist = _short.maxdict = _short.maxtuple = 4


def show(value: Any) -> str:
    """A short Python-style repr for messages: hostile values (10 MB strings, 5,000-digit ints) stay readable."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        # repr of a huge int is slow and, past 4,300 digits, raises; its size is what matters here.
        digits = int(value.bit_length() * math.log10(2)) + 1
        return f"<{'-' if value < 0 else ''}integer of about {digits} digits>"
    return _short.repr(value)


def _kind(value: Any) -> str:
    """The JSON name of a value's type, for shape messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return f"a {type(value).__name__}"


# --- step 1: text to JSON ---------------------------------------------------------------------------------------


def fenced_content(text: str) -> str:
    """The content of the first Markdown code fence in `text`, or `text` itself if there is none.

    Same result as the regex ```` ```(?:json)?\\s*(.*?)``` ```` with DOTALL, but by plain string search: that regex
    backtracks quadratically on an opening fence followed by megabytes of whitespace and no closing fence.
    The closing fence is simply the next ``` after the opening one: the optional `json` word and whitespace
    contain no backticks, so they can never hide it.
    """
    opening = text.find(_FENCE)
    if opening < 0:
        return text
    closing = text.find(_FENCE, opening + len(_FENCE))
    if closing < 0:
        return text
    start = opening + len(_FENCE)
    if text.startswith("json", start):
        start += 4
    while start < closing and text[start].isspace():
        start += 1
    return text[start:closing]


def _decode(text: str) -> Any:
    """JSON text to a value with Python `json` semantics; any failure (including deep nesting) is INVALID_JSON."""
    try:
        return json.loads(fenced_content(text.strip()))
    except json.JSONDecodeError as err:
        raise PlanError(
            INVALID_JSON,
            f"the plan is not valid JSON: {err.msg} (line {err.lineno}, column {err.colno}, char {err.pos})",
        ) from None
    except RecursionError:
        raise PlanError(INVALID_JSON, "the plan is not valid JSON: it is nested too deeply to read") from None
    except ValueError as err:  # e.g. an integer literal past Python's 4,300-digit conversion limit
        raise PlanError(INVALID_JSON, f"the plan is not valid JSON: {str(err)[:200]}") from None


# --- steps 2-6: JSON value to raw entries -----------------------------------------------------------------------


def _raw_entries(value: Any) -> list[tuple[Any, Any, Any, Any]]:
    """(ship reference, hour, section, cranes) per entry; fields an entry lacks are `_ABSENT` or None."""
    if isinstance(value, Mapping) and len(value) == 1 and "plan" in value:
        value = value["plan"]  # unwrapped once; a string inside is not decoded again
    if isinstance(value, Mapping):
        return [(key, *_mapping_fields(item)) for key, item in value.items()]
    if isinstance(value, list | tuple):
        raw = []
        for position, item in enumerate(value, start=1):
            if not isinstance(item, Mapping):
                raise PlanError(
                    ENTRY_NOT_OBJECT,
                    f"plan entry {position} is {_kind(item)}, not an object like {_EXAMPLE}",
                )
            if "ship" in item:
                ref = item["ship"]
            elif "id" in item:
                ref = item["id"]
            else:
                ref = item.get("name", _ABSENT)
            raw.append((ref, _hour_of(item), item.get("section"), item.get("cranes")))
        return raw
    raise PlanError(
        WRONG_SHAPE,
        f"the plan must be a list of entries like {_EXAMPLE} (or an object keyed by ship id); got {_kind(value)}",
    )


def _hour_of(item: Mapping[str, Any]) -> Any:
    return item["berth_hour"] if "berth_hour" in item else item.get("hour")


def _mapping_fields(item: Any) -> tuple[Any, Any, Any]:
    """The value of one mapping entry: an object with named fields, or `[hour, section]` / `[hour, section, cranes]`."""
    if isinstance(item, Mapping):
        return _hour_of(item), item.get("section"), item.get("cranes")
    if isinstance(item, list | tuple) and len(item) in (2, 3):
        return item[0], item[1], item[2] if len(item) == 3 else None
    return None, None, None


# --- step 7: one entry ------------------------------------------------------------------------------------------


def whole_number(value: Any) -> int | None:
    """`value` as an exact integer, or None if it is not one (§2.2 c).

    Integers pass; floats only when integral and finite (36.0); strings only when Python reads them both as an
    int literal and as a float of the same value ("36", " +36 ", but not "36.0" or "12.5"). Booleans never pass.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else None
    if isinstance(value, str):
        try:
            number = int(value, 10)
            return number if number == float(value) else None
        except (ValueError, OverflowError):
            return None
    return None


def _resolve_ship(ref: Any, task: Task, names: Mapping[str, list[int]]) -> int | None:
    """The ship id an entry refers to (§2.2 a), or None. Booleans and floats never name a ship."""
    if isinstance(ref, bool):
        return None
    if isinstance(ref, int):
        ship_id = ref
    elif isinstance(ref, str):
        text = ref.strip()
        if text.lstrip("-").isdigit():
            # "--3" and digit-like characters int() refuses (e.g. superscripts) pass isdigit(): unknown, not a crash.
            try:
                ship_id = int(text)
            except ValueError:
                return None
        else:
            ids = names.get(text.upper(), [])
            return ids[0] if len(ids) == 1 else None
    else:
        return None
    return ship_id if 0 <= ship_id < len(task["ships"]) else None


def _ship_names(task: Task) -> dict[str, list[int]]:
    """Upper-cased ship name -> ids; a name that several calls share resolves to nobody."""
    names: dict[str, list[int]] = {}
    for ship in task["ships"]:
        names.setdefault(str(ship["name"]).upper(), []).append(ship["id"])
    return names


def parse_plan(task: Task, raw: Any) -> ParsedPlan:
    """Read `raw` (text, list, mapping...) as a plan for `task`.

    Raises PlanError (INVALID_JSON, ENTRY_NOT_OBJECT, WRONG_SHAPE, TOO_MANY_ENTRIES) when the plan as a whole
    cannot be read. Otherwise every entry is accepted or leaves one problem (UNKNOWN_SHIP, DUPLICATE, NOT_WHOLE,
    OUT_OF_RANGE, BAD_CRANES); ships nobody planned are the checker's business, not the parser's.
    """
    value = _decode(raw) if isinstance(raw, str) else raw
    raw_entries = _raw_entries(value)
    ships = task["ships"]
    _check_size(len(raw_entries), len(ships))
    crane_rule = is_crane_task(task)
    names = _ship_names(task)
    plan = ParsedPlan()
    for position, (ref, hour, section, cranes) in enumerate(raw_entries, start=1):
        ship_id = _resolve_ship(ref, task, names)
        if ship_id is None:
            shown = "(no ship given)" if ref is _ABSENT else show(ref)
            plan.issues.append((UNKNOWN_SHIP, f"entry {position}: unknown ship {shown}; use a ship id "
                                              f"0-{len(ships) - 1} from the table"))
            continue
        where = f"entry {position} (ship {ship_id})"
        if ship_id in plan.entries:
            plan.issues.append((DUPLICATE, f"{where}: the ship is already planned; only its first entry is kept"))
            continue
        try:
            plan.entries[ship_id] = _entry(ships[ship_id], where, hour, section, cranes, crane_rule=crane_rule)
        except _Rejected as rejected:
            plan.issues.append((rejected.category, rejected.text))
    return plan


def _check_size(entries: int, ships: int) -> None:
    """A plan far longer than the task's ship list is refused whole rather than read entry by entry."""
    limit = 4 * ships + 10
    if entries > limit:
        raise PlanError(
            TOO_MANY_ENTRIES,
            f"the plan has {entries} entries but the task has {ships} ships "
            f"(at most {limit} entries are read; give one entry per ship)",
        )


class _Rejected(Exception):
    """One entry's problem: its category and the text `check_plan` reports."""

    def __init__(self, category: str, text: str) -> None:
        super().__init__(text)
        self.category = category
        self.text = text


def _entry(ship: dict, where: str, hour: Any, section: Any, cranes: Any, *, crane_rule: bool) -> Entry:
    """One known ship's entry, checked (cranes only on crane-rule tasks). Raises _Rejected."""
    h, s = whole_number(hour), whole_number(section)
    if h is None or s is None:
        raise _Rejected(NOT_WHOLE, f"{where}: berth_hour and section must be whole numbers, "
                                   f"got berth_hour={show(hour)}, section={show(section)}")
    if not (-HOUR_LIMIT <= h <= HOUR_LIMIT and -SECTION_LIMIT <= s <= SECTION_LIMIT):
        raise _Rejected(OUT_OF_RANGE, f"{where}: berth_hour must be within -{HOUR_LIMIT}..{HOUR_LIMIT} and section "
                                      f"within -{SECTION_LIMIT}..{SECTION_LIMIT}, got berth_hour={show(hour)}, "
                                      f"section={show(section)}")
    if not crane_rule:
        return (h, s, None)
    if cranes is None:
        return (h, s, ship["std_cranes"])
    count = whole_number(cranes)
    if count is None or not -CRANE_LIMIT <= count <= CRANE_LIMIT:
        raise _Rejected(BAD_CRANES, f"{where}: cranes must be a whole number, {ship['min_cranes']}-"
                                    f"{ship['max_cranes']} for this ship (leave it out for the standard "
                                    f"{ship['std_cranes']}), got {show(cranes)}")
    return (h, s, count)


def canonical_plan(plan: ParsedPlan | Mapping[int, Entry]) -> list[dict[str, int]]:
    """The plan as a list sorted by ship: `{ship, berth_hour, section}` plus `cranes` when the entry has one (§2.4).

    Parsing this list gives the same plan back, so it is the form kept in logs, references and episode steps.
    """
    entries = plan.entries if isinstance(plan, ParsedPlan) else plan
    canonical = []
    for ship_id in sorted(entries):
        hour, section, *rest = entries[ship_id]
        item = {"ship": ship_id, "berth_hour": hour, "section": section}
        if rest and rest[0] is not None:
            item["cranes"] = rest[0]
        canonical.append(item)
    return canonical
