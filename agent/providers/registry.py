"""From a model spec and its key to the adapter that plays it."""

from __future__ import annotations

import os

from agent.providers.base import Provider
from agent.spec import ModelSpec, SpecError

KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY", "hf": "HF_TOKEN", "vllm": "VLLM_API_KEY"}
HF_ROUTER_URL = "https://router.huggingface.co/v1"


class MissingKey(SpecError):
    """A provider needs a key that was neither typed in nor set in the environment."""


def resolve_key(spec: ModelSpec, keys: dict[str, str] | None = None) -> str | None:
    """The key for this run: one passed in for this run wins over the environment's."""
    if spec.provider == "baseline":
        return None
    given = ((keys or {}).get(spec.provider) or "").strip()
    if given:
        return given
    from_env = os.environ.get(KEY_ENV[spec.provider], "").strip()
    if from_env:
        return from_env
    if spec.provider == "vllm":
        return "none"  # a local vLLM server usually takes no key
    raise MissingKey(f"{spec.text} needs an API key: type one in the form or set {KEY_ENV[spec.provider]}")


def check_endpoint(spec: ModelSpec) -> None:
    """Fail before the episode starts when a provider has nowhere to send requests."""
    if spec.provider == "vllm" and not os.environ.get("VLLM_BASE_URL"):
        raise SpecError(f"{spec.text} needs VLLM_BASE_URL, the OpenAI-compatible server to send requests to")


ADAPTERS = {"anthropic": "agent.providers.anthropic_messages", "openai": "agent.providers.openai_responses",
            "hf": "agent.providers.chat_completions", "vllm": "agent.providers.chat_completions", "baseline": "agent.providers.baseline"}


def settle(specs: list[ModelSpec]) -> None:
    """Import what these models need, then take everything loaded so far out of the garbage collector's sight.

    The server, the SDKs and the task pack make a large heap of long-lived objects; without this, every full
    collection walks it again and adds a millisecond pause to tool calls at random (measured in bench/loop_bench.py).
    """
    import gc
    import importlib

    for spec in specs:
        importlib.import_module(ADAPTERS[spec.provider])
    gc.collect()
    gc.freeze()


def make_provider(spec: ModelSpec, *, key: str | None, system: str, tools: list[dict], max_tokens: int,
                  task_id: str, max_turns: int, retry_base_s: float | None = None,
                  baseline_pace_s: float = 0.0) -> Provider:
    if spec.provider == "anthropic":
        from agent.providers.anthropic_messages import AnthropicProvider

        return AnthropicProvider(model=spec.model, api_key=key, system=system, tools=tools, max_tokens=max_tokens,
                                 effort=spec.effort, base_url=os.environ.get("ANTHROPIC_BASE_URL") or None,
                                 retry_base_s=retry_base_s)
    if spec.provider == "openai":
        from agent.providers.openai_responses import ResponsesProvider

        return ResponsesProvider(model=spec.model, api_key=key, system=system, tools=tools, max_tokens=max_tokens,
                                 effort=spec.effort, base_url=os.environ.get("OPENAI_BASE_URL") or None,
                                 retry_base_s=retry_base_s)
    if spec.provider in ("hf", "vllm"):
        from agent.providers.chat_completions import ChatProvider

        if spec.provider == "hf":
            base_url, label = os.environ.get("HF_ROUTER_URL") or HF_ROUTER_URL, "The Hugging Face router"
        else:
            base_url, label = os.environ["VLLM_BASE_URL"], "The vLLM server"
        return ChatProvider(model=spec.model, fallbacks=spec.fallbacks, base_url=base_url, api_key=key or "",
                            system=system, tools=tools, max_tokens=max_tokens, effort=spec.effort, label=label,
                            retry_base_s=retry_base_s)
    if spec.provider == "baseline":
        from agent.providers.baseline import BaselinePlayer

        return BaselinePlayer(spec.model, task_id, max_turns=max_turns, pace_s=baseline_pace_s)
    raise SpecError(f"unknown provider {spec.provider!r}")
