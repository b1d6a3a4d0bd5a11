"""What the browse benches share: a measurement run in a fresh process, and how a duration is printed."""

from __future__ import annotations

import json
import subprocess
from typing import Any


def worker_result(command: list[str], timeout: float, **options: Any) -> dict:
    """Run a worker process that prints its figures as JSON on its last line: those figures, or
    {"timeout": seconds} / {"failed": its last stderr line}. Each engine gets a fresh process, so no cache, import
    or heap of one measurement is in another's figures."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, **options)
    except subprocess.TimeoutExpired:
        return {"timeout": timeout}
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["?"]
        said = [line for line in lines if "Error" in line] or lines  # the error, not a trailing "see also"
        return {"failed": said[-1][:200]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def ms(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value * 1000:,.0f} ms" if value < 10 else f"{value:,.1f} s"
