"""What an episode cost in US dollars, from its token usage, priced by the `genai-prices` library's bundled table.

The table ships inside the package (`genai_prices.data`), so pricing works offline and never fetches anything; the
library's opt-in updater is not used. A price is only as good as what the record keeps:

- Which price: the list price that applied when the episode was played (its `started` time; now, for a record
  without one, such as upstream's published rows).
- Which provider: the spec's price group (`PRICE_GROUPS`, declared by its provider class): `anthropic:<model>` and
  `openai:<model>` at those providers; `hf:<org/model>:<provider>` at the
  Hugging Face router's provider of that name (genai-prices' `huggingface_<provider>` tables). An `hf:` episode that
  switched providers mid-way is priced only when every provider that served it charges the same; otherwise it is
  unknown. `hf:` without a provider (the router chose one), `vllm:` (self-hosted), baselines and humans have no
  price, and neither has a model the table does not know: null, never a guess.
- Cached input: records count cached input tokens inside `input_tokens` without saying how many were cached, so
  all input is priced at the uncached input rate (an upper bound for cache reads, a lower one for cache writes). A
  usage that does say (`cache_read_tokens`, `cache_write_tokens`, per turn or per episode) is priced at those rates.
- Long-prompt tiers apply per request: where the record keeps each turn's usage (assistant messages' `usage`) a
  tiered model is priced turn by turn; where it keeps only the episode's totals, each turn is taken to be the
  episode's average turn. Untiered prices are linear, so the totals give the same dollars as the turns.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from rollouts.model_spec import spec_parts

log = logging.getLogger(__name__)

LIBRARY = "genai-prices"
# The price groups: for each, the genai-prices provider whose list prices it pays, `{route}` standing for each
# provider of the route list a spec names after its model (`hf:org/model:together|novita`). A provider class says
# which group it is in (its `price_group`, agent/providers/base.py), never rollouts.
PRICE_GROUPS = {"anthropic": "anthropic", "openai": "openai", "hf": "huggingface_{route}"}
# spec prefix -> price group (None: unpriced), as the providers declare them: agent.providers.registry hands them
# over (`use_price_groups`). A prefix not handed over (a process that never loads the providers, such as
# `python -m rollouts fill-index`) is priced by the group of its own name, the name every built-in provider's
# group has (tests/agent/test_provider_registry.py checks that).
_SPEC_GROUPS: dict[str, str | None] = {}
_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def price_table() -> str:
    """The table the prices come from, for the board's note: `genai-prices 0.2.3 (bundled table)`."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{LIBRARY} {version(LIBRARY)} (bundled table, list prices on each episode's start date)"
    except PackageNotFoundError:
        return f"{LIBRARY} not installed: no prices"


def use_price_groups(groups: Mapping[str, str | None]) -> None:
    """Price specs of each prefix by its group (None: no price), as its provider declares; ValueError naming a
    group that PRICE_GROUPS does not hold."""
    unknown = sorted({group for group in groups.values() if group is not None and group not in PRICE_GROUPS})
    if unknown:
        raise ValueError(f"unknown price group(s) {', '.join(unknown)}: one of {', '.join(PRICE_GROUPS)}")
    _SPEC_GROUPS.update(groups)


def price_group(prefix: str) -> str | None:
    """The price group of specs starting `prefix:`, or None when they have no price."""
    group = _SPEC_GROUPS.get(prefix, prefix)
    return group if group in PRICE_GROUPS else None


def served_by(model: Any, switches: Any = ()) -> list[tuple[str, str]] | None:
    """(genai-prices provider id, model ref) for each provider that served an episode of `model`, in order; None
    when the spec names no priced provider (baselines, humans, `vllm:`, an `hf:` spec without a provider)."""
    if not isinstance(model, str):
        return None
    parts = spec_parts(model)
    group = price_group(parts.provider or "")
    if group is None:
        return None
    at, name = PRICE_GROUPS[group], parts.model
    if "{route}" not in at:
        return [(at, name)] if name else None
    chain = [route.strip() for route in (parts.routes or "").split("|") if route.strip()]
    if not name or not chain:
        return None
    # Each switch moves the rest of the episode to the next provider of the route list.
    used = 1 + (len(switches) if isinstance(switches, list) else 0)
    return [(at.format(route=route), name) for route in chain[:used]]


def episode_usd(record: dict) -> float | None:
    """The episode's price in US dollars (module docstring), or None when it has none or cannot be known."""
    providers = served_by(record.get("model"), record.get("provider_switches") or [])
    usage = record.get("usage")
    if not providers or not isinstance(usage, dict):
        return None
    totals = {key: _count(usage.get(key)) for key in _KEYS}
    turns = _turn_usages(record, totals)
    when = _when(record.get("started"))
    prices = {_price(provider, name, totals, turns, when) for provider, name in providers}
    if len(prices) != 1:
        return None  # providers that disagree (or one without a price): which share each served is not kept
    price = prices.pop()
    return None if price is None else float(price)


def _turn_usages(record: dict, totals: dict) -> list[dict]:
    """Each turn's usage where the record keeps it, else the episode's average turn, once per turn."""
    assistants = [m for m in record.get("messages") or [] if isinstance(m, dict) and m.get("role") == "assistant"]
    per_turn = [m.get("usage") for m in assistants]
    if per_turn and all(isinstance(u, dict) for u in per_turn):
        return [{key: _count(u.get(key)) for key in _KEYS} for u in per_turn]
    turns = record.get("turns")
    turns = turns if isinstance(turns, int) and not isinstance(turns, bool) and turns > 0 else 1
    return [{key: value / turns for key, value in totals.items()}] * turns


def _price(provider: str, name: str, totals: dict, turns: list[dict], when: datetime | None) -> Decimal | None:
    model = _model(provider, name)
    if model is None:
        return None
    from genai_prices import Usage
    from genai_prices.types import TieredPrices

    model_price = model.get_prices(when or datetime.now(UTC))
    # Untiered prices are linear: one call on the totals gives the same dollars as one call per turn.
    tiered = any(isinstance(value, TieredPrices) for value in vars(model_price).values())
    try:
        return sum((model_price.calc_price(Usage(**_usage(part)))["total_price"]
                    for part in (turns if tiered else [totals])), Decimal(0))
    except (ArithmeticError, ValueError, TypeError, KeyError) as exc:
        log.warning("cannot price %s at %s: %s", name, provider, exc)
        return None


@functools.cache
def _model(provider: str, name: str) -> Any:
    """The library's model entry for (provider, model), or None when it does not know one."""
    try:
        from genai_prices.data_snapshot import get_snapshot
    except ImportError:
        return None
    try:
        return get_snapshot().find_provider_model(name, None, provider, None)[1]
    except LookupError:
        return None


def _usage(part: dict) -> dict:
    """Token counts as the library takes them: cache counts only when there are any (they are part of input)."""
    return {key: value for key, value in part.items() if value or key in ("input_tokens", "output_tokens")}


def _count(value: Any) -> int | float:
    """A token count: a non-negative finite number (ints stay ints, so untiered prices are exact), else 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0 or value == float("inf"):
        return 0
    return value


def _when(started: Any) -> datetime | None:
    if not isinstance(started, str) or not started:
        return None
    try:
        moment = datetime.fromisoformat(started.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
