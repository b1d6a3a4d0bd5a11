"""The leaderboard as text: the Markdown table (`python -m agent board`, a run's board.md) and the JSON objects
(`--json`), both made from rollouts.board.FIGURES, so a figure shows the same way in both."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from rollouts.board import FIGURES
from rollouts.prices import price_table


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
                                          "1": _fixed(1), "3": _fixed(3), "%": _pct, "$": _usd}


def board_markdown(lines: list[dict]) -> str:
    """The board as a Markdown table, one row per model; `price_note` says where the dollars come from."""
    rows = ["| model | " + " | ".join(f.header for f in FIGURES) + " |",
            "|---|" + "---:|" * len(FIGURES)]
    for line in lines:
        cells = []
        for figure in FIGURES:
            show = SHOWN[figure.shown]
            cell = show(line[figure.name])
            if figure.interval is not None:
                low, high = figure.interval
                cell += f" ({show(line[low])}-{show(line[high])})"
            cells.append(cell)
        rows.append(f"| {line['model']} | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def board_json(lines: list[dict]) -> list[dict]:
    """One plain object per model with the figures' JSON keys; unknown figures as null."""
    out = []
    for line in lines:
        item: dict[str, Any] = {"model": line["model"]}
        for figure in FIGURES:
            if figure.json is None:
                continue
            names = [figure.name, *(figure.interval if figure.json_interval and figure.interval else ())]
            keys = [figure.json, *(figure.interval if figure.json_interval and figure.interval else ())]
            for key, name in zip(keys, names, strict=True):
                value = line[name]
                item[key] = None if _missing(value) else (int(value) if figure.shown == "int" and name == figure.name
                                                          else float(value))
        out.append(item)
    return out


def price_note() -> str:
    """One line under the board: which price table the dollars come from and how input tokens were priced."""
    return (f"$: {price_table()}; every input token (cached ones included) at the uncached input rate; "
            "no price for baselines, people, self-hosted (vllm:) or unlisted models.\n")
