"""Who is calling: the key the per-visitor caps count (Run, Play and the API alike), the same for every browser
session and API client of one person.

A signed-in account is the visitor when there is one (the Space's "Sign in with Hugging Face", read from the
session as Gradio reads it for `gr.OAuthProfile`, or Gradio's own auth, `request.username`); otherwise an address.
Off a Space that is the client's address as Gradio reports it (`request.client.host`; uvicorn, which Gradio runs,
takes `X-Forwarded-For` only from the proxies it trusts, loopback by default). On a Space every request comes
through Hugging Face's proxy, so `request.client.host` is the proxy's internal address, the same for everyone;
the visitor is then the last address of `X-Forwarded-For`: the one the proxy itself appended. Everything left of
it may have been written by the caller, so it is never taken, not even when the appended address is not a public
one (a caller inside a private network, say): that address is counted as it is, and everyone behind it shares one
visitor's caps, which is the safe way to be wrong (taking a part the caller wrote would let one caller be as many
visitors as it likes).

An IPv6 address counts by its /64: one subscriber line or host usually holds a whole /64 and can pick any address
in it, so a visitor per address would be a visitor per request. An IPv4-mapped IPv6 address counts as its IPv4.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from rollouts import settings


def visitor_of(request: Any) -> str:
    """`account:<name>` or `ip:<address or IPv6 /64>`; `unknown` when the request says neither (a direct call
    in-process)."""
    username = _account(request)
    if username:
        return f"account:{username}"
    host = _appended_address(request) if settings.SPACE_ID.is_set() else None
    if host is None:
        try:
            host = request.client.host if request is not None else None
        except AttributeError:
            host = None
    return address_key(host) if isinstance(host, str) and host else "unknown"


def account_of(request: Any, profile: Any = None) -> str | None:
    """The signed-in account's name (a Hugging Face profile Gradio handed over, else the session's, else Gradio's
    own user), or None for an anonymous visitor: what a flag's author is, and what only a signed-in visitor has."""
    name = getattr(profile, "username", None) or getattr(profile, "preferred_username", None)
    if isinstance(name, str) and name:
        return name
    return _account(request)


def address_key(host: str) -> str:
    """The visitor an address is: `ip:<IPv4>`, `ip:<IPv6 network>/64`, or the text as given when it is not an
    address."""
    try:
        address = ipaddress.ip_address(host.strip().split("%", 1)[0])
    except ValueError:
        return f"ip:{host.strip()[:64]}"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return f"ip:{address.ipv4_mapped}"
        return f"ip:{ipaddress.IPv6Network((address, 64), strict=False)}"
    return f"ip:{address}"


def _appended_address(request: Any) -> str | None:
    """The last address of `X-Forwarded-For` (the Space's proxy appends the caller's own); None without one."""
    try:
        header = request.headers.get("x-forwarded-for") if request is not None else None
    except AttributeError:
        return None
    last = (header or "").rsplit(",", 1)[-1].strip()
    try:
        return str(ipaddress.ip_address(last))
    except ValueError:
        return None


def _account(request: Any) -> str | None:
    if request is None:
        return None
    username = getattr(request, "username", None)
    if isinstance(username, str) and username:
        return username
    try:  # Gradio's own reading of the OAuth session (not public API: if it moves, visitors fall back to their IP)
        from gradio import helpers, oauth

        info = oauth._get_valid_oauth_info_from_session(helpers._session_from_request(request))
        name = ((info or {}).get("userinfo") or {}).get("preferred_username")
    except (AttributeError, ImportError, TypeError):
        return None
    return name if isinstance(name, str) and name else None
