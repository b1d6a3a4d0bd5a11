"""The leaderboard as text: the Markdown table of every figure (`python -m agent board --wide`, a run's board.md),
the compact table a 100-column terminal shows (`python -m agent board`), the JSON objects (`--json` and Browse's
API), all made from rollouts.board.FIGURES (read at call time), so a figure shows the same way in each; and the
notes under the board on small samples (rollouts.sample_size's words), which Browse shows too."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable
from typing import Any

from rollouts import board as boards
from rollouts.board import Figure
from rollouts.board_trust import VERIFIED, VERIFIED_NOTE
from rollouts.prices import price_table
from rollouts.sample_size import (
    PROVISIONAL,
    TOO_SMALL,
    board_rank_note,
    interval_note,
    provisional_note,
    ranked,
)
from rollouts.schema import TIERS

# The compact board: who, how many, how well (with its interval), per tier, how often feasible. Its widest line is
# a model name, shortened in the middle to fit TERMINAL_COLUMNS; every figure is in `--wide` and `--json`.
COMPACT = ("n", "mean_reward", *(f"mean_{tier}" for tier in TIERS), "feasible_pct")
COMPACT_HEADERS = {"mean_reward": "mean (95% CI)"}
TERMINAL_COLUMNS = 100
GAP = "  "
PASS_K_NAMED = 8  # the models lacking some pass^k the note names; the JSON's pass{k}_tasks has every one


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _fixed(digits: int) -> Callable[[Any], str]:
    return lambda value: "-" if _missing(value) else f"{value:.{digits}f}"


def _pct(value: Any) -> str:
    return "-" if _missing(value) else f"{value:.0f}%"


def _usd(value: Any) -> str:
    if _missing(value):
        return "-"
    return f"${value:.4f}" if value < 0.1 else f"${value:.2f}"


SHOWN: dict[str, Callable[[Any], str]] = {"int": lambda v: "-" if _missing(v) else str(int(v)), "0": _fixed(0),
                                          "1": _fixed(1), "3": _fixed(3), "%": _pct, "$": _usd,
                                          "text": lambda v: "-" if _missing(v) else str(v)}


def carried(lines: list[dict]) -> list[Figure]:
    """The figures these lines carry: every aggregate, and the arena's where the lines were joined to ratings (a
    run's board.md is not)."""
    return [f for f in boards.FIGURES if f.sql is not None or (lines and all(f.name in line for line in lines))]


def figure_cell(figure: Figure, line: dict) -> str:
    """One figure of one model as text: its value, then its interval in brackets, or why it has none (a plain
    "-" when the figure itself is unknown)."""
    show = SHOWN[figure.shown]
    value = line[figure.name]
    if figure.interval is None or _missing(value):
        return show(value)
    low, high = (line[name] for name in figure.interval)
    if _missing(low) or _missing(high):  # a value with no interval: too few episodes to draw one from
        return f"{show(value)} ({TOO_SMALL})"
    return f"{show(value)} ({show(low)}-{show(high)})"


def board_markdown(lines: list[dict]) -> str:
    """The board as a Markdown table of every figure, one row per model; `price_note` says where the dollars
    come from."""
    figures = [f for f in carried(lines) if f.header is not None]
    rows = ["| model | " + " | ".join(str(f.header) for f in figures) + " |",
            "|---|" + "---:|" * len(figures)]
    rows += [f"| {line['model']} | " + " | ".join(figure_cell(f, line) for f in figures) + " |" for line in lines]
    return "\n".join(rows) + "\n"


def board_document(lines: list[dict]) -> str:
    """The board as a run's board.md holds it (and `python -m agent board --wide` prints it): every figure, then
    the notes on small samples and the prices."""
    arena = ["arena: a Bradley–Terry rating from every task two models both played, with a 95% interval over "
             "resamples of the tasks; `python -m agent ratings` says why a model has none"] \
        if any(f.name in boards.ARENA_FIELDS for f in carried(lines)) else []
    notes = "".join(f"{note}.\n" for note in [*board_notes(lines), *arena])
    return board_markdown(lines) + "\n" + notes + price_note()


def board_compact(lines: list[dict], width: int = TERMINAL_COLUMNS) -> str:
    """The board's COMPACT figures as a plain table aligned in columns, no line wider than `width` (a longer
    model name is shortened in the middle)."""
    figures = [f for name in COMPACT for f in boards.FIGURES if f.name == name]
    columns = [[COMPACT_HEADERS.get(f.name, f.header), *(figure_cell(f, line) for line in lines)] for f in figures]
    widths = [max(len(cell) for cell in column) for column in columns]
    room = width - sum(widths) - len(GAP) * len(widths)
    names = [_shortened(str(line["model"]), max(room, 12)) for line in lines]
    first = max([len("model"), *(len(name) for name in names)])
    out = [GAP.join(["model".ljust(first), *(c[0].rjust(w) for c, w in zip(columns, widths, strict=True))]),
           GAP.join(["-" * first, *("-" * w for w in widths)])]
    for k, name in enumerate(names):
        out.append(GAP.join([name.ljust(first), *(c[k + 1].rjust(w) for c, w in zip(columns, widths, strict=True))]))
    return "\n".join(line.rstrip() for line in out) + "\n"


def board_terminal(lines: list[dict], wide: str = "--wide") -> str:
    """What a terminal shows at the end of a board command, a run or a sweep: the compact table, then its notes
    wrapped to TERMINAL_COLUMNS, then where every figure is (`wide`: a flag, or board.md's path)."""
    notes = [*board_notes(lines, pass_k=False),
             f"every figure (tokens, checks, dollars, pass^k and the intervals of each): {wide}"]
    return board_compact(lines) + "\n" + "".join(
        textwrap.fill(f"{note}.", TERMINAL_COLUMNS, subsequent_indent="  ", break_on_hyphens=False,
                      break_long_words=False) + "\n"  # a path or a model name stays whole, to copy
        for note in notes)


def _shortened(name: str, room: int) -> str:
    if len(name) <= room:
        return name
    head = (room - 1) // 2
    return name[:head] + "…" + name[len(name) - (room - 1 - head):]


def board_notes(lines: list[dict], *, pass_k: bool = True) -> list[str]:
    """What the board's reader must know about its small samples: where an interval is missing for want of
    episodes, which models are listed last, unranked (rollouts.sample_size), and with `pass_k` what pass^k is and
    which models have too few tries for it."""
    notes = []
    if any(figure_cell(f, line).endswith(f"({TOO_SMALL})") for line in lines for f in carried(lines)):
        notes.append(interval_note())
    small = [str(line["model"]) for line in lines if not ranked(int(line["n"]))]
    if small:
        notes.append(board_rank_note(small, everyone=len(small) == len(lines)))
    if any(PROVISIONAL in str(line.get(boards.MARK) or "") for line in lines):
        notes.append(provisional_note())
    if any(VERIFIED in str(line.get(boards.MARK) or "") for line in lines):
        notes.append(VERIFIED_NOTE)
    return notes + [note for note in [pass_k_note(lines)] if note and pass_k]


def pass_k_note(lines: list[dict]) -> str | None:
    """How pass^k is made, and for each model lacking some k how many of its tasks have k tries (None when the
    lines carry no pass^k)."""
    counts = [f"pass{k}_tasks" for k in boards.PASS_K]
    if not lines or not all(name in line for line in lines for name in counts):
        return None
    short = [f"{line['model']}: {', '.join(str(int(_number(line[c]))) for c in counts)}" for line in lines
             if _number(line[counts[-1]]) == 0]
    ks = f"{boards.PASS_K[0]}–{boards.PASS_K[-1]}"
    named = "; ".join(short[:PASS_K_NAMED]) + (f"; and {len(short) - PASS_K_NAMED} more" if len(short) > PASS_K_NAMED
                                               else "")
    lacking = f"; blank where no task has k tries (tasks with at least k tries, k = {ks}: {named})" if short else ""
    return ("pass^k: the chance that all k tries of a task are feasible (≤10%: and within 10% of the optimum), "
            "C(c,k)/C(n,k) from a task's n tries of which c succeeded, averaged over the model's tasks with at least "
            f"k tries{lacking}")


def _number(value: Any) -> float:
    return 0.0 if _missing(value) else float(value)


def board_json(lines: list[dict]) -> list[dict]:
    """One plain object per model, the same for Browse's API and `python -m agent board --json`: every figure the
    lines carry under its name, then its interval's columns; unknown figures as null."""
    out = []
    for line in lines:
        item: dict[str, Any] = {"model": line["model"]}
        for figure in carried(lines):
            for name in (figure.name, *(figure.interval or ())):
                value = line[name]
                item[name] = None if _missing(value) else (
                    int(value) if figure.shown == "int" and name == figure.name else
                    str(value) if figure.shown == "text" else float(value))
        out.append(item)
    return out


def price_note() -> str:
    """One line under the board: which price table the dollars come from and how input tokens were priced."""
    return (f"$: {price_table()}; every input token (cached ones included) at the uncached input rate; "
            "no price for baselines, people, self-hosted (vllm:) or unlisted models.\n")
