"""Fixtures the agent tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testkit.peers.chat_peer import ChatPeer


@pytest.fixture
def router_peer(monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatPeer]:
    """A chat-completions peer standing in for the Hugging Face router (`hf:` models), with a token to send it;
    a test that ends with a request the peer could not read fails."""
    with ChatPeer() as peer:
        monkeypatch.setenv("HF_ROUTER_URL", peer.url + "/v1")
        monkeypatch.setenv("HF_TOKEN", "hf_test_token")
        yield peer
        assert not peer.problems
