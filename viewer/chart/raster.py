"""SVG to PNG for the app's server, drawn by resvg with the bundled fonts through rollouts.raster's `svg_png` (the
one place a picture is rasterised, low enough for the CLI's `board --plot` too).

resvg holds the GIL for the whole of a render (about 120 ms for a share card), and a server's event loop and
Gradio's workers would wait that long for it, render after render, under a flood of share-image requests. So the
server rasterises in a helper process of its own (`Rasteriser`): one render at a time, over a pipe, at a lower
scheduling priority than the server. A helper that dies is started afresh for the next picture, however often that
happens; a picture is drawn in this process only when its own helper died twice while drawing it, or no helper
could start (then another start is tried `START_AGAIN_S` later). The helper runs this module (`python -m
viewer.chart.raster`) and imports nothing else of the project but rollouts.raster, so it starts in a blink and
holds a few megabytes.
"""

from __future__ import annotations

import logging
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import BinaryIO

from rollouts.raster import FONT_DIR, FONT_FILES, svg_png

__all__ = ["FONT_DIR", "FONT_FILES", "HELPER", "RasterError", "Rasteriser", "serve", "svg_png"]

log = logging.getLogger(__name__)

RENDER_TIMEOUT_S = 30.0
START_AGAIN_S = 30.0   # after a helper could not start at all: each picture meanwhile is drawn here
HELPER = [sys.executable, "-m", "viewer.chart.raster"]
_ROOT = Path(__file__).resolve().parents[2]


class RasterError(RuntimeError):
    """The helper could not draw the SVG (its message says why), or did not answer in time."""


class Rasteriser:
    """SVG to PNG in a helper process, one render at a time (a lock); thread-safe."""

    def __init__(self, timeout_s: float = RENDER_TIMEOUT_S, command: list[str] | None = None) -> None:
        self.timeout_s = timeout_s
        self.command = command or HELPER
        self._process: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._start_again_at = 0.0  # after a helper could not start: until then, pictures are drawn here

    @property
    def in_process(self) -> bool:
        """Whether pictures are drawn in this process for now (no helper could start a moment ago)."""
        return time.monotonic() < self._start_again_at

    def png(self, svg: str) -> bytes:
        with self._lock:
            for attempt in (1, 2):  # a helper that died since the last render, or during this one, is started again
                if self.in_process:
                    return svg_png(svg)
                try:
                    helper = self._helper()
                except OSError as exc:
                    log.warning("the raster helper could not start (%s); drawing in this process for now", exc)
                    self._start_again_at = time.monotonic() + START_AGAIN_S
                    continue
                try:
                    return self._exchange(helper, svg.encode("utf-8"))
                except (OSError, EOFError) as exc:
                    self._stop()
                    if attempt == 2:  # this picture only: the next one starts a new helper
                        log.warning("the raster helper died twice drawing one picture (%s); drawn here", exc)
            return svg_png(svg)

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _helper(self) -> subprocess.Popen:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(self.command, cwd=_ROOT,
                                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        return self._process

    def _exchange(self, process: subprocess.Popen, svg: bytes) -> bytes:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(len(svg).to_bytes(8, "big") + svg)
        process.stdin.flush()
        deadline = time.monotonic() + self.timeout_s
        fd = process.stdout.fileno()
        status = _read(fd, 1, deadline)
        body = _read(fd, int.from_bytes(_read(fd, 8, deadline), "big"), deadline)
        if status != b"P":
            raise RasterError(body.decode("utf-8", "replace"))
        return body

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=5)


def _read(fd: int, size: int, deadline: float) -> bytes:
    """Exactly `size` bytes from a pipe before `deadline` (EOFError if the helper is gone; the helper is killed and
    restarted by the caller on a timeout too, since its answer would arrive out of step)."""
    chunks, left = [], size
    while left:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise EOFError("the raster helper did not answer in time")
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError("the raster helper exited")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def serve(source: BinaryIO, sink: BinaryIO) -> None:
    """The helper's loop: an SVG in (8-byte length, UTF-8), `P` + length + PNG out, or `E` + length + the error."""
    while True:
        head = source.read(8)
        if len(head) < 8:
            return  # the server closed the pipe (or exited): so does the helper
        svg = source.read(int.from_bytes(head, "big")).decode("utf-8", "replace")
        try:
            status, body = b"P", svg_png(svg)
        except Exception as exc:  # an SVG resvg refuses: said to the server, and the helper lives on
            status, body = b"E", f"{type(exc).__name__}: {exc}".encode()
        sink.write(status + len(body).to_bytes(8, "big") + body)
        sink.flush()


if __name__ == "__main__":
    # Below the server in the scheduler's eyes: on a machine of two cores, the app's own work comes first.
    os.nice(10)
    serve(sys.stdin.buffer, sys.stdout.buffer)
