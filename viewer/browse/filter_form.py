"""Browse's filter widgets, one per row of rollouts.filters.FILTERS, made by the row's kind.

A kind's widget says how it is drawn, how a filter value is shown in it, and how its value reads back: the form
needs no list of its own, and a new filter over an existing kind appears here by itself. Elem ids are `f-<URL key>`
(the search box is `browse-search`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr

from rollouts.annotations import LABELS
from rollouts.filters import FILTERS, Filter, Filters
from rollouts.schema import TIERS
from rollouts.sources import SOURCES

YES_NO = ["any", "yes", "no"]
REWARD_RANGE = (0.0, 1.0)  # rewards lie in [0, 1], so the whole range reads as "any"


@dataclass(frozen=True)
class Widget:
    make: Callable[[Filter], Any]
    show: Callable[[Any], Any]  # a filter value as the widget shows it
    read: Callable[[Any], Any]  # the widget's value as Filters.parse takes it


def _dropdown(choices: list[str] | None, scale: int, width: int) -> Callable[[Filter], Any]:
    return lambda f: gr.Dropdown(choices or [], value=[], multiselect=True, label=f.label, elem_id=_elem(f),
                                 **({"scale": scale, "min_width": width} if f.place == "bar" else {"min_width": width}))


def _number(bound: float) -> Callable[[Filter], Any]:
    return lambda f: gr.Number(bound, label=f.label, minimum=REWARD_RANGE[0], maximum=REWARD_RANGE[1], min_width=80,
                               elem_id=_elem(f))


def _day(placeholder: str) -> Callable[[Filter], Any]:
    return lambda f: gr.Textbox(label=f.label, placeholder=placeholder, min_width=110, elem_id=_elem(f))


def _choices_shown(value: Any) -> Any:
    return gr.Dropdown(value=list(value))


WIDGETS: dict[str, Widget] = {
    "search": Widget(lambda f: gr.Textbox(placeholder="ids, models, tasks, runs, words in transcripts", label=f.label,
                                          scale=4, min_width=220, elem_id=_elem(f), max_lines=1),
                     lambda v: v, lambda v: v or ""),
    "choices": Widget(_dropdown(None, 2, 150), _choices_shown, lambda v: list(v or ())),
    "tiers": Widget(_dropdown(list(TIERS), 1, 110), lambda v: list(v), lambda v: list(v or ())),
    "sources": Widget(_dropdown(list(SOURCES), 1, 130), lambda v: list(v), lambda v: list(v or ())),
    "yes_no": Widget(lambda f: gr.Radio(YES_NO, value="any", label=f.label, min_width=150, elem_id=_elem(f)),
                     lambda v: "any" if v is None else "yes" if v else "no", lambda v: v or "any"),
    "at_least": Widget(_number(REWARD_RANGE[0]), lambda v: REWARD_RANGE[0] if v is None else v,
                       lambda v: None if v in (None, REWARD_RANGE[0]) else v),
    "at_most": Widget(_number(REWARD_RANGE[1]), lambda v: REWARD_RANGE[1] if v is None else v,
                      lambda v: None if v in (None, REWARD_RANGE[1]) else v),
    "day_from": Widget(_day("2026-11-01"), lambda v: v or "", lambda v: (v or "").strip()),
    "day_to": Widget(_day("2026-11-30"), lambda v: v or "", lambda v: (v or "").strip()),
    # "Flagged: misread a rule": the labels' words shown, their keys read back.
    "flag_labels": Widget(lambda f: gr.Dropdown([(words, key) for key, words in LABELS.items()], value=[],
                                                multiselect=True, label=f.label, min_width=180, elem_id=_elem(f)),
                          lambda v: list(v), lambda v: list(v or ())),
}


def _elem(f: Filter) -> str:
    return "browse-search" if f.kind == "search" else f"f-{f.key}"


def build_filters(place: str) -> dict[str, Any]:
    """The widgets of the filters that sit in `place` ("bar" or "more"), in FILTERS order, by filter name."""
    return {f.name: WIDGETS[f.kind].make(f) for f in FILTERS if f.place == place}


def read_form(values: list[Any]) -> Filters:
    """Filters from the widgets' values, in FILTERS order."""
    return Filters.parse(**{f.name: WIDGETS[f.kind].read(v) for f, v in zip(FILTERS, values, strict=True)})


def show_filters(widgets: dict[str, Any], filters: Filters) -> dict[Any, Any]:
    """Each widget showing its filter's value (a state that came from a URL or a click)."""
    return {widgets[f.name]: WIDGETS[f.kind].show(filters[f.name]) for f in FILTERS}


def changes(widgets: dict[str, Any]) -> list[Any]:
    """The events after which the form is read: a choice made, a box submitted."""
    return [w.submit if isinstance(w, gr.Textbox | gr.Number) else w.input for w in widgets.values()]
