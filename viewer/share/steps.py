"""A step of a rollout, addressed: `/r/<id>/step/<k>` (the k-th draft sent to check_plan or submit_plan) and
`/r/<id>/turn/<n>` (the n-th turn, shown at the last draft sent by then), what the share page says of it, and its
links.

Pure: a record read (rollouts.record) in, the step and its words out. A step that is not there is None, and the
routes answer it with the one 404 of a link that names no rollout (viewer/share/routes.py).
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from rollouts.record import Draft, Record
from viewer.chart.scene import clean

KINDS = ("step", "turn")


@dataclass(frozen=True)
class StepAt:
    """Where a step link points: `kind` "step" (a draft) or "turn", its `number`, the draft shown (None: a turn
    before any draft) and the turn highlighted in the transcript."""

    kind: str
    number: int
    draft: Draft | None
    turn: int | None

    @property
    def path(self) -> str:
        """The step's path after the rollout's page: `/step/2` or `/turn/4`."""
        return f"/{self.kind}/{self.number}"


def step_at(view: Record, kind: str, number: int) -> StepAt | None:
    """The step `kind`/`number` of a rollout, or None when it has none such."""
    if kind == "step":
        try:
            draft = view.draft(number)
        except IndexError:
            return None
        return StepAt(kind, number, draft, draft.turn)
    if kind == "turn":
        try:
            view.turn(number)
        except IndexError:
            return None
        sent = [d for d in view.drafts if d.turn is not None and d.turn <= number]
        return StepAt(kind, number, sent[-1] if sent else None, number)
    return None


def step_link(page: str, draft: Draft) -> str:
    """A draft's address, its turn's anchor after it (so a copied link lands on the turn in the transcript)."""
    return f"{page}/step/{draft.index}" + (f"#turn-{draft.turn}" if draft.turn is not None else "")


def turn_link(page: str, number: int) -> str:
    return f"{page}/turn/{number}#turn-{number}"


def draft_words(view: Record, draft: Draft, optimal_cost: int | None) -> str:
    """What a draft was and what the server said: `turn 4, check 3 of 10: 5 violations, cost 412 (optimum 87)`."""
    where = [f"turn {draft.turn}"] if draft.turn is not None else []
    if draft.tool == "submit_plan":
        where.append("submitted")
    elif draft.accepted:
        number = sum(1 for d in view.drafts[: draft.index] if d.accepted)
        left = draft.answer.get("checks_left")
        total = number + left if isinstance(left, int) and not isinstance(left, bool) else None
        where.append(f"check {number} of {total}" if total is not None else f"check {number}")
    else:
        where.append("check refused")
    return f"{', '.join(where)}: {_outcome(draft, optimal_cost)}"


def _outcome(draft: Draft, optimal_cost: int | None) -> str:
    error = draft.answer.get("error")
    if isinstance(error, str) and error:
        return f"not read ({clean(error, 80)})"
    optimum = f" (optimum {optimal_cost:,})" if optimal_cost is not None else ""
    cost = f"cost {draft.cost:,}{optimum}" if draft.cost is not None else ""
    if draft.feasible is False:
        count = draft.violation_count
        broken = f"{count} violation{'s' * (count != 1)}" if count else "infeasible"
        return ", ".join(w for w in (broken, cost) if w)
    if draft.feasible:
        return f"feasible, {cost}" if cost else "feasible"
    return cost or "no answer kept"


def drafts_nav(view: Record, page: str, optimal_cost: int | None, current: int | None) -> str:
    """Every draft as a plain link to its own page ("link to this step"), the one shown marked."""
    if not view.drafts:
        return ""
    items = []
    for draft in view.drafts:
        mark = ' class="current" aria-current="step"' if draft.index == current else ""
        words = html.escape(draft_words(view, draft, optimal_cost))
        items.append(f'<li{mark}><a href="{html.escape(step_link(page, draft))}" title="Link to this step">'
                     f"Draft {draft.index}</a> <span>{words}</span></li>")
    return (f'<details class="drafts"{" open" if current is not None or len(view.drafts) <= 12 else ""}>'
            f"<summary>Every draft ({len(view.drafts)}): each links to its own page</summary>"
            f'<ol>{"".join(items)}</ol></details>')


def step_banner(view: Record, at: StepAt, page: str, optimal_cost: int | None) -> str:
    """The head of a step's page: which step, what the server said, the steps either side and the whole rollout."""
    count = len(view.drafts)
    if at.draft is not None:
        said = f"Draft {at.draft.index} of {count} · {draft_words(view, at.draft, optimal_cost)}"
    else:
        said = f"Turn {at.number}: no plan sent yet"
    here = page + at.path
    moves = []
    if at.draft is not None and at.draft.index > 1:
        moves.append(f'<a href="{html.escape(step_link(page, view.draft(at.draft.index - 1)))}">← draft '
                     f"{at.draft.index - 1}</a>")
    if at.draft is not None and at.draft.index < count:
        moves.append(f'<a href="{html.escape(step_link(page, view.draft(at.draft.index + 1)))}">draft '
                     f"{at.draft.index + 1} →</a>")
    jump = f'<a href="#turn-{at.turn}">turn {at.turn} in the transcript</a>' if at.turn is not None else ""
    return (f'<section class="step"><p class="said"><strong>{html.escape(said)}</strong></p>'
            f'<p class="moves">{" · ".join(m for m in (*moves, jump) if m)} · '
            f'<a href="{html.escape(page)}">the whole rollout</a></p>'
            f'<p class="address">Link to this step: <a class="copy" href="{html.escape(here)}">'
            f"{html.escape(here)}</a></p><p class=\"note\">The grade and the gap beside it are the final plan's."
            "</p></section>")


def step_title(view: Record, at: StepAt) -> str:
    """`draft 2 of 5` for a draft's page, `turn 4` for a turn's (the draft it shows is in its description)."""
    if at.kind == "turn" or at.draft is None:
        return f"turn {at.number}"
    return f"draft {at.draft.index} of {len(view.drafts)}"


def step_tags(view: Record, at: StepAt, optimal_cost: int | None) -> str:
    """The og:description of a step."""
    if at.draft is None:
        return f"turn {at.number}: no plan sent yet"
    return draft_words(view, at.draft, optimal_cost)


def card_step(view: Record, at: StepAt) -> str:
    """The step as the card's line says it: `draft 2 of 5 · turn 4`."""
    if at.draft is None:
        return f"turn {at.number}: no plan yet"
    turn = f" · turn {at.turn}" if at.turn is not None else ""
    return f"draft {at.draft.index} of {len(view.drafts)}{turn}"

