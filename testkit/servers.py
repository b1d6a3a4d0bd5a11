"""`python -m berth_env` in a child process, for tests and benchmarks that need a server outside this interpreter."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from testkit.warm_python import WarmPython

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def berth_server(*packs: Path, timeout_s: float = 60.0, python: WarmPython | None = None) -> Iterator[str]:
    """Start `python -m berth_env` (serving the bundled pack plus `packs`), wait until /healthz answers, yield its
    URL. Given a warm interpreter (tests/conftest.py's `warm_python`), the server skips Python's start-up."""
    port = free_port()
    args = ["--port", str(port)]
    for pack in packs:
        args += ["--tasks-dir", str(pack)]
    if python is not None:
        server = python.popen("berth_env", *args)
    else:
        server = subprocess.Popen([sys.executable, "-m", "berth_env", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if server.poll() is not None:
                said = server.output("stderr") if python is not None else server.stderr.read().decode()
                raise RuntimeError(f"python -m berth_env exited: {said[-2000:]}")
            try:
                httpx.get(f"{url}/healthz", timeout=2).raise_for_status()
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise RuntimeError("python -m berth_env did not start") from None
                time.sleep(0.2)
        yield url
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=15)
