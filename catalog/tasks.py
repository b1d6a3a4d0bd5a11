"""The tasks a user can pick (from the embedded pack, or a remote server's Task API), and the full task for an id.

The embedded catalog is whatever the in-process server serves: the bundled eval tasks, plus every checked task of
the tasks dataset once it has loaded (catalog/task_dataset.py). A choice label carries what matters when choosing a
hard planning task: tier, quay, ships and disruption types; the filters narrow 1,100 tasks by split, tier, quay and
ship count.
"""

from __future__ import annotations

import difflib
import random
import threading
from collections import OrderedDict
from dataclasses import dataclass

from agent.limits import valid_task_id
from agent.netguard import ServerPolicy
from berth_env import TIERS, Pack, load_pack
from catalog.task_api import TIMEOUT_S, TaskAPI, TaskAPIError, TaskTooLarge

PUBLIC_SERVER = "https://fineenvs-portsimenv.hf.space"
REMOTE_TASKS_KEPT = 256
MAX_SPLITS, MAX_REMOTE_TASKS = 20, 5000  # dock-v1 has 4 splits and 1,100 tasks
# Ship-count bands for the picker's filter (dock-v1 tasks have 14 to 59 ships): label -> (fewest, most).
SHIP_BANDS = {"≤ 20": (0, 20), "21–30": (21, 30), "31–40": (31, 40), "41+": (41, 10_000)}


class CatalogError(TaskAPIError):
    """The task list could not be read from a server."""


@dataclass(frozen=True, slots=True)
class TaskChoice:
    task_id: str
    split: str
    difficulty: str
    quay: str
    ships: int
    disruptions: tuple[str, ...]
    optimal_cost: int | None = None  # from the reference: known for the embedded tasks only
    naive_cost: int | None = None

    @property
    def label(self) -> str:
        kinds = ", ".join(self.disruptions) or "no disruption"
        return f"{self.task_id} · {self.ships} ships · {kinds}"


def choice_of(task: dict) -> TaskChoice:
    kinds = tuple(dict.fromkeys(str(d.get("type", "?")) for d in task.get("disruptions") or []))
    reference = task.get("reference") or {}
    return TaskChoice(task["task_id"], str(task.get("split", "")), str(task.get("difficulty", "")),
                      str(task.get("quay", "")), len(task.get("ships") or []), kinds,
                      reference.get("optimal_cost"), reference.get("naive_cost"))


def sort_choices(choices: list[TaskChoice]) -> list[TaskChoice]:
    """Grouped by tier (easiest first), then quay, then id."""
    rank = {tier: i for i, tier in enumerate(TIERS)}
    return sorted(choices, key=lambda c: (rank.get(c.difficulty, len(rank)), c.quay, c.task_id))


_catalog: tuple[Pack | None, list[TaskChoice]] = (None, [])


def embedded_catalog() -> list[TaskChoice]:
    """Every task the embedded server serves, sorted (built once per pack: the picker asks on every filter)."""
    global _catalog
    pack = load_pack()
    built_for, choices = _catalog
    if built_for is not pack:
        choices = sort_choices([choice_of(task) for task in pack.tasks])
        _catalog = (pack, choices)
    return list(choices)


def remote_catalog(url: str, *, timeout_s: float = TIMEOUT_S, policy: ServerPolicy | None = None) -> list[TaskChoice]:
    """Every task of every split a server's Task API lists (public views: no references); `policy` guards a server
    a visitor chose (agent/netguard.py)."""
    try:
        with TaskAPI(url, timeout_s=timeout_s, policy=policy) as api:
            # A server may be anyone's: only well-formed task ids, and a bounded number of them.
            choices = [choice_of(task) for split in api.splits()[:MAX_SPLITS] for task in api.tasks(split)
                       if valid_task_id(task.get("task_id"))][:MAX_REMOTE_TASKS]
            base = api.base
    except TaskAPIError as exc:
        raise CatalogError(str(exc)) from exc
    if not choices:
        raise CatalogError(f"{base} lists no tasks")
    return sort_choices(choices)


_REMOTE_TASKS: OrderedDict[tuple[str, str], dict] = OrderedDict()
_REMOTE_LOCK = threading.Lock()


def task_for(task_id: str, server_url: str | None = None, policy: ServerPolicy | None = None) -> dict | None:
    """The full task for an id: the embedded pack's (reference plans included), else the public task the server at
    `server_url` shows; None when neither has it or the server can't be reached. A task the server has but that
    is too large (its answer over the size bound, or too many ships to draw or grade) is `TaskTooLarge`, so that
    the form says so instead of "not one this server offers".

    Only tasks found are kept (the newest few hundred remote ones): a server that failed once is asked again.
    """
    try:
        return load_pack().get(task_id)
    except KeyError:
        pass
    if not server_url or not valid_task_id(task_id):
        return None
    key = (server_url, task_id)
    with _REMOTE_LOCK:
        if key in _REMOTE_TASKS:
            _REMOTE_TASKS.move_to_end(key)
            return _REMOTE_TASKS[key]
    try:
        with TaskAPI(server_url, policy=policy) as api:
            task = api.task(task_id)
    except TaskTooLarge:
        raise
    except (TaskAPIError, ValueError):  # ValueError: a URL the policy refused
        return None
    if task is not None:
        with _REMOTE_LOCK:
            _REMOTE_TASKS[key] = task
            while len(_REMOTE_TASKS) > REMOTE_TASKS_KEPT:
                _REMOTE_TASKS.popitem(last=False)
    return task


def closest_tasks(task_id: str, n: int = 3) -> list[str]:
    """The embedded catalog's ids nearest to a mistyped one, nearest first; else its first few (easiest tier first),
    so an error always names some ids that are offered, never all 1,100."""
    ids = [c.task_id for c in embedded_catalog()]
    return difflib.get_close_matches(str(task_id), ids, n=n, cutoff=0.5) or ids[:n]


def filter_choices(choices: list[TaskChoice], *, tier: str | None = None, quay: str | None = None,
                   split: str | None = None, ships: str | None = None) -> list[TaskChoice]:
    """The choices matching every filter given; `ships` is a key of SHIP_BANDS."""
    fewest, most = SHIP_BANDS.get(ships or "", (0, 10_000))
    return [c for c in choices if (not tier or c.difficulty == tier) and (not quay or c.quay == quay)
            and (not split or c.split == split) and fewest <= c.ships <= most]


def random_choice(choices: list[TaskChoice], rng: random.Random | None = None) -> TaskChoice | None:
    return (rng or random).choice(choices) if choices else None
