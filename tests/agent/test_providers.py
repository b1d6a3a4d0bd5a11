"""The provider registry and each provider's own decisions: its prefix, its key, its endpoint, what it retries.

Retry decisions are checked on the SDKs' own exception types, built the way the SDKs build them from an HTTP
exchange; the full retry loop (notes, waits, Stop) runs against the protocol peers in test_agent_*.py.
"""

from __future__ import annotations

import re

import anthropic
import httpx2  # the HTTP library the anthropic and openai SDKs are built on here
import openai
import pytest

from agent.providers import registry
from agent.providers.anthropic_messages import AnthropicProvider
from agent.providers.base import PROVIDERS, MissingKey, ModelAPI, ProviderSetup
from agent.providers.baseline import BaselinePlayer
from agent.providers.chat_completions import HFRouterProvider, VLLMProvider
from agent.providers.openai_responses import ResponsesProvider
from agent.spec import SpecError
from testkit.tasks import TASK_ID

SETUP = ProviderSetup(system="the rules", tools=[{"name": "check_plan", "description": "check a draft",
                                                  "input_schema": {"type": "object"}}],
                      max_tokens=1000, task_id=TASK_ID, max_turns=12, key="sk-test")
EXPECTED = {"anthropic": AnthropicProvider, "openai": ResponsesProvider, "hf": HFRouterProvider,
            "vllm": VLLMProvider, "baseline": BaselinePlayer}


def request(url: str = "https://api.example.test/v1/messages") -> httpx2.Request:
    return httpx2.Request("POST", url)


def status_error(sdk, status: int, cls=None):
    """The SDK's status error for an HTTP response, built with the SDK's public constructor."""
    response = httpx2.Response(status, json={"error": {"message": f"status {status}"}}, request=request())
    return (cls or sdk.APIStatusError)(f"Error code: {status}", response=response, body=response.json())


# A model each provider's grammar takes.
MODEL = {"anthropic": "m", "openai": "m", "hf": "org/m", "vllm": "m", "baseline": "greedy"}


def provider(prefix: str, monkeypatch, spec_text: str | None = None) -> ModelAPI:
    monkeypatch.setenv("VLLM_BASE_URL", "http://127.0.0.1:9/v1")
    spec = registry.parse_spec(spec_text or f"{prefix}:{MODEL[prefix]}")
    return registry.make_provider(spec, key="sk-test", system=SETUP.system, tools=SETUP.tools, max_tokens=1000,
                                  task_id=TASK_ID, max_turns=12)


# -- the registry ------------------------------------------------------------------------------------------------

def test_the_registry_resolves_every_prefix_to_its_provider(monkeypatch):
    assert registry.prefixes() == tuple(sorted(EXPECTED))
    for prefix, cls in EXPECTED.items():
        assert registry.provider_class(prefix) is cls
        made = provider(prefix, monkeypatch)
        assert type(made) is cls and isinstance(made, ModelAPI) and made.provider_switches == []


def test_an_unknown_prefix_is_a_clear_error():
    with pytest.raises(SpecError, match=r"unknown provider 'gemini': a model spec starts with one of "
                                        r"anthropic:, baseline:, hf:, openai:, vllm:"):
        registry.provider_class("gemini")
    with pytest.raises(SpecError, match="must start with one of anthropic:, baseline:, hf:, openai:, vllm:"):
        registry.parse_spec("gemini:pro")
    with pytest.raises(SpecError, match="must start with one of"):
        registry.parse_spec("gpt-5")


def test_a_new_subclass_registers_its_prefix_and_a_taken_prefix_is_refused():
    class EchoProvider(ModelAPI):
        prefixes = ("echo-test",)

    try:
        assert registry.provider_class("echo-test") is EchoProvider
        assert registry.parse_spec("echo-test:anything").provider == "echo-test"
        with pytest.raises(TypeError, match="'anthropic' is taken"):
            type("Impostor", (ModelAPI,), {"prefixes": ("anthropic",)})
    finally:
        PROVIDERS.pop("echo-test", None)
    assert registry.provider_class("anthropic") is AnthropicProvider


# -- keys and endpoints -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("prefix, env", [("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY"),
                                         ("hf", "HF_TOKEN")])
def test_a_key_typed_in_wins_over_the_environment_and_none_at_all_is_missing(prefix, env, monkeypatch):
    spec = registry.parse_spec(f"{prefix}:{MODEL[prefix]}")
    monkeypatch.setenv(env, "from-env")
    assert registry.resolve_key(spec, {prefix: " typed "}) == "typed"
    assert registry.resolve_key(spec, {prefix: ""}) == "from-env"
    monkeypatch.delenv(env)
    with pytest.raises(MissingKey, match=f"{prefix}:{MODEL[prefix]} needs an API key: type one in the form or set "
                                         f"{env}"):
        registry.resolve_key(spec, {})


def test_vllm_needs_a_base_url_but_no_key_and_baselines_need_neither(monkeypatch):
    vllm = registry.parse_spec("vllm:local")
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    assert registry.resolve_key(vllm) is None
    monkeypatch.setenv("VLLM_API_KEY", "vk")
    assert registry.resolve_key(vllm) == "vk"
    monkeypatch.delenv("VLLM_BASE_URL", raising=False)
    with pytest.raises(SpecError, match="vllm:local needs VLLM_BASE_URL"):
        registry.check_endpoint(vllm)
    monkeypatch.setenv("VLLM_BASE_URL", "http://127.0.0.1:9/v1")
    registry.check_endpoint(vllm)
    greedy = registry.parse_spec("baseline:greedy")
    assert registry.resolve_key(greedy, {"baseline": "ignored"}) is None
    registry.check_endpoint(greedy)


def test_an_unknown_baseline_is_refused_as_the_spec_is_read_naming_the_ones_there_are():
    """Before, `baseline:smart` read as a spec and failed only once its episode had started."""
    with pytest.raises(SpecError, match=r"unknown baseline 'smart': the baselines are baseline:greedy, "
                                        r"baseline:naive, baseline:hasty$"):
        registry.parse_spec("baseline:smart")
    with pytest.raises(SpecError, match=r"unknown baseline 'greed' \(did you mean baseline:greedy\?\)"):
        registry.parse_spec("baseline:greed")
    with pytest.raises(SpecError, match="a baseline takes no @effort; write baseline:greedy"):
        registry.parse_spec("baseline:greedy@high")
    assert not registry.runs_here("baseline:smart") and registry.runs_here("baseline:hasty")


@pytest.mark.parametrize("spec, written", [
    ("hf:Qwen3-8B", "hf:<org>/<model>[:provider|provider2...]"),  # the router names every model org/name
    ("hf:Qwen/Qwen3-8B/extra", "hf:<org>/<model>"),
    ("anthropic:claude/sonnet", "anthropic:<model>"),
    ("openai:gpt|5", "openai:<model>"),
    ("vllm:a|b", "vllm:<model>"),  # a route list is the router's, not a vLLM server's
])
def test_each_provider_refuses_a_model_its_api_would_never_name(spec, written):
    with pytest.raises(SpecError, match=re.escape(written)) as refused:
        registry.parse_spec(spec)
    assert repr(spec) in str(refused.value)


@pytest.mark.parametrize("spec", ["hf:Qwen/Qwen3-8B", "hf:org/m:provA|provB", "hf:Qwen/Qwen3.8-27B:fastest",
                                  "anthropic:claude-sonnet-4-5@high", "openai:gpt-5.5-mini@low",
                                  "openai:ft:gpt-4o-mini:org::abc123", "vllm:meta-llama/Llama-3.1-8B-Instruct",
                                  "vllm:local-model", "baseline:naive"])
def test_the_models_each_api_names_are_taken(spec):
    assert registry.parse_spec(spec).text == spec


# -- what each provider retries ------------------------------------------------------------------------------------

@pytest.mark.parametrize("status, retried", [(400, False), (401, False), (403, False), (404, False),
                                             (413, False), (422, False), (429, True), (500, True), (502, True),
                                             (503, True), (529, True)])
@pytest.mark.parametrize("prefix", ["anthropic", "openai", "vllm", "hf"])
def test_status_errors_are_retried_on_429_and_5xx_only(prefix, status, retried, monkeypatch):
    sdk = anthropic if prefix == "anthropic" else openai
    error = status_error(sdk, status)
    assert isinstance(error, sdk.APIStatusError) and error.status_code == status
    assert provider(prefix, monkeypatch).should_retry(error) is retried


@pytest.mark.parametrize("prefix", ["anthropic", "openai", "vllm", "hf"])
def test_refused_and_timed_out_connections_are_retried_other_failures_are_not(prefix, monkeypatch):
    sdk = anthropic if prefix == "anthropic" else openai
    chosen = provider(prefix, monkeypatch)
    assert chosen.should_retry(sdk.APIConnectionError(request=request()))
    assert chosen.should_retry(sdk.APITimeoutError(request=request()))
    assert not chosen.should_retry(RuntimeError("the OpenAI stream ended without a final response"))
    assert not chosen.should_retry(ValueError("bad"))
    # An error of the other SDK is not this provider's to judge: it is not retried.
    other = openai if sdk is anthropic else anthropic
    assert not chosen.should_retry(status_error(other, 503))


def test_an_error_that_only_looks_like_an_sdk_error_is_not_retried(monkeypatch):
    class APIConnectionError(Exception):  # the same name as the SDKs' class, not the class
        status_code = 503

    for prefix in ("anthropic", "openai", "hf"):
        assert not provider(prefix, monkeypatch).should_retry(APIConnectionError())


@pytest.mark.parametrize("prefix", ["anthropic", "openai", "hf"])
def test_the_sdks_own_error_classes_are_judged_by_their_status(prefix, monkeypatch):
    sdk = anthropic if prefix == "anthropic" else openai
    chosen = provider(prefix, monkeypatch)
    assert chosen.should_retry(status_error(sdk, 429, sdk.RateLimitError))
    assert chosen.should_retry(status_error(sdk, 500, sdk.InternalServerError))
    assert not chosen.should_retry(status_error(sdk, 400, sdk.BadRequestError))
    assert not chosen.should_retry(status_error(sdk, 401, sdk.AuthenticationError))
    if sdk is anthropic:
        assert chosen.should_retry(status_error(sdk, 529, anthropic.OverloadedError))


def test_hf_with_a_fallback_left_moves_on_instead_of_retrying_a_rejected_request(monkeypatch):
    routed = provider("hf", monkeypatch, "hf:org/model:provA|provB")
    assert routed.fallbacks == ["org/model:provB"]
    assert not routed.should_retry(status_error(openai, 500))  # rejected: the next provider gets the request
    assert not routed.should_retry(status_error(openai, 400))
    assert routed.should_retry(status_error(openai, 429))  # busy, not rejected: worth the wait
    assert routed.should_retry(openai.APIConnectionError(request=request()))
    routed.fallbacks.clear()  # the last provider of the list retries like any other
    assert routed.should_retry(status_error(openai, 500))


def test_baselines_never_retry(monkeypatch):
    assert not provider("baseline", monkeypatch).should_retry(status_error(openai, 503))
