"""A TCP listener on loopback that counts every connection made to it and answers none: a service on the Space's
own network that a visitor's request must never reach."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Listener:
    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()


@contextmanager
def loopback_listener() -> Iterator[Listener]:
    server = Listener()
    try:
        yield server
    finally:
        server.sock.close()
