"""The standard a verified model is played under (rollouts.board_trust.Standard), made from where each of its
values is decided: the default limits (agent.limits), the official server (catalog.tasks.PUBLIC_SERVER) and the
embedded server's name, the eval split of the bundled pack. The board's callers (the CLI's `board`, the app's
archive) set it on their archive."""

from __future__ import annotations

from functools import cache

from agent.limits import DEFAULT_MAX_TOKENS, DEFAULT_MAX_TURNS
from berth_env import load_pack
from catalog.tasks import PUBLIC_SERVER
from rollouts.board_trust import Standard

EMBEDDED = "embedded"  # a record's env_url when played on the server in this process


@cache
def default_standard() -> Standard:
    eval_tasks = tuple(sorted(task["task_id"] for task in load_pack().split("eval")))
    return Standard(servers=(EMBEDDED, PUBLIC_SERVER), max_turns=DEFAULT_MAX_TURNS, max_tokens=DEFAULT_MAX_TOKENS,
                    eval_tasks=eval_tasks)
