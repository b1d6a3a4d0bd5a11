"""Keys typed for a run never reach a public record, not even in part: provider error bodies as the real SDKs
raise them (against the protocol peers) echo a wrong key masked, first and last characters around a mask, and a
long error text may be cut through a key (rollouts.scrub, as agent.providers.base.scrub; agent.loop)."""

from __future__ import annotations

import json

import pytest

from agent.providers.base import scrub
from testkit.episodes import play
from testkit.peers import AnthropicPeer, ChatPeer, Error, ResponsesPeer, always

OPENAI_KEY = "sk-proj-Fq3ZL0aT9mEwXc7VbN2yRk5HdJ8pUs4Gi6Oe1QlTz0WmQ7vZ"
ANTHROPIC_KEY = "sk-ant-api03-Lm4Np7Qr0St3Uv6Wx9Yz2Ab5Cd8Ef1Gh4Ij7Kl0Mn3Op6Qr9St-K3fW"
HF_KEY = "hf_PqRsTuVwXyZaBcDeFgHiJkLmNoPq8Rd2"


def leaks(text: str, key: str) -> list[str]:
    """The parts of `key` a reader of `text` learns: its first 8 or last 4 characters, or any 10 in a row."""
    parts = {key[:8], key[-4:], *(key[i:i + 10] for i in range(len(key) - 9))}
    return sorted(p for p in parts if p in text and p not in ("sk-proj-", "sk-ant-a"))  # prefixes every key has


def public_text(events: list[dict], record: dict) -> str:
    return json.dumps(record) + json.dumps(events)


def test_openai_quotes_a_wrong_key_masked_and_the_record_keeps_none_of_it(env_url, monkeypatch):
    """The Responses API's own 401: `Incorrect API key provided: sk-proj-****...Q7vZ.` (first 8, last 4)."""
    echo = OPENAI_KEY[:8] + "*" * 40 + OPENAI_KEY[-4:]
    with ResponsesPeer() as peer:
        monkeypatch.setenv("OPENAI_BASE_URL", peer.url + "/v1")
        peer.push(Error(401, f"Incorrect API key provided: {echo}. You can find your API key at "
                             "https://platform.openai.com/account/api-keys.", error_type="invalid_request_error"))
        events, record = play("openai:gpt-test", env_url, keys={"openai": OPENAI_KEY})
    assert record["end_reason"] == "error" and "AuthenticationError" in record["errors"][0]
    assert "Incorrect API key provided: [redacted]." in record["errors"][0]
    assert leaks(public_text(events, record), OPENAI_KEY) == []


def test_anthropic_style_and_hf_router_echoes_are_scrubbed_from_errors_and_provider_switches(env_url,
                                                                                               monkeypatch):
    with AnthropicPeer() as peer:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", peer.url)
        peer.push(Error(401, f"invalid x-api-key: {ANTHROPIC_KEY[:9]}...{ANTHROPIC_KEY[-4:]}",
                        error_type="authentication_error"))
        events, record = play("anthropic:claude-test", env_url, keys={"anthropic": ANTHROPIC_KEY})
    assert record["end_reason"] == "error" and "[redacted]" in record["errors"][0]
    assert leaks(public_text(events, record), ANTHROPIC_KEY) == []

    models = {"org/planner:provA": always(Error(401, f"Invalid API key provided: {HF_KEY[:7]}…{HF_KEY[-4:]}")),
              "org/planner:provB": always(Error(403, f"token ****{HF_KEY[-6:]} may not call this model"))}
    with ChatPeer(models=models) as peer:
        monkeypatch.setenv("HF_ROUTER_URL", peer.url + "/v1")
        events, record = play("hf:org/planner:provA|provB", env_url, keys={"hf": HF_KEY})
    assert len(record["provider_switches"]) == 1 and record["end_reason"] == "error"
    assert leaks(public_text(events, record), HF_KEY) == []


def test_a_key_cut_through_by_the_error_length_limit_leaves_no_part(env_url, monkeypatch):
    """Errors are kept to 800 characters; before, they were cut first and scrubbed after, so a key straddling the
    cut kept its first characters."""
    with ResponsesPeer() as peer:
        monkeypatch.setenv("OPENAI_BASE_URL", peer.url + "/v1")
        padding = "the request was refused; " * 30  # the key starts 24 characters before the cut at 800
        peer.push(Error(400, f"{padding}the key {OPENAI_KEY} is not valid for this project"))
        events, record = play("openai:gpt-test", env_url, keys={"openai": OPENAI_KEY})
    assert len(record["errors"][0]) <= 800
    assert leaks(public_text(events, record), OPENAI_KEY) == []


@pytest.mark.parametrize("text", ["Retrying... in 1..5 s", "ships 3, 5 and 7 moved (see ***notes***)",
                                  "a.b...c", "sk-...", "cost 1,234"])
def test_ordinary_text_is_left_alone(text):
    assert scrub(text, [OPENAI_KEY, ANTHROPIC_KEY]) == text


def test_the_pusher_scrubs_a_masked_echo_of_its_token_with_the_one_scrubber(tmp_path):
    """The store's pusher had its own copy (`text.replace(token, "***")`), which let a Hub error quoting the token
    masked keep its first and last characters in `status()["last_error"]`."""
    from rollouts.hub_push import HubPusher

    pusher = HubPusher(tmp_path, "org/rollouts", token=HF_KEY, endpoint="http://127.0.0.1:9")
    said = pusher._describe(RuntimeError(f"401 Client Error: invalid token {HF_KEY[:7]}…{HF_KEY[-4:]} for org"))
    assert said == "RuntimeError: 401 Client Error: invalid token [redacted] for org" and not leaks(said, HF_KEY)
    assert "[redacted]" in pusher._describe(RuntimeError(f"token {HF_KEY} refused"))
