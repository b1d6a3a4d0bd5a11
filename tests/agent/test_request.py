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
