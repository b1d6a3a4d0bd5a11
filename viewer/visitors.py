"""Who is calling: the key the per-visitor caps count, the same for every browser session and API client of one
person.

A signed-in account (`request.username`) is the visitor when there is one; otherwise the client's IP address as
Gradio reports it (`request.client.host`). Behind the Space's proxy that address is the one the proxy forwards:
uvicorn, which Gradio runs, takes `X-Forwarded-For` only from the proxies it trusts (`FORWARDED_ALLOW_IPS`,
loopback by default), so a visitor cannot name themselves someone else by sending the header.
"""

from __future__ import annotations

from typing import Any


def visitor_of(request: Any) -> str:
    """`account:<name>` or `ip:<address>`; `unknown` when the request says neither (a direct call in-process)."""
    username = getattr(request, "username", None) if request is not None else None
    if isinstance(username, str) and username:
        return f"account:{username}"
    try:
        host = request.client.host if request is not None else None
    except AttributeError:
        host = None
    return f"ip:{host}" if isinstance(host, str) and host else "unknown"
