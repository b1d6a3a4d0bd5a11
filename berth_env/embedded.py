"""Run the berth server inside this process: uvicorn in a daemon thread on a loopback port.

`embedded_url()` is what the app and the tests use when no `BERTH_ENV_URL` is set: one server per process, started
on first use. `start_server()` starts an independent one (benchmarks, tests that need a fresh server).
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass

import uvicorn
from fastapi import FastAPI

# The server pings each WebSocket client; a client busy for minutes (a slow model turn) still answers pings from
# its own event loop, but a generous timeout keeps a briefly starved client from losing its episode.
WS_PING_INTERVAL_S = 60.0
WS_PING_TIMEOUT_S = 600.0
START_TIMEOUT_S = 30.0


@dataclass
class RunningServer:
    """A started server: its base URL (`http://host:port`) and a way to stop it."""

    url: str
    server: uvicorn.Server
    thread: threading.Thread

    def stop(self, timeout_s: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout_s)


def start_server(host: str = "127.0.0.1", port: int = 0, app: FastAPI | None = None) -> RunningServer:
    """Start a berth server (or `app`) on `host:port` (0 = a free port); returns once it accepts connections."""
    if app is None:
        from berth_env.server import create_berth_app

        app = create_berth_app()
    # Bind first, so port 0 resolves to a real port before uvicorn starts and nobody can take it in between.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound_port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", ws_ping_interval=WS_PING_INTERVAL_S,
                            ws_ping_timeout=WS_PING_TIMEOUT_S, timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"berth-server-{bound_port}",
                              daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError(f"the berth server on {host}:{bound_port} stopped while starting")
        if time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the berth server on {host}:{bound_port} did not start in {START_TIMEOUT_S:.0f} s")
        time.sleep(0.02)
    url_host = f"[{host}]" if ":" in host else host
    if host in ("0.0.0.0", "::"):
        url_host = "127.0.0.1"
    return RunningServer(url=f"http://{url_host}:{bound_port}", server=server, thread=thread)


_embedded: RunningServer | None = None
_embedded_lock = threading.Lock()


def embedded_url() -> str:
    """The base URL of this process's own berth server, started on the first call (thread-safe)."""
    global _embedded
    with _embedded_lock:
        if _embedded is None or not _embedded.thread.is_alive():
            _embedded = start_server()
        return _embedded.url
