"""Who is calling: the key the per-visitor caps count, the same for every browser session and API client of one
person.

A signed-in account is the visitor when there is one (the Space's "Sign in with Hugging Face", read from the
session as Gradio reads it for `gr.OAuthProfile`, or Gradio's own auth, `request.username`); otherwise the client's
IP address as
Gradio reports it (`request.client.host`). Behind the Space's proxy that address is the one the proxy forwards:
uvicorn, which Gradio runs, takes `X-Forwarded-For` only from the proxies it trusts (`FORWARDED_ALLOW_IPS`,
loopback by default), so a visitor cannot name themselves someone else by sending the header.
"""

from __future__ import annotations

from typing import Any


def visitor_of(request: Any) -> str:
    """`account:<name>` or `ip:<address>`; `unknown` when the request says neither (a direct call in-process)."""
    username = _account(request)
    if username:
        return f"account:{username}"
    try:
        host = request.client.host if request is not None else None
    except AttributeError:
        host = None
    return f"ip:{host}" if isinstance(host, str) and host else "unknown"


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
