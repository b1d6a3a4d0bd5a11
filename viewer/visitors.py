"""Who is calling: the key the per-visitor caps count, the same for every browser session and API client of one
person.

A signed-in account is the visitor when there is one (the Space's "Sign in with Hugging Face", read from the
session as Gradio reads it for `gr.OAuthProfile`, or Gradio's own auth, `request.username`); otherwise an address.
Off a Space that is the client's address as Gradio reports it (`request.client.host`; uvicorn, which Gradio runs,
takes `X-Forwarded-For` only from the proxies it trusts, loopback by default). On a Space every request comes
through Hugging Face's proxy, so `request.client.host` is the proxy's internal address, the same for everyone;
the visitor is then the rightmost public address of `X-Forwarded-For`: the one the proxy itself appended. An
address a visitor writes into the header sits left of it and is never taken, so no one can pass for someone else.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Any


def visitor_of(request: Any) -> str:
    """`account:<name>` or `ip:<address>`; `unknown` when the request says neither (a direct call in-process)."""
    username = _account(request)
    if username:
        return f"account:{username}"
    host = _forwarded_address(request) if os.environ.get("SPACE_ID") else None
    if host is None:
        try:
            host = request.client.host if request is not None else None
        except AttributeError:
            host = None
    return f"ip:{host}" if isinstance(host, str) and host else "unknown"


def _forwarded_address(request: Any) -> str | None:
    """The rightmost public address in `X-Forwarded-For` (the Space's proxy appends the caller's own)."""
    try:
        header = request.headers.get("x-forwarded-for") if request is not None else None
    except AttributeError:
        return None
    for part in reversed((header or "").split(",")[-8:]):
        try:
            address = ipaddress.ip_address(part.strip())
        except ValueError:
            continue
        if address.is_global:
            return str(address)
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
