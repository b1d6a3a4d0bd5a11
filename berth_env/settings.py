"""The environment variables the berth server reads, in one place: berth_env stands alone (it imports nothing else
of the project), so it keeps its own few beside rollouts.settings, which every other layer reads through. Each is
read when asked for, never cached at import.

- BERTH_TASKS_DIR (`:`-separated folders, default none): more task packs to serve after the bundled one.
- BERTH_MAX_CHECKS (int >= 1, default server.DEFAULT_MAX_CHECKS): `check_plan` calls an episode may make.
- BERTH_MAX_TOOL_CALLS (int >= 1, default server.DEFAULT_MAX_TOOL_CALLS): tool calls an episode may make.
- MAX_CONCURRENT_ENVS (int >= 1, default server.DEFAULT_MAX_CONCURRENT_ENVS): OpenEnv sessions at once.
"""

from __future__ import annotations

import os

TASKS_DIR_VAR = "BERTH_TASKS_DIR"


def tasks_dirs() -> str:
    """BERTH_TASKS_DIR as set (`:`-separated), or ""."""
    return os.environ.get(TASKS_DIR_VAR, "")


def add_tasks_dirs(dirs: list[str]) -> None:
    """Serve `dirs` too, after those BERTH_TASKS_DIR names already (`python -m berth_env --tasks-dir`): set in this
    process's environment, as the pack loader reads it on its first load."""
    os.environ[TASKS_DIR_VAR] = ":".join([d for d in tasks_dirs().split(":") if d] + list(dirs))


def env_int(name: str, default: int) -> int:
    """A whole number of 1 or more from `name`, `default` when unset or blank; ValueError naming it otherwise."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {raw!r}") from None
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return value
