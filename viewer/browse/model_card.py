"""A model's reproducibility card on Browse and in its API: rollouts.board_trust's card over the board's rows,
against the standard the app's archive holds (catalog.standard), its model name escaped as untrusted text."""

from __future__ import annotations

from typing import Any

from rollouts.archive import Archive
from rollouts.board_trust import card_markdown, verdict
from rollouts.filters import Filters
from viewer.markdown import escape_cell


def card_facts(archive: Archive, filters: Filters, model: str, *, same_tasks: bool = False) -> dict[str, Any]:
    """{model, verified, failing (each condition that fails, in words), provisional (why, or None), card
    (Markdown)}; a model not on the board gets `card` saying so and `verified` False."""
    facts = archive.trust(filters, same_tasks=same_tasks).get(model)
    if facts is None or archive.standard is None:
        return {"model": model, "verified": False, "failing": ["not on the board these filters give"],
                "provisional": None, "card": f"No model {escape_cell(model)} on the board these filters give."}
    failing = verdict(facts, archive.standard)
    return {"model": model, "verified": not failing, "failing": failing, "provisional": facts.provisional,
            "card": f"#### {escape_cell(model)}\n\n{card_markdown(facts, archive.standard)}"}


def model_card(archive: Archive, filters: Filters, model: str, *, same_tasks: bool = False) -> str:
    return str(card_facts(archive, filters, model, same_tasks=same_tasks)["card"])
