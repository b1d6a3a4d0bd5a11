"""A small local server speaking the Hugging Face Hub HTTP API, for the calls the rollout store and its readers make.

Enough for huggingface_hub 2.4 (`create_repo`, `create_commit`, `repo_info`, `list_repo_tree`, `get_paths_info`,
`hf_hub_download`, `HfFileSystem`) and for `datasets.load_dataset(repo, config)` pointed at it with `HF_ENDPOINT`.
Files are stored in memory, every commit keeps a snapshot (so a revision sha reads as it was) and changes the sha
that `resolve` reports in `X-Repo-Commit`. A commit naming a parent (`parent_commit`) that is no longer the head
is refused with 412, as the Hub refuses it. Uploads always take the "regular" path (base64 inside the NDJSON commit);
preupload reports the git oid of files already in the repo, as the Hub does, so unchanged files are skipped.

Fault injection, for the store's retry tests:
    hub.fail("commit", status=500, times=2)               # the next 2 commits answer 500
    hub.fail("commit", status=429, retry_after=1)         # ... 429 with Retry-After: 1
    hub.fail("commit", status=500, after_apply=True)      # the commit lands, then the answer says 500
    hub.down(); ...; hub.up()                             # connections refused while down (same port after)
    hub.down("close")                                     # ... or accepted and closed without an answer
Routes: create, validate-yaml, preupload, commit, info, tree, paths-info, resolve. `hub.requests` logs every
request as (time, method, route, status).

Use:  with running_fakehub(token="hf_test") as hub: HfApi(endpoint=hub.url, token="hf_test") ...
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from urllib.parse import unquote

import uvicorn
import yaml
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

ROUTES = ("create", "validate-yaml", "preupload", "commit", "info", "tree", "paths-info", "resolve")


def git_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Commit:
    oid: str
    message: str
    paths: list[str]  # files added or changed by this commit
    files: dict[str, bytes]  # the repo after it


@dataclass
class Repo:
    repo_type: str
    repo_id: str
    commits: list[Commit] = field(default_factory=list)

    @property
    def files(self) -> dict[str, bytes]:
        return self.commits[-1].files if self.commits else {}

    def at(self, revision: str) -> Commit | None:
        revision = unquote(revision)
        if revision == "main":
            return self.commits[-1] if self.commits else Commit("0" * 40, "", [], {})
        return next((c for c in self.commits if c.oid == revision), None)


@dataclass
class Fault:
    status: int
    retry_after: float | None
    after_apply: bool


class FakeHub:
    def __init__(self, token: str | None = None, page_size: int = 1000) -> None:
        self.token = token  # when set, writes need "Authorization: Bearer <token>"
        self.page_size = page_size
        self.repos: dict[tuple[str, str], Repo] = {}
        self.requests: list[tuple[float, str, str, int]] = []
        self._faults: dict[str, list[Fault]] = {}
        self._lock = threading.Lock()
        self._counter = itertools.count()
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.app = self._build_app()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._closer: _Closer | None = None

    # -- control ---------------------------------------------------------------------------------------------------

    def up(self) -> None:
        """Start (or restart, on the same port) serving."""
        if self._server is not None:
            return
        self._stop_closer()
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="fakehub", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("fakehub did not start")
            time.sleep(0.01)

    def down(self, mode: str = "refuse") -> None:
        """Stop serving until up(): "refuse" connections, or "close" each one as soon as it is accepted."""
        assert mode in ("refuse", "close"), mode
        if self._server is not None:
            self._server.should_exit = True
            if self._thread:
                self._thread.join(10)
            self._server = self._thread = None
        if mode == "close" and self._closer is None:
            self._closer = _Closer(self.port)

    def _stop_closer(self) -> None:
        if self._closer is not None:
            self._closer.stop()
            self._closer = None

    def fail(self, route: str, status: int = 500, times: int = 1, retry_after: float | None = None,
             after_apply: bool = False) -> None:
        """Make the next `times` requests to `route` answer `status` (after doing the work, with after_apply)."""
        assert route in ROUTES, route
        with self._lock:
            self._faults.setdefault(route, []).extend([Fault(status, retry_after, after_apply)] * times)

    def repo(self, repo_id: str, repo_type: str = "dataset") -> Repo:
        return self.repos[(repo_type, repo_id)]

    def files(self, repo_id: str, repo_type: str = "dataset") -> dict[str, bytes]:
        """The repo's files now ({} before it exists)."""
        repo = self.repos.get((repo_type, repo_id))
        return dict(repo.files) if repo else {}

    def commits(self, repo_id: str, repo_type: str = "dataset") -> list[Commit]:
        """The repo's commits, oldest first ([] before it exists)."""
        repo = self.repos.get((repo_type, repo_id))
        return list(repo.commits) if repo else []

    def hits(self, route: str) -> list[tuple[float, str, str, int]]:
        return [r for r in self.requests if r[2] == route]

    # -- the app ---------------------------------------------------------------------------------------------------

    def _take_fault(self, route: str, after_apply: bool) -> Fault | None:
        with self._lock:
            queue = self._faults.get(route) or []
            if queue and queue[0].after_apply == after_apply:
                return queue.pop(0)
        return None

    def _build_app(self) -> FastAPI:
        app = FastAPI()
        app.middleware("http")(self._log_and_inject)
        repo = "/api/{kind}/{ns}/{name}"
        app.add_api_route("/api/repos/create", self._on_create, methods=["POST"])
        app.add_api_route("/api/validate-yaml", self._on_validate_yaml, methods=["POST"])
        app.add_api_route(repo + "/preupload/{revision}", self._on_preupload, methods=["POST"])
        app.add_api_route(repo + "/commit/{revision}", self._on_commit, methods=["POST"])
        app.add_api_route(repo, self._on_info, methods=["GET"])
        app.add_api_route(repo + "/revision/{revision:path}", self._on_info_at, methods=["GET"])
        app.add_api_route(repo + "/tree/{revision}", self._on_tree, methods=["GET"])
        app.add_api_route(repo + "/tree/{revision}/{path:path}", self._on_tree, methods=["GET"])
        app.add_api_route(repo + "/paths-info/{revision}", self._on_paths_info, methods=["POST"])
        app.add_api_route("/{kind}/{ns}/{name}/resolve/{revision}/{path:path}", self._on_resolve,
                          methods=["GET", "HEAD"])
        return app

    # -- the routes ------------------------------------------------------------------------------------------------

    async def _log_and_inject(self, request: Request, call_next):
        route = _route_of(request.method, request.url.path)
        fault = self._take_fault(route, after_apply=False) if route else None
        if fault:
            response = _fault_response(fault)
        elif self.token and route in ("create", "preupload", "commit") and \
                request.headers.get("authorization") != f"Bearer {self.token}":
            response = JSONResponse({"error": "Invalid credentials in Authorization header"}, status_code=401)
        else:
            response = await call_next(request)
        with self._lock:
            self.requests.append((time.monotonic(), request.method, route or request.url.path,
                                 response.status_code))
        return response

    async def _on_create(self, request: Request):
        body = await request.json()
        repo_type = body.get("type") or "model"
        repo_id = f"{body['organization']}/{body['name']}" if body.get("organization") else body["name"]
        with self._lock:
            if (repo_type, repo_id) in self.repos:
                return JSONResponse({"error": "You already created this repo", "url": self._repo_url(
                    repo_type, repo_id)}, status_code=409)
            self.repos[(repo_type, repo_id)] = Repo(repo_type, repo_id)
        return {"url": self._repo_url(repo_type, repo_id), "name": repo_id}

    async def _on_validate_yaml(self, request: Request):
        body = await request.json()
        content = body.get("content", "")
        if content.startswith("---\n"):
            head = content[4:].partition("\n---\n")[0]
            try:
                yaml.safe_load(head)
            except yaml.YAMLError as exc:
                return JSONResponse({"errors": [{"message": str(exc)}]}, status_code=400)
        return {"errors": [], "warnings": []}

    async def _on_preupload(self, kind: str, ns: str, name: str, revision: str, request: Request):
        repo = self._find(kind, ns, name)
        if repo is None:
            return _not_found("RepoNotFound")
        body = await request.json()
        files = repo.files
        return {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False,
                           "oid": git_oid(files[f["path"]]) if f["path"] in files else None}
                          for f in body["files"]], "commitOid": repo.at("main").oid}

    async def _on_commit(self, kind: str, ns: str, name: str, revision: str, request: Request):
        repo = self._find(kind, ns, name)
        if repo is None:
            return _not_found("RepoNotFound")
        lines = [json.loads(line) for line in (await request.body()).splitlines() if line.strip()]
        header = next((x["value"] for x in lines if x["key"] == "header"), {})
        with self._lock:
            parent = header.get("parentCommit")
            if parent is not None and parent != repo.at("main").oid:
                # As the Hub answers a commit whose parent is no longer the head (another writer committed first).
                return JSONResponse({"error": "A commit has happened since. Please refresh and try again."},
                                    status_code=412)
            files = dict(repo.files)
            changed = []
            for item in lines:
                key, value = item["key"], item["value"]
                if key == "file":
                    files[value["path"]] = base64.b64decode(value["content"])
                    changed.append(value["path"])
                elif key == "deletedFile":
                    if value["path"] not in files:  # as the Hub refuses it
                        return JSONResponse({"error": "A file with this name doesn't exist"}, status_code=404,
                                            headers={"X-Error-Code": "EntryNotFound"})
                    del files[value["path"]]
                elif key == "deletedFolder":
                    prefix = value["path"].rstrip("/") + "/"
                    files = {p: d for p, d in files.items() if not p.startswith(prefix)}
                elif key != "header":
                    return JSONResponse({"error": f"fakehub does not take {key!r} items"}, status_code=400)
            oid = hashlib.sha1(f"{repo.repo_id}:{next(self._counter)}:{time.time()}".encode()).hexdigest()
            repo.commits.append(Commit(oid, header.get("summary", ""), changed, files))
        if self._take_fault("commit", after_apply=True):
            return JSONResponse({"error": "injected failure after the commit landed"}, status_code=500)
        return {"commitUrl": f"{self._repo_url(repo.repo_type, repo.repo_id)}/commit/{oid}", "commitOid": oid,
                "success": True, "pullRequestUrl": None}

    async def _on_info(self, kind: str, ns: str, name: str):
        return self._info(kind, ns, name, "main")

    async def _on_info_at(self, kind: str, ns: str, name: str, revision: str):
        return self._info(kind, ns, name, revision)

    async def _on_tree(self, kind: str, ns: str, name: str, revision: str, request: Request, path: str = ""):
        snapshot = self._snapshot(kind, ns, name, revision)
        if isinstance(snapshot, Response):
            return snapshot
        recursive = request.query_params.get("recursive", "false").lower() == "true"
        entries = _tree(snapshot.files, path.strip("/"), recursive)
        if entries is None:
            return _not_found("EntryNotFound")
        start = int(request.query_params.get("cursor", 0))
        page = entries[start:start + self.page_size]
        headers = {}
        if start + self.page_size < len(entries):
            url = request.url.include_query_params(cursor=start + self.page_size)
            headers["Link"] = f'<{url}>; rel="next"'
        return JSONResponse(page, headers=headers)

    async def _on_paths_info(self, kind: str, ns: str, name: str, revision: str, request: Request):
        snapshot = self._snapshot(kind, ns, name, revision)
        if isinstance(snapshot, Response):
            return snapshot
        form = await request.form()
        out = []
        for path in form.getlist("paths"):
            path = str(path).strip("/")
            if path in snapshot.files:
                out.append(_file_entry(path, snapshot.files[path]))
            elif any(p.startswith(path + "/") for p in snapshot.files):
                out.append(_dir_entry(path))
        return out

    async def _on_resolve(self, kind: str, ns: str, name: str, revision: str, path: str, request: Request):
        snapshot = self._snapshot(kind, ns, name, revision)
        if isinstance(snapshot, Response):
            return snapshot
        data = snapshot.files.get(path)
        if data is None:
            return _not_found("EntryNotFound")
        headers = {"ETag": f'"{git_oid(data)}"', "X-Repo-Commit": snapshot.oid, "Accept-Ranges": "bytes"}
        status, body = 200, data
        ranged = request.headers.get("range", "")
        if ranged.startswith("bytes="):
            first, _, last = ranged[6:].partition("-")
            lo, hi = int(first or 0), int(last) if last else len(data) - 1
            if lo >= len(data) and data:
                return Response(status_code=416, headers={"Content-Range": f"bytes */{len(data)}"})
            body, status = data[lo:hi + 1], 206
            headers["Content-Range"] = f"bytes {lo}-{lo + len(body) - 1}/{len(data)}"
        headers["Content-Length"] = str(len(body))
        if request.method == "HEAD":
            return Response(status_code=status, headers=headers)
        return Response(body, status_code=status, headers=headers, media_type="application/octet-stream")


    def _repo_url(self, repo_type: str, repo_id: str) -> str:
        prefix = "" if repo_type == "model" else f"{repo_type}s/"
        return f"{self.url}/{prefix}{repo_id}"

    def _find(self, kind: str, ns: str, name: str) -> Repo | None:
        return self.repos.get((kind.removesuffix("s"), f"{ns}/{name}"))

    def _snapshot(self, kind: str, ns: str, name: str, revision: str) -> Commit | Response:
        repo = self._find(kind, ns, name)
        if repo is None:
            return _not_found("RepoNotFound")
        snapshot = repo.at(revision)
        return snapshot if snapshot is not None else _not_found("RevisionNotFound")

    def _info(self, kind: str, ns: str, name: str, revision: str) -> dict | Response:
        snapshot = self._snapshot(kind, ns, name, revision)
        if isinstance(snapshot, Response):
            return snapshot
        card = {}
        readme = snapshot.files.get("README.md", b"").decode()
        if readme.startswith("---\n"):
            card = yaml.safe_load(readme[4:].partition("\n---\n")[0]) or {}
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
        return {"_id": hashlib.md5(f"{ns}/{name}".encode()).hexdigest()[:24], "id": f"{ns}/{name}", "author": ns,
                "sha": snapshot.oid, "private": False, "disabled": False, "gated": False, "downloads": 0,
                "likes": 0, "tags": [], "cardData": card, "lastModified": now, "createdAt": now,
                "siblings": [{"rfilename": p} for p in sorted(snapshot.files)]}


@contextmanager
def running_fakehub(token: str | None = None, page_size: int = 1000) -> Iterator[FakeHub]:
    hub = FakeHub(token=token, page_size=page_size)
    hub.up()
    try:
        yield hub
    finally:
        hub.down()
        hub._stop_closer()


class _Closer:
    """Listens on the Hub's port and hangs up on every connection without a word (a crashing proxy)."""

    def __init__(self, port: int) -> None:
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))
        self._sock.listen()
        self._sock.settimeout(0.1)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="fakehub-closer", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            conn.settimeout(1)
            with suppress(OSError):
                conn.recv(65536)
            conn.close()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(5)
        self._sock.close()


def _route_of(method: str, path: str) -> str | None:
    parts = path.strip("/").split("/")
    if path == "/api/repos/create":
        return "create"
    if path == "/api/validate-yaml":
        return "validate-yaml"
    if parts[0] == "api" and len(parts) >= 4 and parts[1] != "jobs":  # /api/jobs/...: testkit/fakejobs.py
        if len(parts) == 4:
            return "info"
        return {"preupload": "preupload", "commit": "commit", "revision": "info", "tree": "tree",
                "paths-info": "paths-info"}.get(parts[4])
    if "resolve" in parts:
        return "resolve"
    return None


def _fault_response(fault: Fault) -> Response:
    headers = {"Retry-After": str(int(fault.retry_after))} if fault.retry_after is not None else {}
    return JSONResponse({"error": f"injected {fault.status}"}, status_code=fault.status, headers=headers)


def _not_found(code: str) -> Response:
    return JSONResponse({"error": code}, status_code=404, headers={"X-Error-Code": code})


def _file_entry(path: str, data: bytes) -> dict:
    return {"type": "file", "oid": git_oid(data), "size": len(data), "path": path}


def _dir_entry(path: str) -> dict:
    return {"type": "directory", "oid": hashlib.sha1(path.encode()).hexdigest(), "size": 0, "path": path}


def _tree(files: dict[str, bytes], path: str, recursive: bool) -> list[dict] | None:
    prefix = f"{path}/" if path else ""
    under = sorted(p for p in files if p.startswith(prefix))
    if path and not under:
        return None
    dirs: set[str] = set()
    out = []
    for p in under:
        rest = p[len(prefix):].split("/")
        for depth in range(1, len(rest) if recursive else min(2, len(rest))):
            dirs.add(prefix + "/".join(rest[:depth]))
        if recursive or len(rest) == 1:
            out.append(_file_entry(p, files[p]))
    return [_dir_entry(d) for d in sorted(dirs)] + out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]

