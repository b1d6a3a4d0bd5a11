"""`python -m berth_env [--host H] [--port P] [--tasks-dir DIR ...]`: serve the berth environment over HTTP/WS."""

from __future__ import annotations

import argparse

import uvicorn

from berth_env.embedded import WS_PING_INTERVAL_S, WS_PING_TIMEOUT_S
from berth_env.settings import add_tasks_dirs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m berth_env", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default: loopback only; 0.0.0.0 to serve the network)")
    parser.add_argument("--port", type=int, default=8011, help="port to listen on (default: 8011)")
    parser.add_argument("--tasks-dir", action="append", default=[], metavar="DIR",
                        help="an extra task pack directory to serve (repeatable; added to BERTH_TASKS_DIR)")
    args = parser.parse_args(argv)
    if args.tasks_dir:
        # The pack loader reads BERTH_TASKS_DIR on its first (cached) load, which happens in create_berth_app.
        add_tasks_dirs(args.tasks_dir)
    from berth_env.server import create_berth_app

    uvicorn.run(create_berth_app(), host=args.host, port=args.port, log_level="info",
                ws_ping_interval=WS_PING_INTERVAL_S, ws_ping_timeout=WS_PING_TIMEOUT_S)


if __name__ == "__main__":
    main()
