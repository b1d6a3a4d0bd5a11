"""The leaderboard as flat files, served beside the share pages (app.py registers the router before mounting Gradio):

- `GET /board.json`: every figure of every model, the objects of `python -m agent board --json` and
  `/browse_leaderboard` (rollouts.board_text.board_json), as one JSON list;
- `GET /board.csv`: the same as CSV (rollouts.board_files.board_csv), one row per model;
- `GET /board.svg` and `GET /board.png`: the board's share card, its cost x reward frontier (rollouts.frontier,
  drawn by rollouts.board_plot, 1200 x 630), the figure `python -m agent board --plot` writes and Browse draws; the
  PNG rasterised by the share pages' raster helper (viewer/chart/raster.py), the last few kept by their SVG's hash.

Browse's filters are the query parameters, under the keys of Browse's own URL (rollouts.filters.FILTERS: `model`
repeated for several, `tier`, `from`, ...; a Browse link's query works as it is, its other keys ignored), plus
`same_tasks=1` for only the tasks every model played. A value that makes no sense is a 400 naming it, not a board
over other rows than asked.

Cached as the share pages are (viewer/share/routes.py): an ETag (a hash of the body) and a 304 for a request naming
it. A board changes as rollouts arrive, so it is kept a minute (`Cache-Control: public, max-age=60`), not a week.
The board is computed in a worker thread of its own, never in anyio's default pool (Gradio's handlers run there),
and the archive remembers it per filter set until the rows change, so a repeated request costs a hash.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import Response

from rollouts.board_files import board_csv
from rollouts.board_plot import frontier_svg, subtitle
from rollouts.board_text import board_json
from rollouts.filters import Filters
from rollouts.frontier import frontier
from rollouts.raster import svg_png
from viewer.chart.raster import Rasteriser
from viewer.context import AppContext
from viewer.share.routes import SECURITY

BOARD_CACHE = "public, max-age=60"
WORKERS = 2           # boards computed at once
MAX_WAITING = 64      # requests waiting for a worker beyond which the routes say "busy" (503) at once
MEDIA = {"json": "application/json", "csv": "text/csv; charset=utf-8", "svg": "image/svg+xml",
         "png": "image/png"}
PICTURES_KEPT = 16
YES = ("1", "true", "yes", "on")


class BoardFiles:
    """The routes (`router`): `/board.json` and `/board.csv` over the app's archive."""

    def __init__(self, ctx: AppContext, *, rasteriser: Rasteriser | None = None) -> None:
        self.ctx = ctx
        self.raster = rasteriser  # the share pages' helper (app.py passes it); None: drawn in the worker thread
        self._pictures: OrderedDict[str, bytes] = OrderedDict()
        self._pictures_lock = threading.Lock()
        self._limit = anyio.CapacityLimiter(WORKERS)
        self.waiting = 0  # changed on the event loop only
        self.router = APIRouter()
        for kind in MEDIA:
            self.router.add_api_route(f"/board.{kind}", self._route(kind), methods=["GET", "HEAD"],
                                      include_in_schema=False)

    def _route(self, kind: str) -> Callable[[Request], Awaitable[Response]]:
        async def serve(request: Request) -> Response:
            return await self.serve(kind, request)
        return serve

    async def serve(self, kind: str, request: Request) -> Response:
        head_only = request.method == "HEAD"
        params = parse_qs(request.url.query, keep_blank_values=False)
        filters = Filters.from_query(params)
        if filters.problems:
            return _text(400, "The board's filters did not make sense: " + "; ".join(filters.problems) + ".")
        same_tasks = (params.get("same_tasks") or [""])[-1].strip().lower() in YES
        if self.waiting >= MAX_WAITING:
            return _text(503, "The arena is busy: try again in a moment.", {"Retry-After": "5"})
        self.waiting += 1
        try:
            body = await anyio.to_thread.run_sync(self.body, kind, filters, same_tasks, limiter=self._limit)
        finally:
            self.waiting -= 1
        etag = f'"{hashlib.sha256(body).hexdigest()[:32]}"'
        headers = {**SECURITY, "Cache-Control": BOARD_CACHE, "ETag": etag}
        if kind == "csv":
            headers["Content-Disposition"] = 'attachment; filename="board.csv"'
        if etag in _tags(request.headers.get("if-none-match", "")):
            return Response(b"", status_code=304, headers=headers)
        if head_only:
            headers["Content-Length"] = str(len(body))
        return Response(b"" if head_only else body, headers=headers, media_type=MEDIA[kind])

    def body(self, kind: str, filters: Filters, same_tasks: bool) -> bytes:
        """The board over the filtered rows as this kind of file (in a worker thread)."""
        lines = self.ctx.archive.board(filters, same_tasks=same_tasks)
        if kind == "csv":
            return board_csv(lines)
        if kind in ("svg", "png"):
            svg = frontier_svg(frontier(lines), subtitle=subtitle(lines))
            return svg.encode("utf-8") if kind == "svg" else self.picture(svg)
        return json.dumps(board_json(lines), ensure_ascii=False, allow_nan=False).encode("utf-8")

    def picture(self, svg: str) -> bytes:
        """The PNG of a frontier's SVG, kept by the SVG's hash: the same board costs one rasterisation."""
        key = hashlib.sha256(svg.encode("utf-8")).hexdigest()
        with self._pictures_lock:
            kept = self._pictures.get(key)
        if kept is None:
            kept = self.raster.png(svg) if self.raster is not None else svg_png(svg)
            with self._pictures_lock:
                self._pictures[key] = kept
                while len(self._pictures) > PICTURES_KEPT:
                    self._pictures.popitem(last=False)
        return kept


def _text(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(message.encode("utf-8"), status_code=status, media_type="text/plain; charset=utf-8",
                    headers={**SECURITY, "Cache-Control": "no-store", **(headers or {})})


def _tags(header: str) -> set[str]:
    return {tag.strip().removeprefix("W/") for tag in header.split(",") if tag.strip()}
