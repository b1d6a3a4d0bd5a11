"""Where links to the arena point: the one place that decides its public address and the shape of a rollout's link.

A rollout's share link is its own page, `/r/<episode_id>`, rendered on the server (viewer/share/page.py), so a
link crawler reads its Open Graph tags. On a Space, links are built on the Space's own `*.hf.space` host: the
`huggingface.co/spaces/<owner>/<name>` page wraps that host in an iframe and shows crawlers the Space's card, not
the rollout. The app's own URL keys (`?tab=browse&rollout=...`, `?episode=...`) stay links into the app.

The public address is, first found: `ARENA_URL` (set it where the Space has a custom domain, or for the CLI when
its rollouts are served elsewhere); `SPACE_HOST`, which a Space is given (a comma-separated list when a custom
domain is set, the `*.hf.space` host first); the host derived from `SPACE_ID` (owner/name, lower-cased, `/`, `_`
and `.` as `-`); for the app, the address it listens on (`GRADIO_SERVER_NAME` and `GRADIO_SERVER_PORT`, as
`python app.py` reads them). Never the `Host` a request names: anyone may send any, and a page built on it and
kept by a shared cache would send every reader to the sender's host. Only an app listening on every interface
(`0.0.0.0`, `::`) without `ARENA_URL` has no address to name; it builds links on the address each visitor used,
and its share pages say so (`Vary: Host`, viewer/share/routes.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import quote, urlencode

from rollouts import settings

ROLLOUT_PAGE = "/r/"
EVERY_INTERFACE = {"", "0.0.0.0", "::", "[::]"}  # a listening address that names no host a visitor can reach
_NOT_IN_HOST = re.compile(r"[/_.]")


def space_url(space_id: str) -> str:
    """The `https://<owner>-<name>.hf.space` address of a Space (the subdomain rule of the Hub's direct URLs)."""
    return f"https://{_NOT_IN_HOST.sub('-', space_id.strip().lower())}.hf.space"


def public_base(environ: Mapping[str, str] | None = None, listen: tuple[str, int] | None = None) -> str | None:
    """The arena's public address without a trailing slash, or None when none is known (see the module's
    docstring); `listen`: where the app listens (host, port), the address when nothing else names one."""
    arena_url = settings.ARENA_URL.get(environ)
    if arena_url:
        return arena_url
    host = settings.SPACE_HOST.get(environ)
    if host:
        return host if host.startswith(("http://", "https://")) else f"https://{host}"
    space_id = settings.SPACE_ID.get(environ)
    if space_id:
        return space_url(space_id)
    if listen is not None and listen[0].strip() not in EVERY_INTERFACE:
        host = listen[0].strip()
        return f"http://{f'[{host}]' if ':' in host and not host.startswith('[') else host}:{int(listen[1])}"
    return None


def rollout_page(episode_id: str, base: str | None = None) -> str:
    """A rollout's share page: `<base>/r/<episode_id>`, or the path alone without a base."""
    return f"{(base or '').rstrip('/')}{ROLLOUT_PAGE}{quote(str(episode_id), safe='')}"


def app_link(query: str, base: str | None = None) -> str:
    """A link into the app with URL keys (`episode=...`, `tab=browse&rollout=...`)."""
    return f"{(base or '').rstrip('/')}/?{query}"


def beat_query(task_id: str, episode_id: str) -> str:
    """The URL keys of "Try to beat this": Play on the rollout's task, its last plan loaded (viewer/play reads
    them back)."""
    return urlencode({"tab": "play", "task": task_id, "from": episode_id})
