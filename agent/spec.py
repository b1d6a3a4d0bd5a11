"""The model spec: `provider:model[@effort]`, as in the upstream harness (DESIGN.md "The model spec").

This module checks the grammar; its one cut of a spec's text into parts is `rollouts.model_spec.spec_parts`, which
the index's `model_name` and the prices read too. Which providers exist is the registry's business (`agent.providers.registry.parse_spec`
reads a spec against the registered prefixes).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from rollouts.model_spec import spec_parts
from rollouts.schema import model_name

EFFORTS = ("low", "medium", "high")
# A spec names the model in every record and on the public board: a bounded length and a plain alphabet
# (provider and model ids, `@effort`, `hf:` route lists) keep control characters and megabytes out of both.
SPEC_MAX_CHARS = 200
SPEC_CHARS = re.compile(r"[A-Za-z0-9._:/@|+\-]+")


def _quoted(text: str, limit: int = 60) -> str:
    """A short, printable excerpt of a spec for an error message."""
    text = "".join(c if c.isprintable() else "?" for c in text[: limit + 1])
    return repr(text if len(text) <= limit else text[:limit] + "…")


class SpecError(ValueError):
    """A model spec the loop cannot play."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    text: str  # the spec as given; it names the model in records and on the board
    provider: str
    model: str  # for `hf:` the first `org/model:provider` to try
    effort: str | None = None
    fallbacks: tuple[str, ...] = ()  # `hf:` only: the next `org/model:provider` strings, in order

    @property
    def name(self) -> str:
        """The model without provider prefix, effort or `hf:` provider list (the index's `model_name`)."""
        return model_name(self.text)


def read_spec(text: str, providers: Collection[str]) -> ModelSpec:
    """Read `anthropic:claude-x@high`, `openai:gpt-x`, `hf:org/model:prov1|prov2`, `vllm:name`, `baseline:greedy`.

    `providers` are the prefixes a spec may start with.
    """
    spec = (text or "").strip() if isinstance(text, str) else ""
    if len(spec) > SPEC_MAX_CHARS:
        raise SpecError(f"model spec {_quoted(spec)} is longer than {SPEC_MAX_CHARS} characters")
    if spec and not SPEC_CHARS.fullmatch(spec):
        raise SpecError(f"model spec {_quoted(spec)} may use only letters, digits and . _ : / @ | + -")
    provider, model, routes, effort = spec_parts(spec)
    if provider is None or provider not in providers:
        raise SpecError(f"model spec {_quoted(spec)} must start with one of {', '.join(p + ':' for p in providers)}")
    if effort is not None and effort not in EFFORTS:
        raise SpecError(f"model spec {_quoted(spec)}: effort must be one of {', '.join('@' + e for e in EFFORTS)}")
    if not model:
        raise SpecError(f"model spec {_quoted(spec)} names no model")
    if routes is None:
        return ModelSpec(spec, provider, model, effort)
    # `org/model:prov1|prov2` -> try `org/model:prov1`, then `org/model:prov2` on a rejected request.
    chain = [f"{model}:{route.strip()}" for route in routes.split("|") if route.strip()]
    if not chain:
        raise SpecError(f"model spec {_quoted(spec)} has an empty provider list")
    return ModelSpec(spec, provider, chain[0], effort, tuple(chain[1:]))
