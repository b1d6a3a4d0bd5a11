"""The task picker the Run and Play sections share: a task dropdown (type to search) over the tasks the filters
leave (split, tier, quay, ship count), a Random button, and the line that says which tasks are served.

With the tasks dataset loaded there are 1,100 tasks, so the dropdown only ever holds the filtered ones. The page
learns that the dataset has loaded (or that the Hub cannot be reached) from a timer that stops once loading is over.
The catalog state is None for this app's own tasks, or a list of ids a remote server listed (Run's server choice).

Handlers are top-level functions taking the picker first (wired with `viewer.wiring.bind`) and return dicts keyed
by component.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from berth_env import TIERS
from catalog.task_dataset import tasks_status
from catalog.tasks import SHIP_BANDS, TaskChoice, embedded_catalog, filter_choices, random_choice
from viewer.context import AppContext
from viewer.wiring import bind, unchanged

ALL = "all"
DEFAULT_SPLIT = "eval"  # the benchmark split leads; "train" and "all" are one click away
SEARCH_HINT = "type to search"
FIRST_POLL_S, POLL_S = 0.5, 2.0  # a page soon shows what is served now, then follows the loading at ease
CSS = """
.task-filters {gap: 6px !important; align-items: center}
.task-filters .wrap-inner {padding: 0 2px 0 8px !important}
.task-filters input {margin-left: 0 !important; padding-right: 16px !important; text-overflow: ellipsis; font-size: 0.9rem}
.random-task {max-width: 44px; min-height: 36px}
"""


@dataclass
class TaskPicker:
    ctx: AppContext
    task: gr.Dropdown
    split: gr.Dropdown
    tier: gr.Dropdown
    quay: gr.Dropdown
    ships: gr.Dropdown
    random_task: gr.Button
    catalog: gr.State  # None: this app's tasks; a list of ids: the tasks a remote server listed
    version: gr.State  # the tasks-status version this page shows
    timer: gr.Timer

    @property
    def inputs(self) -> list[Any]:
        """What every picker handler reads: the filters, the catalog and the current task."""
        return [self.split, self.tier, self.quay, self.ships, self.catalog, self.task]


def build_task_picker(ctx: AppContext, *, default: str | None, prefix: str = "", task_elem_id: str = "task",
                      label: str = "Task") -> TaskPicker:
    """The dropdown, then one row of filters and Random; elem ids `#<task_elem_id>`, `#<prefix>split`..."""
    status = tasks_status()
    choices = embedded_catalog()
    split = DEFAULT_SPLIT if any(c.split == DEFAULT_SPLIT for c in choices) else ALL
    shown = _filter(choices, split, ALL, ALL, ALL)
    value = default if any(c.task_id == default for c in shown) else (shown[0].task_id if shown else None)
    task = gr.Dropdown(_options(shown), value=value, label=label, allow_custom_value=True, elem_id=task_elem_id,
                       info=_info(status.text))
    # Compact: no labels (each value says what it filters), no boxes; one row on a laptop, two on a phone.
    compact = {"show_label": False, "container": False, "min_width": 80, "scale": 1}
    with gr.Row(elem_id=f"{prefix}task-filters", elem_classes=["task-filters"], equal_height=True):
        split_box = gr.Dropdown(_split_options(choices), value=split, label="Split", elem_id=f"{prefix}split",
                                **compact)
        tier = gr.Dropdown(_tier_options(), value=ALL, label="Tier", elem_id=f"{prefix}tier", **compact)
        quay = gr.Dropdown(_quay_options(choices), value=ALL, label="Quay", elem_id=f"{prefix}quay", **compact)
        ships = gr.Dropdown(_ship_options(), value=ALL, label="Ships", elem_id=f"{prefix}ships", **compact)
        random_task = gr.Button("🎲", size="sm", min_width=40, scale=0, elem_id=f"{prefix}random-task",
                                elem_classes=["random-task"])
    return TaskPicker(ctx, task, split_box, tier, quay, ships, random_task, gr.State(None), gr.State(status.version),
                      gr.Timer(FIRST_POLL_S, active=True))


def wire_task_picker(picker: TaskPicker) -> list[Any]:
    """Filters refilter, Random picks, the timer follows the tasks dataset; returns the events that change the
    task programmatically (chain the section's own "task picked" handler on them with `.then`)."""
    private = {"api_visibility": "private"}
    filters = [picker.split.input, picker.tier.input, picker.quay.input, picker.ships.input]
    refiltered = gr.on(filters, bind(refilter_tasks, picker), picker.inputs, [picker.task], **private)
    picked = picker.random_task.click(bind(pick_random_task, picker), picker.inputs, [picker.task], **private)
    refreshed = picker.timer.tick(bind(follow_tasks, picker), [picker.version, *picker.inputs],
                                  [picker.task, picker.split, picker.quay, picker.version, picker.timer],
                                  show_progress="hidden", **private)
    return [refiltered, picked, refreshed]


# -- handlers ----------------------------------------------------------------------------------------------------

def refilter_tasks(picker: TaskPicker, split: str, tier: str, quay: str, ships: str, catalog: list[str] | None,
                   current: str) -> dict:
    shown = _filter(_choices(picker, catalog), split, tier, quay, ships)
    return {picker.task: gr.Dropdown(choices=_options(shown), value=_keep(current, shown))}


def pick_random_task(picker: TaskPicker, split: str, tier: str, quay: str, ships: str, catalog: list[str] | None,
                     current: str) -> dict:
    choice = random_choice(_filter(_choices(picker, catalog), split, tier, quay, ships))
    return {picker.task: gr.Dropdown(value=choice.task_id)} if choice else unchanged(picker.task)


def follow_tasks(picker: TaskPicker, version: int, split: str, tier: str, quay: str, ships: str,
                 catalog: list[str] | None, current: str) -> dict:
    """A timer tick: when the served tasks changed since the page drew them, redraw the picker; the timer stops
    once the tasks dataset is no longer loading."""
    status = tasks_status()
    timer = gr.Timer(POLL_S, active=status.state == "loading")
    if status.version == version:
        return {picker.timer: timer}
    out: dict = {picker.version: status.version, picker.timer: timer}
    if catalog is not None:  # the page shows a remote server's tasks: only the note changes
        return {**out, picker.task: gr.Dropdown(info=_info(status.text))}
    # Values are sent only when they must change: a person may be picking while the tick is on its way.
    choices = embedded_catalog()
    kept_split = split if split == ALL or any(c.split == split for c in choices) else ALL
    shown = _filter(choices, kept_split, tier, quay, ships)
    value = _keep(current, shown)
    return {**out, picker.split: _update(split, kept_split, choices=_split_options(choices)),
            picker.quay: gr.Dropdown(choices=_quay_options(choices)),
            picker.task: _update(current, value, choices=_options(shown), info=_info(status.text))}


def _update(old: str | None, new: str | None, **changes: Any) -> gr.Dropdown:
    """A dropdown update that carries a value only when it differs from the one on the page."""
    return gr.Dropdown(**changes, **({"value": new} if new != old else {}))


def show_catalog(picker: TaskPicker, listed: list[TaskChoice] | None, note: str | None = None) -> dict:
    """The picker over another server's tasks (`listed`), or back over this app's (None); filters kept as they are
    but for the split, which goes to "all" (another server's splits may differ)."""
    choices = embedded_catalog() if listed is None else listed
    if listed is not None:
        picker.ctx.remember_tasks(listed)
    return {picker.catalog: None if listed is None else [c.task_id for c in listed],
            picker.split: gr.Dropdown(choices=_split_options(choices), value=ALL),
            picker.task: gr.Dropdown(choices=_options(choices), value=choices[0].task_id if choices else None,
                                     info=_info(note or tasks_status().text))}


# -- helpers -----------------------------------------------------------------------------------------------------

def _choices(picker: TaskPicker, catalog: list[str] | None) -> list[TaskChoice]:
    return embedded_catalog() if catalog is None else picker.ctx.choices_for(catalog)


def _filter(choices: list[TaskChoice], split: str, tier: str, quay: str, ships: str) -> list[TaskChoice]:
    def given(value: str) -> str | None:
        return None if not value or value == ALL else value

    return filter_choices(choices, split=given(split), tier=given(tier), quay=given(quay), ships=given(ships))


def _options(choices: list[TaskChoice]) -> list[tuple[str, str]]:
    return [(c.label, c.task_id) for c in choices]


def _keep(current: str | None, shown: list[TaskChoice]) -> str | None:
    return current if any(c.task_id == current for c in shown) else (shown[0].task_id if shown else None)


def _quay_options(choices: list[TaskChoice]) -> list[tuple[str, str]]:
    return [("all quays", ALL), *((f"quay {q}", q) for q in sorted({c.quay for c in choices if c.quay}))]


def _tier_options() -> list[tuple[str, str]]:
    return [("all tiers", ALL), *((tier, tier) for tier in TIERS)]


def _ship_options() -> list[tuple[str, str]]:
    return [("ships: any", ALL), *((f"{band} ships", band) for band in SHIP_BANDS)]


def _split_options(choices: list[TaskChoice]) -> list[tuple[str, str]]:
    counts: dict[str, int] = {}
    for c in choices:
        counts[c.split] = counts.get(c.split, 0) + 1
    ordered = sorted(counts, key=lambda s: (s != DEFAULT_SPLIT, s))
    return [(f"{s} · {counts[s]:,}", s) for s in ordered] + [(f"all · {len(choices):,}", ALL)]


def _info(text: str) -> str:
    return f"{text} · {SEARCH_HINT}"
