"""What Browse shows, as pure functions: the rollout list, the leaderboard, the heatmap, the source status, one
rollout's header line, and the ship-by-ship difference of two plans. Index rows (Arrow) and records in; pandas
frames, which gr.Dataframe draws (plain text cells: model text is never rendered as HTML), and Markdown out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa

from berth_env import PlanError, check, parse_plan
from rollouts import board as boards
from rollouts import schema
from rollouts.archive import SourceStatus
from rollouts.board import Figure, Heatmap
from rollouts.ratings import Rating, ratings_notes
from rollouts.record import Record
from rollouts.sample_size import TOO_SMALL
from viewer.markdown import escape_cell, fmt_num

SOURCE_ICONS = {"local": "📁", "hub": "🤗", "upstream": "📦"}


def list_columns() -> dict[str, str]:
    """The list's compact columns (column -> header), from rollouts.schema.BROWSE_COLUMNS (read at call time)."""
    return {name: c.header for name, c in schema.BROWSE_COLUMNS.items() if c.place == "list"}


def more_columns() -> dict[str, str]:
    """The columns the list offers on demand ("More columns"), column -> header."""
    return {name: c.header for name, c in schema.BROWSE_COLUMNS.items() if c.place == "more"}


def list_widths() -> list[str]:
    return [schema.BROWSE_COLUMNS[name].width for name in list_columns()]


@dataclass(frozen=True)
class BoardColumn:
    """One column of the leaderboard as shown, made from a figure of rollouts.board.FIGURES: its header, the
    board line's column (a pair is an interval, shown as text), its digits (None for text) and width."""

    header: str
    column: str | tuple[str, str]
    digits: int | None
    width: str
    figure: Figure | None = None


def board_columns() -> list[BoardColumn]:
    """The leaderboard's columns, from the figures (read at call time): each figure Browse shows, then its
    interval's own column if it has one. Numbers stay numbers, so the table's own header menu sorts them."""
    out = [BoardColumn("model", "model", None, "280px")]
    for f in boards.FIGURES:
        if f.page is None:
            continue
        out.append(BoardColumn(f.page_header, f.name, f.page_digits, f.width, f))
        if f.page_interval is not None and f.interval is not None:
            out.append(BoardColumn(f.page_interval[0], f.interval, f.page_digits, f.page_interval[1], f))
    return out


def board_layout() -> tuple[list[str], list[str], list[str]]:
    """The board's headers, Gradio datatypes and column widths."""
    shown = board_columns()
    return ([c.header for c in shown], ["str" if c.digits is None or isinstance(c.column, tuple) else "number"
                                        for c in shown], [c.width for c in shown])


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _fixed(value: Any, digits: int = 3) -> str:
    return "–" if _missing(value) else f"{float(value):.{digits}f}"


def _count(value: Any) -> str:
    if (isinstance(value, float) and value.is_integer()) or (isinstance(value, int) and not isinstance(value, bool)):
        return f"{int(value):,}"
    return str(value)


# How the list writes a known cell, by a column's `cell` (rollouts.schema.BrowseColumn); an unknown one is blank.
CELLS: dict[str, Callable[[Any], str]] = {
    "text": str, "count": _count, "3": lambda v: f"{float(v):.3f}", "1": lambda v: f"{float(v):.1f}",
    "when": lambda v: str(v).replace("T", " ").removesuffix("Z")[:16], "yes_no": lambda v: "✓" if v else "✗",
    "blank_if_none": lambda v: f"{int(v)}" if v else "",  # so the rows that have some stand out
}


def list_table(rows: pa.Table, extra: list[str] | tuple[str, ...] = ()) -> pd.DataFrame:
    """A page of index rows as the list shows them: the compact columns, then any extra ones asked for."""
    more = more_columns()
    columns = {**list_columns(), **{c: more[c] for c in extra if c in more}}
    return pd.DataFrame({header: [_cell(column, v) for v in rows.column(column).to_pylist()]
                         for column, header in columns.items()}, columns=list(columns.values()))


def _cell(column: str, value: Any) -> str:
    return "" if _missing(value) else CELLS[schema.BROWSE_COLUMNS[column].cell](value)


def board_table(lines: list[dict]) -> pd.DataFrame:
    """The leaderboard (rollouts.board's lines) as the page shows it: a blank where a figure does not apply."""
    shown = board_columns()
    out = []
    for row in lines:
        cells: list[Any] = []
        for c in shown:
            if isinstance(c.column, tuple):
                low, high = (row.get(name) for name in c.column)
                # A figure with no interval says why: too few episodes (rollouts.sample_size), or the figure's own
                # word when it is unknown (a model without an arena rating: the notes below say why).
                known = c.figure is not None and not _missing(row.get(c.figure.name))
                cells.append((TOO_SMALL if known else c.figure.unknown if c.figure else "")
                             if _missing(low) or _missing(high) else f"{_fixed(low, c.digits or 0)}–"
                                                                     f"{_fixed(high, c.digits or 0)}")
            elif c.digits is None:
                cells.append(str(row[c.column]))
            else:
                value = row.get(c.column)
                cells.append(None if _missing(value) else round(float(value), c.digits or None))
        out.append(cells)
    return pd.DataFrame(out, columns=[c.header for c in shown])


def arena_note(rated: list[Rating], tally: dict[str, dict[str, int]]) -> str:
    """Under the board: how the arena column is made, which models it cannot rate and why, and the visitors' votes
    beside it (never in it)."""
    parts = ["**arena**: a Bradley–Terry rating from every task two models both played (the higher mean reward "
             "on the task wins, equal means tie), with a 95% interval over 100 resamples of the tasks."]
    parts += [f"{escape_cell(note)}." for note in ratings_notes(rated)]  # the CLI's `ratings` prints the same
    if tally:
        votes = " · ".join(f"{escape_cell(model)}: {t['for']} for, {t['against']} against, {t['tie']} tie, "
                           f"{t['both_bad']} both bad ({t['matches']} matches)"
                           for model, t in sorted(tally.items(), key=lambda item: -item[1]["matches"]))
        parts.append(f"Votes in arena matches (every match of this Space, shown beside the rating, never in it): "
                     f"{votes}.")
    return "  \n".join(parts)


def heatmap_table(heatmap: Heatmap) -> Any:
    """Tasks (grouped by tier) down, models across, mean reward in each cell, coloured from red (0) to green (1).

    A pandas Styler: gr.Dataframe draws its colours, and a click on a cell says which (task, model) it was.
    """
    frame = pd.DataFrame(
        [[tier, task, *[("" if m is None else f"{m:.2f}") for m in means]]
         for (tier, task), means in zip(heatmap.tasks, heatmap.mean, strict=True)],
        columns=["tier", "task", *heatmap.models])
    colours = pd.DataFrame("", index=frame.index, columns=frame.columns)
    for i, means in enumerate(heatmap.mean):
        for j, mean in enumerate(means):
            if mean is not None:
                colours.iat[i, j + 2] = f"background-color: {_reward_colour(mean)}"
    return frame.style.apply(lambda _: colours, axis=None)


def _reward_colour(reward: float) -> str:
    """Red at 0, amber at 0.5, green at 1 (light enough for dark text)."""
    reward = min(1.0, max(0.0, reward))
    red = (244, 199, 195)
    amber = (252, 232, 178)
    green = (183, 225, 205)
    low, high, f = (red, amber, reward * 2) if reward < 0.5 else (amber, green, (reward - 0.5) * 2)
    r, g, b = (round(a + (c - a) * f) for a, c in zip(low, high, strict=True))
    return f"rgb({r}, {g}, {b})"


def status_markdown(statuses: list[SourceStatus], *, shown: int, total: int) -> str:
    """How many rollouts match, and one short line per source: its rows, or why it could not be read."""
    parts = [f"**{shown:,}** of {total:,} rollouts"]
    for status in statuses:
        icon = SOURCE_ICONS.get(status.name, "•")
        label = escape_cell(status.label)
        if status.loading and not status.loaded_at:
            text = f"{icon} {label}: loading…"
        elif status.error and not status.loaded_at:
            text = f"{icon} {label}: ⚠️ {escape_cell(status.error)}"
        else:
            text = f"{icon} {label}: {status.rows:,}"
            if status.error:
                text += f" (⚠️ {escape_cell(status.error)})"
            if status.note:
                text += f" · {escape_cell(status.note)}"
            if status.skipped:
                text += (f" · ⚠️ {status.skipped:,} index line{'s' * (status.skipped != 1)} skipped (unreadable, "
                         "or not pointing at its record in the store)")
        parts.append(text)
    return " · ".join(parts[:1]) + "  \n" + "  \n".join(parts[1:])


def detail_header(rollout: Record | Mapping[str, Any], row: Mapping[str, Any]) -> str:
    """One line: model, task, tier, reward, end reason and when; then where the rollout comes from."""
    view = Record.of(rollout)
    tier = view.task.get("difficulty")
    started = (view.started_stamp or str(row.get("started") or "")).replace("T", " ").removesuffix("Z")[:16]
    bits = [f"**{escape_cell(view.model or '?')}** on **{escape_cell(view.task_id or '?')}**",
            f"tier {escape_cell(tier)}" if tier else "",
            f"reward **{fmt_num(view.reward)}**", f"ended: {escape_cell(view.end_reason or '?')}",
            f"{escape_cell(started)} UTC" if started else ""]
    origin = [f"rollout `{escape_cell(view.episode_id)}`", f"from {escape_cell(row.get('source') or '?')}"]
    if view.run:
        origin.append(f"run {escape_cell(view.run)}")
    return " · ".join(b for b in bits if b) + "  \n" + " · ".join(origin)


def page_title(rollout: Record | Mapping[str, Any]) -> str:
    """The browser tab's title for an open rollout (plain text: the page sets it as text, never as HTML)."""
    view = Record.of(rollout)
    return f"{(view.model or '?')[:80]} on {(view.task_id or '?')[:80]} · Berth arena"


# -- two plans of one task ---------------------------------------------------------------------------------------

def plan_diff(task: Mapping[str, Any], plan_a: Any, plan_b: Any) -> pd.DataFrame:
    """One row per ship placed differently by A and B: section, berth hour, cranes and the rules each breaks."""
    entries, problems = [], []
    for plan in (plan_a, plan_b):
        try:
            parsed = parse_plan(task, plan) if plan is not None else None
        except PlanError:
            parsed = None
        entries.append(dict(parsed.entries) if parsed else {})
        result = check(task, parsed.entries) if parsed else None
        problems.append({s: [text for _, text in sr.problems] for s, sr in (result.ships.items() if result else [])})
    a, b = entries
    names = {s["id"]: str(s.get("name", "")) for s in task.get("ships") or []}
    rows = []
    for ship in sorted(a.keys() | b.keys()):
        if a.get(ship) == b.get(ship) and problems[0].get(ship) == problems[1].get(ship):
            continue
        ea, eb = a.get(ship), b.get(ship)
        rows.append({"ship": f"{ship} {names.get(ship, '')}".strip(),
                     "section A": _part(ea, 1), "section B": _part(eb, 1),
                     "berth hour A": _part(ea, 0), "berth hour B": _part(eb, 0),
                     "cranes A": _part(ea, 2), "cranes B": _part(eb, 2),
                     "broken in A": "; ".join(problems[0].get(ship, [])) or "–",
                     "broken in B": "; ".join(problems[1].get(ship, [])) or "–"})
    columns = ["ship", "section A", "section B", "berth hour A", "berth hour B", "cranes A", "cranes B",
               "broken in A", "broken in B"]
    return pd.DataFrame(rows, columns=columns)


def _part(entry: tuple | None, index: int) -> str:
    if entry is None:
        return "not planned"
    value = entry[index]
    return "–" if value is None else str(value)


def compare_header(a: Record | Mapping[str, Any], b: Record | Mapping[str, Any], differing: int) -> str:
    """The two grades side by side and their difference."""
    view_a, view_b = Record.of(a), Record.of(b)
    reward_a, reward_b = view_a.reward, view_b.reward
    cost_a, cost_b = view_a.cost, view_b.cost
    costs = f" · cost {fmt_num(cost_a)} vs {fmt_num(cost_b)}" if cost_a is not None or cost_b is not None else ""
    return (f"**A** {escape_cell(view_a.model)} · reward **{fmt_num(reward_a)}**  \n"
            f"**B** {escape_cell(view_b.model)} · reward **{fmt_num(reward_b)}**  \n"
            f"A − B: reward **{reward_a - reward_b:+.4f}**{costs} · {differing} ships placed differently "
            f"on {escape_cell(view_a.task_id)}")
