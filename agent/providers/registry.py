"""From a model spec to the provider that plays it, and what each provider declares for the doors that name it.

Every module of this package is imported once, the first time a spec is read or a provider's declarations are
asked for; each `ModelAPI` subclass with `prefixes` registers itself as its class is defined (base.py). So adding
a provider is adding one module here: the forms' key fields (`key_providers`), the CLI's and the forms' key check
(`resolve_key`), a sweep's secrets (`key_env`, `endpoint_envs`) and the prices (its `price_group`, handed to
rollouts.prices as the class is defined) all read the class.
"""

from __future__ import annotations

import functools
import gc
import importlib
import pkgutil

import agent.providers
from agent.providers.base import PROVIDERS, MissingKey, ModelAPI, ProviderSetup
from agent.spec import ModelSpec, SpecError, read_spec

__all__ = ["MissingKey", "check_endpoint", "endpoint_envs", "key_providers", "make_provider", "parse_spec",
           "prefixes", "preload_and_freeze", "provider_class", "resolve_key", "runs_here"]


@functools.cache
def _import_providers() -> None:
    for module in pkgutil.iter_modules(agent.providers.__path__):
        importlib.import_module(f"{agent.providers.__name__}.{module.name}")


def key_providers() -> list[tuple[str, type[ModelAPI]]]:
    """(prefix, class) for each prefix whose provider takes a key, in the order the forms show their key fields."""
    _import_providers()
    return sorted(((prefix, api) for prefix, api in PROVIDERS.items() if api.key_env),
                  key=lambda entry: (entry[1].key_order, entry[0]))


def endpoint_envs() -> dict[str, str]:
    """prefix -> the environment variable naming where its requests go, for providers that read one."""
    _import_providers()
    return {prefix: api.endpoint_env for prefix, api in sorted(PROVIDERS.items()) if api.endpoint_env}


def prefixes() -> tuple[str, ...]:
    """Every registered spec prefix, sorted."""
    _import_providers()
    return tuple(sorted(PROVIDERS))


def provider_class(prefix: str) -> type[ModelAPI]:
    """The class that plays specs starting with `prefix:`; SpecError naming the known prefixes otherwise."""
    _import_providers()
    try:
        return PROVIDERS[prefix]
    except KeyError:
        known = ", ".join(p + ":" for p in prefixes())
        raise SpecError(f"unknown provider {prefix!r}: a model spec starts with one of {known}") from None


def parse_spec(text: str) -> ModelSpec:
    """`provider:model[@effort]` read against the registered providers (the grammar is agent/spec.py's), its model
    checked by the provider's own grammar (`ModelAPI.check_model`: a baseline's name, an `hf:` model's `org/name`):
    the one check of a spec, made by every door before anything is played. SpecError naming the valid choices."""
    spec = read_spec(text, prefixes())
    provider_class(spec.provider).check_model(spec)
    return spec


def resolve_key(spec: ModelSpec, keys: dict[str, str] | None = None) -> str | None:
    """The key for this run: one passed in for this run wins over the environment's; MissingKey when needed."""
    return provider_class(spec.provider).resolve_key(spec, keys)


def check_endpoint(spec: ModelSpec) -> None:
    """Fail before the episode starts when a provider has nowhere to send requests."""
    provider_class(spec.provider).check_endpoint(spec)


def playable(text: str, keys: dict[str, str] | None = None) -> tuple[ModelSpec, str | None]:
    """The spec and its key once `text` can be played here: it parses (`parse_spec`), has its key (one of `keys`,
    else the environment's; MissingKey) and somewhere to send requests (SpecError). What every start checks."""
    spec = parse_spec(text)
    key = resolve_key(spec, keys)
    check_endpoint(spec)
    return spec, key


def runs_here(text: str) -> bool:
    """Whether this process can play `text` on its own: a valid spec whose provider needs no key or finds its key
    in the environment, and has somewhere to send requests (what an arena's random pair is drawn from)."""
    try:
        playable(text, {})
    except (SpecError, MissingKey):
        return False
    return True


def make_provider(spec: ModelSpec, *, key: str | None, system: str, tools: list[dict], max_tokens: int,
                  task_id: str, max_turns: int, retry_base_s: float | None = None,
                  baseline_pace_s: float = 0.0) -> ModelAPI:
    """The provider for one episode of `spec`."""
    setup = ProviderSetup(system=system, tools=tools, max_tokens=max_tokens, task_id=task_id, max_turns=max_turns,
                          key=key, pace_s=baseline_pace_s,
                          **({"retry_base_s": retry_base_s} if retry_base_s is not None else {}))
    return provider_class(spec.provider).create(spec, setup)


def preload_and_freeze() -> None:
    """Import every provider (and its SDK), then take everything loaded so far out of the collector's sight.

    The server, the SDKs and the task pack make a large heap of long-lived objects; without this, every full
    collection walks it again and adds a millisecond pause to tool calls at random (measured in bench/loop_bench.py).
    """
    _import_providers()
    gc.collect()
    gc.freeze()
