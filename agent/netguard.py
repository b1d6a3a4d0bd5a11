"""Where the app's outbound requests may go: one guard for every server URL a visitor can influence.

A visitor can point a run at any berth server (the Run form's custom URL, the `/run` API's `server`), and the app
then reaches it twice: the Task API over HTTP and the episode over OpenEnv (an HTTP session, then a WebSocket). On a
public Space that is a way into the Space's own network, so a `ServerPolicy` decides each connection:

- the URL is cleaned first (`clean_url`): http/https/ws/wss only, userinfo (`user:pass@`) dropped, so no credential
  is sent or stored;
- servers the Space names itself (its settings, the public PortSimEnv server) are trusted, and `ALLOWED_SERVERS`
  (`host[:port]` entries, IPv6 in brackets, `*.` for subdomains; `ServerPattern`) trusts more; with
  `CUSTOM_SERVERS` off nothing else is accepted;
- any other host must resolve only to public addresses (not loopback, private, link-local, multicast, reserved or
  unspecified). This is checked when each connection opens, on the address actually dialled (the transports below
  dial the checked address themselves), so a DNS answer that changes after the first check cannot slip through.
  Redirects are not followed; if one were, its hop would open a connection and meet the same check.

A visitor only ever hears "this server is not allowed" or "could not reach the server": never a status, a body or
an address, which would make the app an oracle for the network behind it.

Every HTTP client made here also bounds what it reads (`http_client`, `async_http_client`): an answer over
`max_bytes`, or still coming after `max_s`, is cut off with `AnswerRefused` (agent/http_bounds.py), so a server
cannot fill the app's memory or hold a worker.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import ipaddress
import re
import socket
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpcore
import httpx

from agent.http_bounds import bound_answers
from agent.limits import ANSWER_MAX_BYTES, ANSWER_MAX_S

NOT_ALLOWED = "this server is not allowed"
UNREACHABLE = "could not reach the server"
URL_MAX_CHARS = 300
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


class ServerRefused(ValueError):
    """The policy does not let the app connect to this server; the message is safe to show a visitor."""


def clean_url(url: str) -> str:
    """`url` with a lower-case scheme and host, without userinfo, query or fragment; ServerRefused if it is not an
    http(s)/ws(s) URL with a host."""
    text = (url or "").strip() if isinstance(url, str) else ""
    if not text or len(text) > URL_MAX_CHARS or any(not c.isprintable() or c.isspace() for c in text):
        raise ServerRefused("Enter the server URL, e.g. https://fineenvs-portsimenv.hf.space")
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    try:
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is not a number
        host = port = None
    if scheme not in DEFAULT_PORTS or not host:
        raise ServerRefused("Enter the server URL, e.g. https://fineenvs-portsimenv.hf.space")
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), "", ""))


def http_url(url: str) -> str:
    """Accept `ws://` / `wss://` and trailing slashes; the client wants the server's base URL. Userinfo is dropped:
    a `user:pass@` would be sent as Basic auth and stored in the record."""
    url = clean_url(url)
    for scheme, http in (("ws://", "http://"), ("wss://", "https://")):
        if url.startswith(scheme):
            return http + url[len(scheme):]
    return url


def origin(url: str) -> tuple[str, int]:
    """(host, port) of a cleaned URL, the port filled in from the scheme."""
    parts = urlsplit(url)
    return (parts.hostname or "").lower(), parts.port or DEFAULT_PORTS.get(parts.scheme.lower(), 80)


def public_address(address: str) -> bool:
    """Whether an IP address is one the open internet routes to (IPv4-mapped IPv6 judged as its IPv4)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    closed = (ip.is_loopback or ip.is_private or ip.is_link_local or ip.is_multicast or ip.is_reserved
              or ip.is_unspecified or getattr(ip, "is_site_local", False))
    return ip.is_global and not closed


_HOST_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")


def _host(host: str) -> str:
    """A host as the policy compares it: lower case, no brackets, an IP address in its one canonical form
    (`2001:DB8:0::1` and `2001:db8::1` are one server)."""
    host = host.strip("[]").lower()
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


@dataclass(frozen=True)
class ServerPattern:
    """One `ALLOWED_SERVERS` entry: `host[:port]`, an IPv6 address in brackets (`[2001:db8::1]:8000`), and `*.` in
    front of a name for its subdomains (`*.example.org`: `a.example.org`, `a.b.example.org`, not `example.org`).
    No other wildcard: a pattern matched as text (fnmatch) read `[2001:db8::1]` as a character class trusting
    host `0`, this machine."""

    host: str  # a name or an IP address, compared whole (or, with `subdomains`, the name the host ends in)
    port: int | None = None  # None: any port
    subdomains: bool = False

    @classmethod
    def parse(cls, entry: str) -> ServerPattern:
        """The pattern `entry` writes; ValueError saying how to write it when it is none."""
        text = entry.strip().lower()
        host, port = text, None
        if text.startswith("["):
            inside, bracket, rest = text[1:].partition("]")
            host = inside if bracket and (not rest or rest.startswith(":")) else ""
            port = rest[1:] if rest else None
            try:
                ipaddress.IPv6Address(host)
            except ValueError:
                host = ""
        elif text.count(":") == 1:
            host, port = text.split(":")
        elif ":" in text:
            host = ""  # an IPv6 address without brackets: where its port starts would be a guess
        subdomains = host.startswith("*.")
        name = host[2:] if subdomains else host
        port_ok = port is None or (port.isdigit() and 0 < int(port) < 65536)
        # An IPv6 address (checked above) or dot-separated labels: no `*`, `?` or `[` anywhere.
        name_ok = (":" in name and not subdomains) or all(_HOST_LABEL.fullmatch(label) for label in name.split("."))
        if not (name and port_ok and name_ok):
            raise ValueError(f"ALLOWED_SERVERS entry {entry.strip()[:80]!r} is not host[:port]: write a name or an "
                             "address, a port if only that port is allowed, an IPv6 address in brackets and *. "
                             "for subdomains (berths.example.org, *.example.org, 10.0.0.5:8000, "
                             "[2001:db8::1]:8000)")
        return cls(_host(name), int(port) if port else None, subdomains)

    def matches(self, host: str, port: int) -> bool:
        host = _host(host)
        named = host.endswith("." + self.host) if self.subdomains else host == self.host
        return named and self.port in (None, port)


@dataclass(frozen=True)
class ServerPolicy:
    """Which servers the app may connect to on a visitor's behalf."""

    trusted: frozenset[tuple[str, int]] = frozenset()  # (host, port) of the servers the Space names itself
    allowed: tuple[ServerPattern, ...] = ()  # ALLOWED_SERVERS
    custom: bool = True  # CUSTOM_SERVERS: any other server with public addresses
    timeout_s: float = 10.0  # for resolving a host

    @classmethod
    def build(cls, trusted_urls: Iterable[str | None], allowed: str | Iterable[str] = (), *,
              custom: bool = True) -> ServerPolicy:
        """A policy trusting `trusted_urls` (None entries skipped) and the comma-separated `allowed` entries;
        ValueError naming an entry that is not `host[:port]` (the app refuses to start with it)."""
        entries = allowed.split(",") if isinstance(allowed, str) else list(allowed)
        trusted = frozenset((_host(host), port) for host, port in (origin(clean_url(u)) for u in trusted_urls if u))
        return cls(trusted, tuple(ServerPattern.parse(e) for e in entries if e.strip()), custom)

    def trusts(self, host: str, port: int) -> bool:
        """A server the Space or its operator named: used without the address check."""
        return (_host(host), port) in self.trusted or any(p.matches(host, port) for p in self.allowed)

    def admit(self, url: str) -> str:
        """The cleaned URL if the app may use it, checked now (DNS included); ServerRefused otherwise.

        Connections are checked again as they open; this first check lets a form refuse before anything starts.
        """
        cleaned = clean_url(url)
        host, port = origin(cleaned)
        if not self.trusts(host, port):
            self.addresses(host, port)
        return cleaned

    def addresses(self, host: str, port: int) -> list[str]:
        """Where to dial `host`: itself when trusted, else its resolved addresses, all of them public."""
        host = host.strip("[]").lower()
        if self.trusts(host, port):
            return [host]
        if not self.custom:
            raise ServerRefused(NOT_ALLOWED)
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            raise ServerRefused(UNREACHABLE) from None
        return self._checked(infos)

    async def addresses_async(self, host: str, port: int) -> list[str]:
        """`addresses` without blocking the event loop."""
        host = host.strip("[]").lower()
        if self.trusts(host, port):
            return [host]
        if not self.custom:
            raise ServerRefused(NOT_ALLOWED)
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), self.timeout_s)
        except (OSError, UnicodeError, TimeoutError):
            raise ServerRefused(UNREACHABLE) from None
        return self._checked(infos)

    @staticmethod
    def _checked(infos: list) -> list[str]:
        found = list(dict.fromkeys(str(info[4][0]) for info in infos))
        # One closed address among the answers refuses the host: a name must not mix public and private targets.
        if not found or not all(public_address(a) for a in found):
            raise ServerRefused(NOT_ALLOWED)
        return found


# -- HTTP: httpx transports whose connections dial only what the policy allowed ------------------------------------

class _GuardedSyncBackend(httpcore.SyncBackend):
    def __init__(self, policy: ServerPolicy):
        self.policy = policy

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable | None = None) -> httpcore.NetworkStream:
        failure: Exception | None = None
        for address in self.policy.addresses(host, port):
            try:
                return super().connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:
                failure = exc
        raise failure or httpcore.ConnectError(UNREACHABLE)


class _GuardedAsyncBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, policy: ServerPolicy):
        self.policy, self._inner = policy, httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable | None = None) -> httpcore.AsyncNetworkStream:
        failure: Exception | None = None
        for address in await self.policy.addresses_async(host, port):
            try:
                return await self._inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:
                failure = exc
        raise failure or httpcore.ConnectError(UNREACHABLE)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable | None = None) -> httpcore.AsyncNetworkStream:
        raise ServerRefused(NOT_ALLOWED)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def http_client(policy: ServerPolicy | None, *, timeout_s: float, verify: ssl.SSLContext | bool = True,
                max_bytes: int = ANSWER_MAX_BYTES, max_s: float = ANSWER_MAX_S, **options: Any) -> httpx.Client:
    """An httpx client that follows no redirect, reads at most `max_bytes` within `max_s` per answer, and, under
    a `policy`, dials only addresses it allows (no proxy from the environment either: a proxy would dial for us).
    """
    context = _context(verify)
    if policy is None:
        client = httpx.Client(verify=context, timeout=timeout_s, follow_redirects=False, **options)
    else:
        transport = httpx.HTTPTransport(verify=context)
        # httpx builds its pool without a way to pass a network backend; this one replaces it before first use.
        transport._pool = httpcore.ConnectionPool(ssl_context=context, network_backend=_GuardedSyncBackend(policy))
        client = httpx.Client(transport=transport, timeout=timeout_s, follow_redirects=False, **options)
    bound_answers(client, max_bytes, max_s)
    return client


def async_http_client(policy: ServerPolicy | None, *, verify: ssl.SSLContext | bool = True,
                      max_bytes: int = ANSWER_MAX_BYTES, max_s: float = ANSWER_MAX_S,
                      **options: Any) -> httpx.AsyncClient:
    """`http_client` for asyncio."""
    context = _context(verify)
    if policy is None:
        client = httpx.AsyncClient(verify=context, follow_redirects=False, **options)
    else:
        transport = httpx.AsyncHTTPTransport(verify=context)
        transport._pool = httpcore.AsyncConnectionPool(ssl_context=context,
                                                       network_backend=_GuardedAsyncBackend(policy))
        client = httpx.AsyncClient(transport=transport, follow_redirects=False, **options)
    bound_answers(client, max_bytes, max_s)
    return client


def _context(verify: ssl.SSLContext | bool) -> ssl.SSLContext:
    if isinstance(verify, ssl.SSLContext):
        return verify
    return _default_context() if verify else httpx.create_ssl_context(verify=False)


@functools.cache
def _default_context() -> ssl.SSLContext:
    """Loading the CA bundle costs about 30 ms of CPU: once per process, not per client."""
    return httpx.create_ssl_context()


# -- WebSocket: openenv opens its socket with `websockets`; a guarded session hands it one already dialled ---------

# The policy of the session connecting on this task, set by agent.session around openenv's connect.
CURRENT_POLICY: contextvars.ContextVar[ServerPolicy | None] = contextvars.ContextVar("server_policy", default=None)


async def open_socket(policy: ServerPolicy, host: str, port: int, timeout_s: float) -> socket.socket:
    """A TCP socket connected to an address of `host` that `policy` allows."""
    loop = asyncio.get_running_loop()
    for address in await policy.addresses_async(host, port):
        # A checked address is an IP literal (no lookup here); a trusted host may have several.
        for family, kind, proto, _, target in await loop.getaddrinfo(address, port, type=socket.SOCK_STREAM):
            sock = socket.socket(family, kind, proto)
            sock.setblocking(False)
            try:
                await asyncio.wait_for(loop.sock_connect(sock, target), timeout_s)
                return sock
            except (OSError, TimeoutError):
                sock.close()
    raise ConnectionError(UNREACHABLE)


def guard_websockets(module: ModuleType, name: str = "ws_connect") -> None:
    """Wrap `module.<name>` (websockets' `connect`) so a connection made under a policy (`CURRENT_POLICY`) uses a
    socket `open_socket` dialled; without a policy it is the plain connect. websockets follows no redirect on a
    socket it was given. Idempotent."""
    original = getattr(module, name)
    if getattr(original, "server_guarded", False):
        return

    async def connect(uri: str, **options: Any) -> Any:
        policy = CURRENT_POLICY.get()
        if policy is not None:
            parts = urlsplit(uri)
            host, port = origin(uri)
            options.pop("proxy", None)
            options["sock"] = await open_socket(policy, host, port, float(options.get("open_timeout") or 10.0))
            if parts.scheme.lower() == "wss":
                options.setdefault("server_hostname", host)
        return await original(uri, **options)

    connect.server_guarded = True  # type: ignore[attr-defined]
    setattr(module, name, connect)
