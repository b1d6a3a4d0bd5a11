"""The share pages' routes, served by the app's own process beside Gradio (app.py registers them on a FastAPI app,
then mounts Gradio at `/`, the documented way; routes registered first are matched first):

- `GET /r/<episode_id>`: the rollout's page (viewer/share/page.py), for people and link crawlers alike;
- `GET /r/<episode_id>.png`: its share image, 1200 x 630 (viewer/chart/card.py), the page's og:image;
- `GET /r/<episode_id>.json`: the record itself, the page's "Raw JSON";
- `GET /r/<episode_id>/step/<k>` and `/turn/<n>` (+ `.png`): the page opened at that draft or turn, and its image
  (viewer/share/steps.py); a step the rollout does not have gets the 404 of a rollout that is not there.

Every other path under `/r/` is a link to no rollout.

A finished rollout never changes, so its answers carry an ETag (a hash of the record, the page's version and the
app's) and `Cache-Control: public` with a long max-age; a request that names the ETag gets 304. A running
episode's page and image say so and are never cached. A link that names no rollout, well-formed or not, gets one
and the same 404 page, which does not repeat the id.

Every link on a page (og:url, og:image, canonical, the buttons) is built on the arena's public address
(rollouts.links: ARENA_URL, the Space's host, else the address `python app.py` listens on), never on the request's
`Host`, so one page serves every visitor and a shared cache in front may keep it. Only where no address is known
(an app listening on every interface, no ARENA_URL) are the links built on the address the visitor used; those
pages then say `Vary: Host` and are kept per address.

The work is kept off everything Gradio needs: each request's lookup and rendering runs in a worker thread under a
small limiter of its own (never anyio's default pool, which runs Gradio's handlers), pictures are rasterised in a
helper process (viewer/chart/raster.py; resvg holds the GIL while it draws), rendered pages and images are kept in small
caches, lookups and renders are paced so that they hold this process's GIL about `RENDER_SHARE` of the time at
most however many arrive (a record's lookup and page take 10-30 ms of Python; Gradio's handlers need the GIL too),
and past `MAX_WAITING` requests waiting their turn the routes answer 503 at once. A page or image already kept is
answered without a lookup and without waiting on the pace: it costs next to nothing. What is kept is bounded in
entries and in bytes (a record's page is bounded too: viewer/share/page.py shortens a long transcript).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import Response

from agent import APP_VERSION
from rollouts.archive import RolloutNotFound
from rollouts.links import app_link, rollout_page
from rollouts.record import Record
from rollouts.schema import valid_episode_id
from rollouts.sources import SourceError
from viewer.chart.card import share_svg
from viewer.chart.raster import Rasteriser
from viewer.context import AppContext
from viewer.records import Found
from viewer.share.page import PageLinks, missing_page, optimal_cost, running_page
from viewer.share.page import rollout_page as page_html
from viewer.share.steps import StepAt, card_step, step_at

PAGE_VERSION = "1"        # bump when the page or the image draw differently: every ETag changes with it
FINISHED = "public, max-age=604800, immutable"   # a week: a finished rollout's image and JSON never change
# ...but its page shows the flags on its steps, which visitors add: kept a few minutes, its ETag naming the flags.
FLAGGABLE = "public, max-age=300"
# ...unless its task is not served yet (the tasks dataset still loading): its page, drawn without a chart, is kept an
# hour, and the ETag changes once the task arrives.
WITHOUT_TASK = "public, max-age=3600"
NOT_CACHED = "no-store"
SECURITY = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "strict-origin-when-cross-origin",
            # No script may run on these pages, whatever a record holds; styles and the inline SVG are the page's.
            "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
                                       "base-uri 'none'; form-action 'none'"}
PAGE_WORKERS = 2           # requests for pages answered at once (threads of their own, not Gradio's)
IMAGE_WORKERS = 2          # images at once (the helper draws one at a time; the other builds its SVG)
RENDER_SHARE = 0.3         # the share of the time lookups and renders may take, under a flood of uncached requests
MAX_WAITING = 256          # requests waiting for a worker beyond which the routes say "busy" (503) at once
PAGES_KEPT, IMAGES_KEPT = 64, 128
PAGE_BYTES_KEPT, IMAGE_BYTES_KEPT = 24 << 20, 16 << 20   # whatever the entries, the bytes they hold at most
# `<id>`, `<id>/step/<k>` or `<id>/turn/<n>`, then `.png` or `.json` or nothing (a step has no JSON of its own)
_NAME = re.compile(r"(?P<id>[^/]*?)(?:/(?P<at>step|turn)/(?P<n>[1-9][0-9]{0,5}))?(?P<kind>\.png|\.json)?")
KINDS = {None: "page", ".png": "image", ".json": "json"}
MEDIA = {"page": "text/html; charset=utf-8", "image": "image/png", "json": "application/json",
         "text": "text/plain; charset=utf-8"}


@dataclass
class Answer:
    """A route's answer, built in a worker thread and turned into a Response on the event loop."""

    status: int
    body: bytes
    kind: str
    etag: str | None = None
    cache: str = NOT_CACHED
    headers: dict[str, str] = field(default_factory=dict)

    def response(self, head_only: bool, vary_host: bool = False) -> Response:
        headers = {**SECURITY, **self.headers, "Cache-Control": self.cache}
        if vary_host and self.kind == "page":  # its links name the address the visitor used
            headers["Vary"] = "Host"
        if self.etag:
            headers["ETag"] = self.etag
        body = b"" if head_only or self.status == 304 else self.body
        if head_only and self.status != 304:
            headers["Content-Length"] = str(len(self.body))
        return Response(body, status_code=self.status, headers=headers, media_type=MEDIA[self.kind])


@dataclass(frozen=True)
class _Kept:
    """A finished rollout's page or image as kept: answered again without reading the record, while the task's
    presence in the pack (which changes the page and its ETag) is what it was."""

    answer: Answer
    task_id: str
    task_known: bool

    def again(self, if_none_match: str) -> Answer:
        kept = self.answer
        if kept.etag in _tags(if_none_match):
            return Answer(304, b"", kept.kind, kept.etag, kept.cache)
        return kept


class _Lru:
    """A few answers by key, the least recently used going first, at most `size` of them holding `max_bytes`
    together (a value larger than that is not kept); thread-safe."""

    def __init__(self, size: int, max_bytes: int | None = None) -> None:
        self.size, self.max_bytes = size, max_bytes
        self.bytes = 0
        self._items: OrderedDict[Any, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key][0]

    def put(self, key: Any, value: Any, nbytes: int = 0) -> None:
        with self._lock:
            if key in self._items:
                self.bytes -= self._items.pop(key)[1]
            if self.max_bytes is not None and nbytes > self.max_bytes:
                return
            self._items[key] = (value, nbytes)
            self.bytes += nbytes
            while len(self._items) > self.size or (self.max_bytes is not None and self.bytes > self.max_bytes):
                self.bytes -= self._items.popitem(last=False)[1][1]


class _Pace:
    """Work that may take at most `share` of the time: after each piece, the next one waits in proportion to the
    CPU time it took (a Hub download's wait costs none). Under a flood, renders thus leave the GIL to Gradio most
    of the time; a single request never waits."""

    def __init__(self, share: float) -> None:
        self.rest = 1 / share - 1
        self._free_at = 0.0
        self._lock = threading.Lock()

    def run(self, work: Any, *args: Any) -> Any:
        with self._lock:
            wait = self._free_at - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        started = time.thread_time()
        try:
            return work(*args)
        finally:
            spent = time.thread_time() - started
            with self._lock:
                self._free_at = max(self._free_at, time.monotonic()) + spent * self.rest


class SharePages:
    """The routes (`router`) and what they keep: caches, limiters, the raster helper (`close` stops it)."""

    def __init__(self, ctx: AppContext, *, rasteriser: Rasteriser | None = None) -> None:
        self.ctx = ctx
        self.raster = rasteriser or Rasteriser()
        self.pages, self.images = _Lru(PAGES_KEPT, PAGE_BYTES_KEPT), _Lru(IMAGES_KEPT, IMAGE_BYTES_KEPT)
        # episode id -> (the record object's id, its hash): a record hashed once while the record cache holds it,
        # and never kept alive here (a 24 MB record is far larger in memory than on disk)
        self._etags = _Lru(PAGES_KEPT)
        self._limits = {"page": anyio.CapacityLimiter(PAGE_WORKERS), "json": anyio.CapacityLimiter(PAGE_WORKERS),
                        "image": anyio.CapacityLimiter(IMAGE_WORKERS)}
        self.pace = _Pace(RENDER_SHARE)
        self.waiting = 0   # changed on the event loop only
        self.router = APIRouter()
        self.router.add_api_route("/r/{name:path}", self.serve, methods=["GET", "HEAD"], include_in_schema=False)

    def close(self) -> None:
        self.raster.close()

    async def serve(self, name: str, request: Request) -> Response:
        match = _NAME.fullmatch(name)
        kind = KINDS[match.group("kind")] if match else "page"
        episode_id = match.group("id") if match else ""
        step = (match.group("at"), int(match.group("n"))) if match and match.group("at") else None
        head_only = request.method == "HEAD"
        # Links on the public address; only where none is known, on the address the visitor used (`Vary: Host`).
        host_bound = self.ctx.settings.public_url is None
        base = self.ctx.link_base(str(request.base_url))
        if not valid_episode_id(episode_id) or (step is not None and kind == "json"):
            return self.missing(base).response(head_only, host_bound)
        kept = self.kept(episode_id, kind, base, request.headers.get("if-none-match", ""), step)
        if kept is not None:  # on the event loop: a dict lookup, never queued behind renders waiting on the pace
            return kept.response(head_only, host_bound)
        if self.waiting >= MAX_WAITING:
            return Answer(503, b"The arena is busy: try again in a moment.", "text",
                          headers={"Retry-After": "5"}).response(head_only)
        self.waiting += 1
        try:
            answer = await anyio.to_thread.run_sync(self.answer, episode_id, kind, base,
                                                    request.headers.get("if-none-match", ""), step,
                                                    limiter=self._limits[kind])
        finally:
            self.waiting -= 1
        return answer.response(head_only, host_bound)

    # -- in a worker thread ------------------------------------------------------------------------------------

    def answer(self, episode_id: str, kind: str, base: str, if_none_match: str = "",
               step: tuple[str, int] | None = None) -> Answer:
        """The answer to `/r/<episode_id>` (+ `.png` or `.json`) for links built on `base`; `step` ("step", k) or
        ("turn", n) for that step's page or image."""
        if not self.ctx.public(episode_id):  # an undecided random match's side: not public yet
            return self.missing(base)
        found = self.ctx.records.find(episode_id)
        if found.running:  # a running episode's steps are still being taken: only its own page and image
            return self.running(found.run, kind, base) if step is None else self.missing(base)
        kept = self.kept(episode_id, kind, base, if_none_match, step)
        if kept is not None:
            return kept
        # One paced piece of work, so that a request never waits on its own lookup's share of the time.
        return self.pace.run(self.fresh, found, kind, base, if_none_match, step)

    def kept(self, episode_id: str, kind: str, base: str, if_none_match: str = "",
             step: tuple[str, int] | None = None) -> Answer | None:
        """A finished rollout's page or image as kept (no lookup, no render, no pace), or None."""
        if kind == "json":
            return None
        shown = self.ctx.archive.flags_of(episode_id, refresh=False) if kind == "page" else []
        kept = self._cache(kind).get(self._key(episode_id, kind, base, step, _flag_marks(shown)))
        if kept is not None and kept.task_known == (self.ctx.task_for(kept.task_id, None) is not None):
            return kept.again(if_none_match)
        return None

    def fresh(self, found: Found, kind: str, base: str, if_none_match: str = "",
              step: tuple[str, int] | None = None) -> Answer:
        """A finished rollout's answer from its record: looked up, hashed and drawn (a page or image then kept)."""
        episode_id = found.episode_id
        try:
            view, row = found.record, found.row
        except RolloutNotFound:
            return self.missing(base)
        except SourceError:
            return Answer(503, b"This rollout could not be read just now: try again in a moment.", "text",
                          headers={"Retry-After": "30"})
        at = step_at(view, *step) if step is not None else None
        if step is not None and at is None:  # a step it does not have: the same 404 as a rollout that is not there
            return self.missing(base)
        record, task_id = view.data, view.task_id
        task = self.ctx.task_for(task_id, None)
        flags = self.ctx.archive.flags_of(episode_id) if kind == "page" else []
        marks = _flag_marks(flags)
        etag = self._etag(episode_id, record, kind, task is not None, f"{base}:{marks}", at.path if at else "")
        cache_control = FINISHED if task is not None or kind == "json" else WITHOUT_TASK
        if kind == "page" and cache_control == FINISHED:
            cache_control = FLAGGABLE
        if etag in _tags(if_none_match):
            return Answer(304, b"", kind, etag, cache_control)
        if kind == "json":
            body = json.dumps(record, ensure_ascii=False).encode("utf-8")
            return Answer(200, body, kind, etag, cache_control,
                          {"Content-Disposition": f'inline; filename="{episode_id}.json"'})
        body = (self._image(view, task, at) if kind == "image"
                else page_html(view, row, task, self.links(episode_id, base, at=at, task_id=task_id),
                               flags, at).encode("utf-8"))
        answer = Answer(200, body, kind, etag, cache_control)
        # Kept under the flags this page shows (read once, above): a new flag or a hide draws it anew.
        self._cache(kind).put(self._key(episode_id, kind, base, step, marks),
                              _Kept(answer, task_id, task is not None), len(body))
        return answer

    @staticmethod
    def _key(episode_id: str, kind: str, base: str, step: tuple[str, int] | None, marks: str) -> tuple:
        """What an answer is kept under: a page's names the flags it shows (`marks`; "" for an image)."""
        return (*_key(episode_id, kind, base, step), marks if kind == "page" else "")

    def _cache(self, kind: str) -> _Lru:
        return self.images if kind == "image" else self.pages

    def links(self, episode_id: str, base: str, *, running: bool = False, at: StepAt | None = None,
              task_id: str = "") -> PageLinks:
        """The page's links; given its `task_id`, a compare with the best other rollout of that task (the best when
        the page was drawn: a kept page may name one since beaten, still a rollout of the task)."""
        page = rollout_page(episode_id, base)
        opened = f"&step={at.draft.index}" if at is not None and at.draft is not None else ""
        arena = app_link(f"episode={episode_id}" if running else f"tab=browse&rollout={episode_id}{opened}", base)
        here = page + (at.path if at is not None else "")
        best = self.ctx.archive.same_task(task_id, exclude=episode_id, limit=1) if task_id else []
        step = f"&step={at.draft.index}" if at is not None and at.draft is not None else ""
        compare = app_link(f"tab=browse&compare={episode_id},{best[0]['episode_id']}{step}", base) if best else ""
        return PageLinks(page=here, image=f"{here}.png", arena=arena, home=f"{base}/",
                         raw=None if running else f"{page}.json", rollout=page, compare=compare)

    def missing(self, base: str) -> Answer:
        """One answer for every link that names no rollout: the same body whatever the id was."""
        body = self.pages.get(("missing", base))
        if body is None:
            body = missing_page(f"{base}/").encode("utf-8")
            self.pages.put(("missing", base), body, len(body))
        return Answer(404, body, "page", headers={"X-Robots-Tag": "noindex"})

    def running(self, run: Any, kind: str, base: str) -> Answer:
        """A running episode: its page as it stands (never cached), its image the latest draft, no JSON yet."""
        if kind == "json":
            return self.missing(base)
        events = list(run.events)
        task = self.ctx.task_for(run.task_id, None)
        if kind == "page":
            body = self.pace.run(running_page, run.model, run.task_id, events, task,
                                 self.links(run.episode_id, base, running=True))
            return Answer(200, body.encode("utf-8"), kind)
        drafts = Record.from_events(events).drafts
        key = (run.episode_id, "running", len(drafts))
        body = self.images.get(key)
        if body is None:
            plan = drafts[-1].plan if drafts else None
            body = self.raster.png(self.pace.run(lambda: share_svg(task, plan, model=run.model, task_id=run.task_id,
                                                                   status="still running")))
            self.images.put(key, body, len(body))
        return Answer(200, body, kind)

    def _image(self, view: Record, task: Mapping[str, Any] | None, at: StepAt | None = None) -> bytes:
        grade = view.grade
        if at is not None:  # that draft and what the server said of it
            draft = at.draft
            svg = share_svg(task, draft.plan if draft else None, model=view.model or "?", task_id=view.task_id,
                            tier=view.task.get("difficulty"), reward=draft.reward if draft else None,
                            feasible=draft.feasible if draft else None, cost=draft.cost if draft else None,
                            optimal_cost=optimal_cost(view, task), step=card_step(view, at),
                            status=None if draft and draft.feasible is not None else "no verdict")
            return self.raster.png(svg)
        svg = share_svg(task, view.final_plan, model=view.model or "?", task_id=view.task_id,
                        tier=view.task.get("difficulty"), reward=view.reward,
                        feasible=grade.get("feasible") if grade else None, cost=view.cost,
                        optimal_cost=optimal_cost(view, task), status=None if grade else "not submitted")
        return self.raster.png(svg)

    def _etag(self, episode_id: str, record: Mapping[str, Any], kind: str, task_known: bool, base: str,
              step: str = "") -> str:
        kept = self._etags.get(episode_id)
        if kept is not None and kept[0] == id(record):
            digest = kept[1]
        else:
            text = json.dumps(record, sort_keys=True, ensure_ascii=False, default=str)
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
            self._etags.put(episode_id, (id(record), digest))
        marks = f"{digest}:{PAGE_VERSION}:{APP_VERSION}:{kind}:{int(task_known)}:{base}:{step}"
        return f'"{hashlib.sha256(marks.encode()).hexdigest()[:32]}"'


def _key(episode_id: str, kind: str, base: str, step: tuple[str, int] | None = None) -> tuple:
    """What a finished rollout's answer is kept under: a page's links name `base`, the public address (the same
    for every request) unless none is known; an image names no address. A step's answers are kept apart."""
    kept = (episode_id, kind, base if kind == "page" else None)
    return kept if step is None else (*kept, step)


def _flag_marks(flags: list[dict]) -> str:
    return ",".join(f["flag_id"] for f in flags)


def _tags(header: str) -> set[str]:
    """The entity tags an If-None-Match header names (weak or strong: a page compares them weakly)."""
    return {tag.strip().removeprefix("W/") for tag in header.split(",") if tag.strip()}
