"""Browse for scripts (`gradio_client`): one page of rollouts, the leaderboard, one record from any source.

Each function takes the Browse section first (app.py binds it) and checks its own arguments.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gradio as gr

from rollouts.index import REMOTE_WAIT_S, RolloutNotFound, records_of
from rollouts.query import PAGE_SIZE, SORTABLE, Filters
from rollouts.sources import SourceError

if TYPE_CHECKING:
    from viewer.browse_section import BrowseSection

API_COLUMNS = ["episode_id", "started", "model", "model_name", "task_id", "difficulty", "quay", "num_ships", "reward",
               "submitted", "feasible", "cost", "optimal_cost", "naive_cost", "turns", "checks", "seconds",
               "input_tokens", "output_tokens", "end_reason", "errors", "run", "played_in", "source"]
MAX_PAGE_SIZE = 500


def browse_rollouts(section: BrowseSection, model: str = "", task: str = "", tier: str = "", quay: str = "",
                    reward_min: float | None = None, reward_max: float | None = None, submitted: str = "any",
                    feasible: str = "any", date_from: str = "", date_to: str = "", source: str = "",
                    sort: str = "started", descending: bool = True, page: int = 1, page_size: int = PAGE_SIZE,
                    refresh: bool = False, q: str = "") -> dict:
    """One page of rollouts (index rows) matching the filters. Lists are comma-separated; submitted and feasible
    are any/yes/no; dates are UTC days (YYYY-MM-DD, inclusive); source is local, hub or upstream; q searches ids,
    models, tasks, runs and transcripts. refresh: re-read the Hub sources first (waiting up to 15 s); `sources`
    says what each source gave or why not."""
    index = section.index
    if refresh:
        index.refresh(remote=True, wait=REMOTE_WAIT_S)
    filters = _filters(model, task, tier, quay, reward_min, reward_max, submitted, feasible, date_from, date_to,
                       source, q)
    if sort not in SORTABLE:
        raise gr.Error(f"sort must be one of {', '.join(SORTABLE)}")
    size = min(max(_int(page_size, PAGE_SIZE), 1), MAX_PAGE_SIZE)
    rows, matched, page_used, pages = index.query(filters, sort=sort, descending=bool(descending),
                                                  page=_int(page, 1), size=size)
    return {"total": matched, "page": page_used, "pages": pages, "page_size": size,
            "problems": list(filters.problems), "rows": records_of(rows, API_COLUMNS),
            "sources": [{"name": s.name, "label": s.label, "rows": s.rows, "error": s.error, "note": s.note,
                         "loading": s.loading, "skipped": s.skipped} for s in index.statuses()]}


def browse_leaderboard(section: BrowseSection, model: str = "", task: str = "", tier: str = "", quay: str = "",
                       reward_min: float | None = None, reward_max: float | None = None, submitted: str = "any",
                       feasible: str = "any", date_from: str = "", date_to: str = "", source: str = "",
                       same_tasks: bool = False, q: str = "") -> list[dict]:
    """Per model over the filtered rollouts: n, mean reward with its 95% bootstrap CI, mean per tier, feasible %,
    optimal %, ended without submit, median tokens and seconds. same_tasks: only tasks every model played."""
    filters = _filters(model, task, tier, quay, reward_min, reward_max, submitted, feasible, date_from, date_to,
                       source, q)
    board = section.index.board(filters, same_tasks=bool(same_tasks))
    return records_of(board, list(board.columns))


def browse_record(section: BrowseSection, episode_id: str) -> dict:
    """The full record of one rollout from any source (this Space's folder, the Hub dataset, upstream)."""
    try:
        record, row = section.records.get(episode_id)
    except (RolloutNotFound, SourceError) as exc:
        raise gr.Error(str(exc)) from None
    return {**record, "browse_source": row.get("source")}


def _filters(model: Any, task: Any, tier: Any, quay: Any, reward_min: Any, reward_max: Any, submitted: Any,
             feasible: Any, date_from: Any, date_to: Any, source: Any, q: Any) -> Filters:
    return Filters.parse(models=model, tasks=task, tiers=tier, quays=quay, reward_min=reward_min,
                         reward_max=reward_max, submitted=submitted, feasible=feasible, date_from=date_from,
                         date_to=date_to, sources=source, search=q)


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default
