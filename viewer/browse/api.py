"""Browse for scripts (`gradio_client`): one page of rollouts, the leaderboard, one record from any source.

Each function takes the app's context first (app.py binds it) and checks its own arguments. The filters are the
parameters rollouts.filters.FILTERS names, one each (lists comma-separated; submitted and feasible any/yes/no; dates
UTC days, inclusive; source local, hub or upstream; q searches ids, models, tasks, runs and transcripts): `with_filters`
gives the functions those parameters, so a new filter reaches the API by itself.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import gradio as gr
import pyarrow as pa

from rollouts import schema
from rollouts.archive import REMOTE_WAIT_S, RolloutNotFound
from rollouts.board_text import board_json
from rollouts.filters import FILTERS, PAGE_SIZE, SORTABLE, Filters
from rollouts.sources import SourceError
from viewer.browse.model_card import card_facts
from viewer.context import AppContext

MAX_PAGE_SIZE = 500
# A filter's parameter as a script sends it: text for choices, days and yes/no, a number for a bound.
_PARAMETER = {"at_least": (float | None, None), "at_most": (float | None, None), "yes_no": (str, "any")}


def with_filters(handler: Callable[..., Any]) -> Callable[..., Any]:
    """`handler(ctx, filters, **rest)` as a function whose parameters are ctx, one per filter (FILTERS order), then
    the handler's own after `filters`; the filter values reach the handler parsed, as one Filters."""
    own = list(inspect.signature(handler).parameters.values())
    first, rest = own[0], own[2:]
    params = []
    for f in FILTERS:
        kind, default = _PARAMETER.get(f.kind, (str, ""))
        params.append(inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                                        annotation=kind))
    names = [f.name for f in FILTERS]

    def call(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(ctx, *args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        filters = Filters.parse(**{name: values.pop(name) for name in names})
        values.pop(first.name)
        return handler(ctx, filters, **values)

    hints = inspect.get_annotations(handler, eval_str=True)
    signature = inspect.Signature([first, *params, *rest], return_annotation=hints.get("return", inspect.Signature.empty))
    call.__signature__ = signature  # type: ignore[attr-defined]
    call.__annotations__ = {**{p.name: p.annotation for p in params}, **{k: v for k, v in hints.items()
                                                                          if k != "filters"}}
    call.__name__, call.__doc__, call.__module__ = handler.__name__, handler.__doc__, handler.__module__
    return call


@with_filters
def browse_rollouts(ctx: AppContext, filters: Filters, sort: str = "started", descending: bool = True, page: int = 1,
                    page_size: int = PAGE_SIZE, refresh: bool = False) -> dict:
    """One page of rollouts (index rows) matching the filters. refresh: re-read the Hub sources first (waiting up
    to 15 s); `sources` says what each source gave or why not."""
    archive = ctx.archive
    if refresh:
        archive.refresh(remote=True, wait=REMOTE_WAIT_S)
    if sort not in SORTABLE:
        raise gr.Error(f"sort must be one of {', '.join(SORTABLE)}")
    size = min(max(_int(page_size, PAGE_SIZE), 1), MAX_PAGE_SIZE)
    rows, matched, page_used, pages = archive.query(filters, sort=sort, descending=bool(descending),
                                                    page=_int(page, 1), size=size)
    return {"total": matched, "page": page_used, "pages": pages, "page_size": size,
            "problems": list(filters.problems), "rows": _plain(_api_rows(rows)),
            "sources": [{"name": s.name, "label": s.label, "rows": s.rows, "error": s.error, "note": s.note,
                         "loading": s.loading, "skipped": s.skipped} for s in archive.statuses()]}


@with_filters
def browse_leaderboard(ctx: AppContext, filters: Filters, same_tasks: bool = False) -> list[dict]:
    """Per model over the filtered rollouts, every figure of rollouts.board.FIGURES under its name, as `python -m
    agent board --json` gives them: n, mean reward with its 95% bootstrap CI, mean per tier, feasible %,
    optimal %, pass^k for k = 1-4 (`pass{k}_feasible_pct`, `pass{k}_within10_pct`: all k tries of a task feasible,
    or within 10% of the optimum, averaged over the tasks with k tries, `pass{k}_tasks` of them; null without one),
    ended without submit, median tokens and seconds, the convergence and price figures, and the arena
    rating (`arena`, `arena_low`, `arena_high`, `arena_rank`: null without one; `arena_note`: why not, or a word on
    it; as `python -m agent ratings`).
    same_tasks: only tasks every model played (the arena rating always uses every task two models both played)."""
    return board_json(ctx.archive.board(filters, same_tasks=bool(same_tasks)))


@with_filters
def browse_model_card(ctx: AppContext, filters: Filters, card_of: str = "", same_tasks: bool = False) -> dict:
    """The reproducibility card of the model `card_of` (a model of the board; `model` is the filter, as on every
    Browse route) over the filtered rollouts, as `python -m agent board --card` prints it:
    `verified` (every eval task on the embedded or the official server, default limits and prompt, no harness
    error, records public), `failing` (each condition that fails, in words), `provisional` (why: fewer than 20
    tasks or 50 arena battles; null when not) and `card` (the Markdown: harness, prompt, server, reward, effort,
    limits, providers and fallbacks, dates, episodes, tasks, errors)."""
    if not isinstance(card_of, str) or not card_of.strip():
        raise gr.Error("card_of: name a model of the board, e.g. openai:gpt-5.5")
    return card_facts(ctx.archive, filters, card_of.strip(), same_tasks=bool(same_tasks))


def browse_record(ctx: AppContext, episode_id: str) -> dict:
    """The full record of one rollout from any source (this Space's folder, the Hub dataset, upstream)."""
    try:
        found = ctx.records.find(episode_id, running=False)
        view, row = found.record, found.row
    except (RolloutNotFound, SourceError) as exc:
        raise gr.Error(str(exc)) from None
    return {**view.data, "browse_source": row.get("source")}


def _api_rows(rows: pa.Table) -> list[dict]:
    """Index rows under the API's keys, the columns rollouts.schema.BROWSE_COLUMNS gives it (read at call time)."""
    named = {column: c.api_name(column) for column, c in schema.BROWSE_COLUMNS.items()}
    kept = [column for column, name in named.items() if name is not None]
    return rows.select(kept).rename_columns([named[column] for column in kept]).to_pylist()


def _plain(rows: list[dict]) -> list[dict]:
    """Rows as JSON can carry them: NaN (an unknown figure) as null."""
    return [{k: None if isinstance(v, float) and v != v else v for k, v in row.items()} for row in rows]


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default
