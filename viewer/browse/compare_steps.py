"""Compare by step: two rollouts of one task lined up by draft number (draft k of A beside draft k of B, one
slider for both), and the per-ship gap of each final plan side by side. Pure: records in, what to draw and say out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from berth_env.gap import GapSplit
from rollouts.record import Draft, Record
from viewer.gap_view import final_gap
from viewer.markdown import escape_cell
from viewer.share.page import optimal_cost
from viewer.share.steps import draft_words


def shown_step(a: Record, b: Record, step: int) -> int:
    """The draft number both sides show: `step` within the longer rollout's drafts, else the longer one's last."""
    most = max(len(a.drafts), len(b.drafts))
    return step if 0 < step <= most else most


def side_draft(view: Record, k: int) -> Draft | None:
    """Draft k of one side, or its last when it sent fewer (None: it sent none)."""
    if not view.drafts:
        return None
    return view.drafts[min(k, len(view.drafts)) - 1]


def side_title(side: str, view: Record, draft: Draft | None, k: int) -> str:
    """`A: model · draft 2 of 3` (or `its last, draft 2 of 2` when it sent fewer than k)."""
    if draft is None:
        return f"{side}: {view.model} · no plan sent"
    which = f"draft {draft.index} of {len(view.drafts)}" + (" (its last)" if draft.index < k else "")
    return f"{side}: {view.model} · {which}"


def step_lines(a: Record, b: Record, k: int, task: Mapping[str, Any] | None) -> str:
    """Each side's draft k, what the server said of it (cost, violations), as two Markdown lines."""
    lines = [f"**Draft {k}** of {max(len(a.drafts), len(b.drafts))}, side by side:"]
    for side, view in (("A", a), ("B", b)):
        draft = side_draft(view, k)
        words = draft_words(view, draft, optimal_cost(view, task)) if draft is not None else "no plan sent"
        last = f" (its last is draft {draft.index})" if draft is not None and draft.index < k else ""
        lines.append(f"- **{side}**{last}: {escape_cell(words)}")
    return "\n".join(lines)


def gap_side_by_side(a: Record, b: Record, task: Mapping[str, Any] | None) -> str:
    """The per-ship gap of each final plan in one table: a row per ship either side pays for, most first."""
    splits = final_gap(a, task), final_gap(b, task)
    if splits[0] is None and splits[1] is None:
        return ""
    heads = [_headline(side, s) for side, s in zip("AB", splits, strict=True)]
    rows: dict[int, list[Any]] = {}
    for i, split in enumerate(splits):
        for ship in (split.ships if split is not None and split.feasible else []):
            rows.setdefault(ship.ship, [ship.name, None, None])[i + 1] = ship.difference
    lines = ["### The final plans' gaps, ship by ship", "", *heads]
    if rows:
        lines += ["", "| ship | A: cost beyond the optimum | B: cost beyond the optimum |", "|---|---:|---:|"]
        ordered = sorted(rows.items(), key=lambda kv: -max(v or 0 for v in kv[1][1:]))
        lines += [f"| {ship} {escape_cell(v[0])} | {_diff(v[1])} | {_diff(v[2])} |" for ship, v in ordered[:12]]
    return "\n".join(lines)


def _headline(side: str, split: GapSplit | None) -> str:
    if split is None:
        return f"- **{side}**: no plan to split."
    if not split.feasible:
        broken = "; ".join(f"ship {ship}: {', '.join(texts)}" for ship, texts in list(split.broken.items())[:3])
        return f"- **{side}**: {split.headline()} ({escape_cell(broken)})"
    return f"- **{side}**: {split.headline()}"


def _diff(value: int | None) -> str:
    return "·" if value is None else f"{value:+d}"
