"""The read side of Browse in whichever checkout is first on the path, for benches that time this code beside an
older one (`--baseline`): before issue 19 it was `rollouts.index.BrowseIndex` with `rollouts.query.Filters`, whose
filter names were plural; now it is `rollouts.archive.Archive` with `rollouts.filters.Filters`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

OLD_NAMES = {"model": "models", "task": "tasks", "tier": "tiers", "quay": "quays", "source": "sources",
             "q": "search"}


def archive_class() -> Any:
    """The read side's class (imported now, so a timing that follows leaves the imports out)."""
    try:
        from rollouts.archive import Archive
    except ImportError:
        from rollouts.index import BrowseIndex as Archive
    return Archive


def open_archive(folder: Path) -> Any:
    """The read side over a rollout folder, not refreshed yet."""
    return archive_class().from_settings(folder)


def filters(**values: Any) -> Any:
    """Filters by today's names, in the checkout's own form."""
    try:
        from rollouts.filters import Filters
    except ImportError:
        from rollouts.query import Filters

        values = {OLD_NAMES.get(name, name): value for name, value in values.items()}
    return Filters.parse(**values)


def rows_of(answer: Any) -> int:
    """How many rows a page or a frame holds (Arrow now, pandas before)."""
    return answer.num_rows if hasattr(answer, "num_rows") else len(answer)
