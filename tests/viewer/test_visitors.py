"""Who the per-visitor cap counts: a signed-in account before an address, the address Gradio reports otherwise."""

from __future__ import annotations

import time
from types import SimpleNamespace

from viewer.visitors import visitor_of


def _request(host: str | None = "203.0.113.9", username: str | None = None, session: dict | None = None,
             forwarded: str | None = None):
    scope = {"session": session} if session is not None else {}
    headers = {"x-forwarded-for": forwarded} if forwarded is not None else {}
    return SimpleNamespace(username=username, client=SimpleNamespace(host=host), headers=headers,
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


def test_on_a_space_the_proxy_appended_address_is_the_visitor(monkeypatch):
    proxied = dict(host="10.16.3.80")  # what request.client.host is on a Space: the proxy, the same for everyone
    monkeypatch.delenv("SPACE_ID", raising=False)
    assert visitor_of(_request(**proxied, forwarded="8.8.8.8")) == "ip:10.16.3.80"  # off a Space: never trusted
    monkeypatch.setenv("SPACE_ID", "team/arena")
    assert visitor_of(_request(**proxied, forwarded="8.8.8.8")) == "ip:8.8.8.8"
    # A header the visitor wrote sits left of what the proxy appended: it never names the visitor.
    assert visitor_of(_request(**proxied, forwarded="1.1.1.1, 8.8.8.8")) == "ip:8.8.8.8"
    assert visitor_of(_request(**proxied, forwarded="not an address")) == "ip:10.16.3.80"
    assert visitor_of(_request(**proxied, forwarded="8.8.8.8", username="ana")) == "account:ana"


def test_on_a_space_a_non_public_appended_address_is_counted_as_itself_never_what_the_caller_wrote(monkeypatch):
    """Before, the rightmost *public* address counted: a caller whose appended address was not public (a private
    network, CGNAT) named itself with whatever it wrote to the left, a new visitor per request."""
    monkeypatch.setenv("SPACE_ID", "team/arena")
    written = [visitor_of(_request(host="10.16.3.80", forwarded=f"203.0.113.{n}, 100.64.0.9")) for n in range(5)]
    assert set(written) == {"ip:100.64.0.9"}
    assert visitor_of(_request(host="10.16.3.80", forwarded="8.8.4.4, 10.0.0.7")) == "ip:10.0.0.7"


def test_an_ipv6_64_is_one_visitor_and_a_mapped_ipv4_is_its_ipv4(monkeypatch):
    monkeypatch.delenv("SPACE_ID", raising=False)
    line = {visitor_of(_request(host=f"2001:db8:1:2:{n:x}::{n:x}")) for n in range(1, 50)}
    assert line == {"ip:2001:db8:1:2::/64"}
    assert visitor_of(_request(host="2001:db8:1:3::1")) == "ip:2001:db8:1:3::/64"  # the next /64 is another
    assert visitor_of(_request(host="::ffff:203.0.113.9")) == "ip:203.0.113.9"
    monkeypatch.setenv("SPACE_ID", "team/arena")
    assert visitor_of(_request(host="10.16.3.80", forwarded="2a01:4f8:c0c:1234:abcd::77")) == \
        "ip:2a01:4f8:c0c:1234::/64"
