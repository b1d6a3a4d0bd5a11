"""Whether a model's numbers on the board can be trusted: its reproducibility card and its marks.

The card says how every episode of the model was played, from index rows alone (one query over the board's rows,
`trust_sql`; the index carries `app_version`, `max_turns`, `max_tokens`, `provider_switches` for it,
rollouts.schema.played_under): the harness's versions, the servers, the limits, the effort and the providers (read
from the model's spec), the fallbacks taken, the dates, the episodes, the tasks covered, the errors.

A model is **verified** (tau-bench's badge: trajectories public, prompts unmodified, no task left out) when every
condition of `verdict` holds against the `Standard` the app plays by: every eval task played, every episode on the
embedded or the official server, under the default turn and token limits, by this harness (whose prompt is the
server's own instructions: no door lets a visitor change it, so a known harness version is an unmodified prompt),
with no harness error, and every record public (on the Hub, not only in a local folder). The card names each
condition that fails. **Provisional** is rollouts.sample_size's: too few tasks or arena battles.

The Standard's values are the agent's and the catalog's (the default limits, the official server, the eval
pack); rollouts cannot import them, so the caller passes it (catalog.standard.default_standard).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from berth_env import GRADER_VERSION
from rollouts.sample_size import PROVISIONAL, provisional_why

if TYPE_CHECKING:
    from rollouts.index.engine import IndexEngine

VERIFIED = "verified"
VERIFIED_NOTE = ("verified: every eval task played on the embedded or the official server, under the default limits "
                 "and prompt, with no harness error, every record public; a model's card says which condition fails")
HARNESS_ERROR = "(errors > 0 OR end_reason IN ('error', 'interrupted'))"


@dataclass(frozen=True)
class Standard:
    """What a verified model's every episode was played under."""

    servers: tuple[str, ...]      # env_url values: "embedded" and the official server's URL
    max_turns: int
    max_tokens: int
    eval_tasks: tuple[str, ...]   # every task of the eval split


@dataclass(frozen=True)
class Trust:
    """One model's card, from its index rows."""

    model: str
    episodes: int
    tasks: int
    eval_covered: int
    first: str | None
    last: str | None
    harness: list[str]
    harness_unknown: int
    servers: list[str]
    off_server: int
    turn_limits: list[int]
    token_limits: list[int]
    off_limits: int
    switched: int
    switches: int
    errored: int
    error_rows: int
    private: int
    battles: int | None = None   # arena battles (None: not counted)

    @property
    def provisional(self) -> str | None:
        return provisional_why(self.tasks, self.battles)


# Trust's fields from its index rows, each an aggregate over a model's rows (`trust_columns`): those the marks need
# (VERDICT), then those only the card shows, which are lists and cost a board a third more at a million rows, so the
# board's own query leaves them out (bench/frontier_bench.py).
AGGREGATES = {
    "episodes": "count(*)", "tasks": "count(DISTINCT task_id)",
    "eval_covered": "count(DISTINCT task_id) FILTER (WHERE list_contains(?, task_id))",
    "harness_unknown": "count(*) FILTER (WHERE app_version IS NULL)",
    "off_server": "count(*) FILTER (WHERE env_url IS NULL OR NOT list_contains(?, env_url))",
    "off_limits": "count(*) FILTER (WHERE max_turns IS DISTINCT FROM ? OR max_tokens IS DISTINCT FROM ?)",
    "errored": f"count(*) FILTER (WHERE {HARNESS_ERROR})", "private": "count(*) FILTER (WHERE source = 'local')",
    "first": "left(min(started)::VARCHAR, 10)", "last": "left(max(started)::VARCHAR, 10)",
    "harness": "list(DISTINCT app_version ORDER BY app_version) FILTER (WHERE app_version IS NOT NULL)",
    "servers": "list(DISTINCT coalesce(env_url, 'unknown') ORDER BY coalesce(env_url, 'unknown'))",
    "turn_limits": "list(DISTINCT max_turns ORDER BY max_turns) FILTER (WHERE max_turns IS NOT NULL)",
    "token_limits": "list(DISTINCT max_tokens ORDER BY max_tokens) FILTER (WHERE max_tokens IS NOT NULL)",
    "switched": "count(*) FILTER (WHERE provider_switches > 0)", "switches": "coalesce(sum(provider_switches), 0)",
    "error_rows": "coalesce(sum(errors), 0)",
}
VERDICT = ("episodes", "tasks", "eval_covered", "harness_unknown", "off_server", "off_limits", "errored", "private")
_CARD_ONLY = {"first": None, "last": None, "harness": [], "servers": [], "turn_limits": [], "token_limits": [],
              "switched": 0, "switches": 0, "error_rows": 0}


def trust_columns(standard: Standard, *, card: bool = True) -> tuple[str, list[Any]]:
    """The aggregates over a model's rows (`t_<field>`) and their parameters, in the order they appear: every
    field for the card, or (`card=False`) the VERDICT fields the marks need, as a part of the board's own query."""
    fields = list(AGGREGATES) if card else list(VERDICT)
    values = {"eval_covered": [list(standard.eval_tasks)], "off_server": [list(standard.servers)],
              "off_limits": [standard.max_turns, standard.max_tokens]}
    sql = ", ".join(f"{AGGREGATES[field]} AS t_{field}" for field in fields)
    return sql, [value for field in fields for value in values.get(field, [])]


def trust_sql(head: str, standard: Standard) -> tuple[str, list[Any]]:
    """One query over the board's rows `m` (`head`, rollouts.board's WITH clause): one line of Trust per model."""
    columns, params = trust_columns(standard)
    return f"{head} SELECT model, {columns} FROM m GROUP BY model", params


def trust_of(stat: dict[str, Any], battles: dict[str, int] | None = None) -> Trust:
    """A model's Trust from a line of `trust_columns`' aggregates (its `model` and `t_<field>`s; the card's own
    fields empty when the line has only the verdict's)."""
    model = str(stat["model"])
    facts = {field: stat.get(f"t_{field}", _CARD_ONLY.get(field)) for field in AGGREGATES}
    return Trust(model=model, **facts, battles=None if battles is None else battles.get(model, 0))


def trust(engine: IndexEngine, head: str, params: Sequence[Any], standard: Standard,
          battles: dict[str, int] | None = None) -> dict[str, Trust]:
    """Each model's Trust over the board's rows (`head` and its `params`), with its arena battles if counted."""
    sql, extra = trust_sql(head, standard)
    with engine.lock:
        answer = engine.sql(sql, [*params, *extra])
        names = [d[0] for d in answer.description]
        stats = [dict(zip(names, row, strict=True)) for row in answer.fetchall()]
    return {str(stat["model"]): trust_of(stat, battles) for stat in stats}


def verdict(facts: Trust, standard: Standard) -> list[str]:
    """The conditions of `verified` that fail, in words (empty: verified)."""
    failing = []
    missing = len(standard.eval_tasks) - facts.eval_covered
    if missing > 0:
        failing.append(f"not every eval task played: {facts.eval_covered} of {len(standard.eval_tasks)}")
    if facts.off_server:
        failing.append(f"{facts.off_server} episode(s) on another server than "
                       + " or ".join(f"`{s}`" for s in standard.servers))
    if facts.off_limits:
        failing.append(f"{facts.off_limits} episode(s) not under the default limits ({standard.max_turns} turns, "
                       f"{standard.max_tokens:,} tokens a turn) or with limits not recorded")
    if facts.harness_unknown:
        failing.append(f"{facts.harness_unknown} episode(s) with no harness version recorded (played elsewhere: "
                       "its prompt cannot be told unmodified)")
    if facts.errored:
        failing.append(f"{facts.errored} episode(s) with a harness error (a provider or transport error, or ended "
                       "by an error or an interruption)")
    if facts.private:
        failing.append(f"{facts.private} record(s) not public (only in this local folder, not on the Hub)")
    return failing


def marks(facts: Trust, standard: Standard | None) -> str:
    """The board's `mark` for a model: "verified", "provisional", both, or "" (the card says why)."""
    words = [VERIFIED] if standard is not None and not verdict(facts, standard) else []
    return ", ".join([*words, *([PROVISIONAL] if facts.provisional else [])])


def spec_parts(model: str) -> tuple[str, str, list[str]]:
    """(provider, effort, routes) of a model spec: `hf:org/m:a|b` -> ("hf", "default", ["a", "b"]);
    `openai:gpt-x@low` -> ("openai", "low", [])."""
    provider, _, rest = model.partition(":")
    rest, _, effort = rest.partition("@")
    routes = rest.split(":", 1)[1].split("|") if provider == "hf" and ":" in rest else []
    return provider if rest else "", effort or "default", [r for r in routes if r]


def card_markdown(facts: Trust, standard: Standard, *, line: dict | None = None) -> str:
    """The reproducibility card of one model as Markdown (its model name left to the caller to escape: only
    index values and our own words are written here, each value in code spans)."""
    provider, effort, routes = spec_parts(facts.model)
    failing = verdict(facts, standard)
    head = ("✅ **verified**: every eval task, on the standard server, limits and prompt, no harness error, "
            "records public" if not failing else "**not verified**:\n" + "".join(f"- {w}\n" for w in failing))
    why = facts.provisional
    rows = [
        ("harness", _listed(facts.harness) + (f" ({facts.harness_unknown} unrecorded)" if facts.harness_unknown
                                              else "")),
        ("prompt", "the server's instructions, unmodified (the harness has no way to change them)"
         if not facts.harness_unknown else "unknown for episodes not played by this harness"),
        ("env server", _listed(facts.servers)),
        ("reward", f"the server's grade of the submitted plan (the embedded server's grader: version {GRADER_VERSION})"),
        ("effort", f"`{effort}`"),
        ("turn limit", _listed(facts.turn_limits)), ("token limit per turn", _listed(facts.token_limits)),
        ("provider", f"`{provider or facts.model}`" + (f", routes {_listed(routes)}" if routes else "")),
        ("fallbacks taken", f"{facts.switches} in {facts.switched} episode(s)" if facts.switches else "none"),
        ("dates", f"{facts.first} to {facts.last}" if facts.first != facts.last else str(facts.first)),
        ("episodes", str(facts.episodes)),
        ("tasks", f"{facts.tasks} ({facts.eval_covered} of the {len(standard.eval_tasks)} eval tasks)"),
        ("arena battles", "not counted" if facts.battles is None else str(facts.battles)),
        ("errors", f"{facts.error_rows} recorded in {facts.errored} episode(s)" if facts.errored else "none"),
        ("records", "public" if not facts.private else f"{facts.private} only in the local folder"),
    ]
    table = "| | how its episodes were played |\n|---|---|\n" + "".join(f"| {k} | {v} |\n" for k, v in rows)
    mark = f"\n**{PROVISIONAL}**: {why}.\n" if why else ""
    return f"{head}\n{mark}\n{table}"


def _listed(values: Sequence[Any]) -> str:
    return ", ".join(f"`{_plain(v)}`" for v in values) if values else "not recorded"


def _plain(value: Any) -> str:
    """A value for a code span: no backtick or pipe to break out of it or the table."""
    return str(value).replace("`", "'").replace("|", "/").replace("\n", " ")[:120]
