"""Who the per-visitor cap counts: a signed-in account before an address, the address Gradio reports otherwise."""

from __future__ import annotations

import time
from types import SimpleNamespace

from viewer.visitors import visitor_of


def _request(host: str | None = "203.0.113.9", username: str | None = None, session: dict | None = None):
    scope = {"session": session} if session is not None else {}
    return SimpleNamespace(username=username, client=SimpleNamespace(host=host),
                           request=SimpleNamespace(scope=scope))


def test_an_address_a_gradio_user_and_a_hugging_face_account():
    assert visitor_of(_request()) == "ip:203.0.113.9"
    assert visitor_of(_request(username="ana")) == "account:ana"
    signed_in = {"oauth_info": {"userinfo": {"preferred_username": "bo"}, "expires_at": time.time() + 60}}
    assert visitor_of(_request(session=signed_in)) == "account:bo"
    expired = {"oauth_info": {"userinfo": {"preferred_username": "bo"}, "expires_at": time.time() - 60}}
    assert visitor_of(_request(session=expired)) == "ip:203.0.113.9"
    assert visitor_of(_request(host=None)) == "unknown"
    assert visitor_of(None) == "unknown"
