"""A model spec's text as a record stores it, cut into its parts: the one cut of the grammar
`provider:model[@effort]` (`hf:org/model:prov1|prov2`, DESIGN.md "The model spec").

agent.spec checks the parts (which providers, efforts and models exist is the agent's business); the index's
`model_name` (rollouts.schema) and the prices (rollouts.prices) read a stored spec through it. It sits here, the
lowest layer that reads a spec, because a record's spec is data this layer reads and it cannot import the agent.
"""

from __future__ import annotations

from typing import NamedTuple


class SpecParts(NamedTuple):
    """A spec's text cut at its separators, unchecked (None: that separator is absent)."""

    provider: str | None  # before the first `:`
    model: str  # for `hf:` without its route list
    routes: str | None  # `hf:` only: the `|`-separated providers after the model's `:`
    effort: str | None  # after `@`


def spec_parts(spec: str) -> SpecParts:
    """`hf:org/m:a|b@low` -> ("hf", "org/m", "a|b", "low"); `openai:gpt-x` -> ("openai", "gpt-x", None, None)."""
    provider, colon, rest = spec.partition(":")
    base, at, effort = rest.partition("@")
    model, routes = base, None
    if provider == "hf":
        model, bar, listed = base.partition(":")
        routes = listed if bar else None
    return SpecParts(provider if colon else None, model, routes, effort if at else None)
