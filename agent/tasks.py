"""The tasks a user can pick: from the embedded pack, or from a remote server's Task API.

A choice label carries what matters when choosing a hard planning task: tier, quay, ships and disruption types.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import httpx

TIER_ORDER = ("standard", "busy", "storm", "extreme")
PUBLIC_SERVER = "https://fineenvs-portsimenv.hf.space"
TASK_API_TIMEOUT_S = 10.0


class CatalogError(RuntimeError):
    """The task list could not be read from a server."""


@dataclass(frozen=True, slots=True)
class TaskChoice:
    task_id: str
    split: str
    difficulty: str
    quay: str
    ships: int
    disruptions: tuple[str, ...]

    @property
    def label(self) -> str:
        kinds = ", ".join(self.disruptions) or "no disruption"
        return f"{self.difficulty} · quay {self.quay} · {self.ships} ships · {kinds} — {self.task_id}"


def choice_of(task: dict) -> TaskChoice:
    kinds = tuple(dict.fromkeys(str(d.get("type", "?")) for d in task.get("disruptions") or []))
    return TaskChoice(task["task_id"], str(task.get("split", "")), str(task.get("difficulty", "")),
                      str(task.get("quay", "")), len(task.get("ships") or []), kinds)


def sort_choices(choices: list[TaskChoice]) -> list[TaskChoice]:
    """Grouped by tier (easiest first), then quay, then id."""
    rank = {tier: i for i, tier in enumerate(TIER_ORDER)}
    return sorted(choices, key=lambda c: (rank.get(c.difficulty, len(rank)), c.quay, c.task_id))


def embedded_catalog() -> list[TaskChoice]:
    from berth_env import load_pack

    return sort_choices([choice_of(task) for task in load_pack().tasks])


def remote_catalog(url: str, *, timeout_s: float = TASK_API_TIMEOUT_S) -> list[TaskChoice]:
    """Every task of every split a server's Task API lists (public views: no references)."""
    base = url.rstrip("/")
    try:
        with httpx.Client(timeout=timeout_s) as client:
            splits = client.get(f"{base}/berth_planning/splits")
            splits.raise_for_status()
            choices = []
            for split in splits.json():
                name = split["name"] if isinstance(split, dict) else str(split)
                listed = client.post(f"{base}/berth_planning/tasks", json={"split": name})
                listed.raise_for_status()
                choices += [choice_of(t) for t in listed.json().get("tasks", [])]
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        raise CatalogError(f"could not read the task list of {base}: {type(exc).__name__}: {exc}") from exc
    if not choices:
        raise CatalogError(f"{base} lists no tasks")
    return sort_choices(choices)


def filter_choices(choices: list[TaskChoice], *, tier: str | None = None, quay: str | None = None) -> list[TaskChoice]:
    return [c for c in choices if (not tier or c.difficulty == tier) and (not quay or c.quay == quay)]


def random_choice(choices: list[TaskChoice], rng: random.Random | None = None) -> TaskChoice | None:
    return (rng or random).choice(choices) if choices else None
