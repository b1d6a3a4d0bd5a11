"""What Browse shows, as pure functions: the rollout list, the leaderboard, the heatmap, the source status, one
rollout's header line, and the ship-by-ship difference of two plans. Index rows (Arrow) and records in; pandas
frames, which gr.Dataframe draws (plain text cells: model text is never rendered as HTML), and Markdown out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd
import pyarrow as pa

from berth_env import PlanError, check, parse_plan
from rollouts.archive import SourceStatus
from rollouts.board import Heatmap
from rollouts.ratings import Rating, ratings_notes
from rollouts.sample_size import TOO_SMALL
from rollouts.schema import TIERS
from viewer.markdown import escape_cell, fmt_num

SOURCE_ICONS = {"local": "📁", "hub": "🤗", "upstream": "📦"}
# The list's columns: a compact set first, more on demand. Column -> (header, formatter key).
LIST_COLUMNS = {
    "model": "model", "task_id": "task", "difficulty": "tier", "reward": "reward", "end_reason": "ended",
    "started": "when",
}
MORE_COLUMNS = {
    "episode_id": "id", "quay": "quay", "num_ships": "ships", "feasible": "feasible", "cost": "cost",
    "optimal_cost": "optimum", "turns": "turns", "checks": "checks", "tokens": "tokens", "seconds": "seconds",
    "run": "run", "source": "source",
}
# The leaderboard as shown: (header, column of the board's lines, digits; None for text). A pair of columns is an
# interval, shown as text ("n too small" for a mean of one episode). Numbers stay numbers, so the table's own header
# menu sorts them by value. The arena columns come from rollouts.ratings, joined to the board's lines by
# `with_ratings`.
BOARD_COLUMNS = [("model", "model", None), ("n", "n", 0), ("mean reward", "mean_reward", 3),
                 ("95% CI", ("ci_low", "ci_high"), 3), ("arena", "arena", 0),
                 ("arena 95% CI", ("arena_low", "arena_high"), 0), ("arena rank", "arena_rank", 0),
                 *[(tier, f"mean_{tier}", 3) for tier in TIERS],
                 ("beat naive %", "beat_naive_pct", 0), ("feasible %", "feasible_pct", 0),
                 ("optimal %", "optimal_pct", 0), ("no submit", "no_submit", 0),
                 ("checks to feasible", "median_checks_to_feasible", 1), ("output tokens", "mean_output_tokens", 0),
                 ("$ / episode", "usd_per_episode", 4), ("reward / $", "reward_per_usd", 1),
                 ("median s", "median_seconds", 0)]
BOARD_HEADERS = [header for header, _, _ in BOARD_COLUMNS]
BOARD_TYPES = ["str" if digits is None or isinstance(column, tuple) else "number"
               for _, column, digits in BOARD_COLUMNS]
ARENA_COLUMNS = {"arena": "rating", "arena_low": "ci_low", "arena_high": "ci_high", "arena_rank": "rank",
                 "arena_note": "note"}
UNRATED = "unrated"  # in the arena interval's place; the notes under the board say why


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _fixed(value: Any, digits: int = 3) -> str:
    return "–" if _missing(value) else f"{float(value):.{digits}f}"


def _cell(column: str, value: Any) -> str:
    if _missing(value):
        return ""
    if column == "reward":
        return f"{float(value):.3f}"
    if column == "started":
        return str(value).replace("T", " ").removesuffix("Z")[:16]
    if column == "feasible":
        return "✓" if value else "✗"
    if column == "seconds":
        return f"{float(value):.1f}"
    if (isinstance(value, float) and value.is_integer()) or (isinstance(value, int) and not isinstance(value, bool)):
        return f"{int(value):,}"
    return str(value)


def list_table(rows: pa.Table, extra: list[str] | tuple[str, ...] = ()) -> pd.DataFrame:
    """A page of index rows as the list shows them: the compact columns, then any extra ones asked for."""
    columns = {**LIST_COLUMNS, **{c: MORE_COLUMNS[c] for c in extra if c in MORE_COLUMNS}}
    return pd.DataFrame({header: [_cell(column, v) for v in rows.column(column).to_pylist()]
                         for column, header in columns.items()}, columns=list(columns.values()))


def board_table(lines: list[dict]) -> pd.DataFrame:
    """The leaderboard (rollouts.board's lines) as the page shows it: a blank where a figure does not apply."""
    out = []
    for row in lines:
        cells = []
        for _, column, digits in BOARD_COLUMNS:
            if isinstance(column, tuple):
                low, high = (row.get(c) for c in column)
                # The mean of one episode has no interval (rollouts.sample_size); a missing rating is said below.
                small = column == ("ci_low", "ci_high") and not _missing(row.get("mean_reward"))
                unrated = column == ("arena_low", "arena_high") and _missing(row.get("arena"))
                cells.append((TOO_SMALL if small else UNRATED if unrated else "") if _missing(low) or _missing(high)
                             else f"{_fixed(low, digits)}–{_fixed(high, digits)}")
            elif digits is None:
                cells.append(str(row[column]))
            else:
                value = row.get(column)
                cells.append(None if _missing(value) else round(float(value), digits or None))
        out.append(cells)
    return pd.DataFrame(out, columns=BOARD_HEADERS)


def with_ratings(lines: list[dict], rated: list[Rating]) -> list[dict]:
    """The board's lines with each model's arena rating (ARENA_COLUMNS; None where it has none)."""
    by_model = {r.model: r for r in rated}
    return [{**line, **{column: getattr(by_model[line["model"]], field) if line["model"] in by_model else None
                        for column, field in ARENA_COLUMNS.items()}} for line in lines]


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


def detail_header(record: Mapping[str, Any], row: Mapping[str, Any]) -> str:
    """One line: model, task, tier, reward, end reason and when; then where the rollout comes from."""
    task = record.get("task") if isinstance(record.get("task"), Mapping) else {}
    started = str(record.get("started") or row.get("started") or "").replace("T", " ").removesuffix("Z")[:16]
    bits = [f"**{escape_cell(record.get('model') or '?')}** on **{escape_cell(record.get('task_id') or '?')}**",
            f"tier {escape_cell(task.get('difficulty'))}" if task.get("difficulty") else "",
            f"reward **{fmt_num(record.get('reward'))}**", f"ended: {escape_cell(record.get('end_reason') or '?')}",
            f"{escape_cell(started)} UTC" if started else ""]
    origin = [f"rollout `{escape_cell(record.get('episode_id'))}`", f"from {escape_cell(row.get('source') or '?')}"]
    if record.get("run"):
        origin.append(f"run {escape_cell(record.get('run'))}")
    return " · ".join(b for b in bits if b) + "  \n" + " · ".join(origin)


def page_title(record: Mapping[str, Any]) -> str:
    """The browser tab's title for an open rollout (plain text: the page sets it as text, never as HTML)."""
    return f"{str(record.get('model') or '?')[:80]} on {str(record.get('task_id') or '?')[:80]} · Berth arena"


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


def compare_header(a: Mapping[str, Any], b: Mapping[str, Any], differing: int) -> str:
    """The two grades side by side and their difference."""
    reward_a, reward_b = float(a.get("reward") or 0.0), float(b.get("reward") or 0.0)
    cost_a, cost_b = _cost(a), _cost(b)
    costs = f" · cost {fmt_num(cost_a)} vs {fmt_num(cost_b)}" if cost_a is not None or cost_b is not None else ""
    return (f"**A** {escape_cell(a.get('model'))} · reward **{fmt_num(reward_a)}**  \n"
            f"**B** {escape_cell(b.get('model'))} · reward **{fmt_num(reward_b)}**  \n"
            f"A − B: reward **{reward_a - reward_b:+.4f}**{costs} · {differing} ships placed differently "
            f"on {escape_cell(a.get('task_id'))}")


def _cost(record: Mapping[str, Any]) -> int | None:
    final = record.get("final") if isinstance(record.get("final"), Mapping) else {}
    grade = final.get("grade") if isinstance(final.get("grade"), Mapping) else {}
    cost = grade.get("cost")
    return cost if isinstance(cost, int) else None
