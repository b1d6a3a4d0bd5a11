"""The one run request (agent.request.EpisodeRequest): a parsed spec or nothing, its keys never printed."""

from __future__ import annotations

import pytest

from agent.request import EpisodeRequest, Limits
from agent.spec import SpecError


def test_a_request_holds_its_spec_parsed_and_never_prints_a_key():
    request = EpisodeRequest.of("anthropic:claude-x@high", "dock-24B-w06x1-busy-0", max_turns=4,
                                keys={"anthropic": "sk-ant-SECRET-1234", "openai": ""})
    assert (request.spec.provider, request.spec.model, request.spec.effort) == ("anthropic", "claude-x", "high")
    assert request.model == "anthropic:claude-x@high" and request.limits == Limits(max_turns=4)
    assert dict(request.keys) == {"anthropic": "sk-ant-SECRET-1234"}  # an empty field is no key
    assert request.secrets == ["sk-ant-SECRET-1234"]
    for shown in (repr(request), str(request), f"{request}", repr([request])):
        assert "SECRET" not in shown and "claude-x" in shown
    with pytest.raises(TypeError):
        request.keys["openai"] = "sk-later"  # frozen, its keys too: a request is the same at every step


def test_a_request_refuses_what_was_not_parsed():
    with pytest.raises(SpecError, match="must start with one of"):
        EpisodeRequest.of("gpt-x", "t-0")
    with pytest.raises(TypeError, match="parsed ModelSpec"):
        EpisodeRequest("baseline:greedy", "t-0")
    spec = EpisodeRequest.of("baseline:greedy", "t-0").spec
    with pytest.raises(TypeError, match="Limits"):
        EpisodeRequest(spec, "t-0", {"max_turns": 3})


@pytest.mark.parametrize("text", ["hf:org/m:cerebras|ovhcloud@low", "hf:org/m", "openai:gpt-x@high", "vllm:a:b",
                                  "anthropic:claude-x", "baseline:greedy"])
def test_the_loop_the_index_and_the_prices_cut_a_spec_one_way(text):
    """One cut of the grammar (rollouts.model_spec.spec_parts): the parsed spec, the index's model_name and the
    prices' providers all come from it, so they cannot drift apart."""
    from agent.providers.registry import parse_spec
    from rollouts.prices import served_by
    from rollouts.schema import model_name

    spec = parse_spec(text)
    expected = spec.model.partition(":")[0] if spec.provider == "hf" else spec.model
    assert spec.name == model_name(text) == expected
    routes = served_by(text, ["switched"] * 5)
    if spec.provider == "hf" and spec.fallbacks:
        assert [name for _, name in routes] == [spec.name] * (1 + len(spec.fallbacks))
        assert [f"{spec.name}:{at.removeprefix('huggingface_')}" for at, _ in routes] == [spec.model, *spec.fallbacks]
