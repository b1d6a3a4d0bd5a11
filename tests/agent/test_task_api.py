"""The one Task API client (catalog/task_api.py) and the one full-task lookup (catalog.tasks.task_for), against real
berth servers: the embedded one, and a child process serving an extra pack."""

from __future__ import annotations

import contextlib
import gzip
import http.server
import json
import threading
import time

import pytest

import testkit.servers
from agent.limits import valid_task_id
from berth_env import load_pack
from catalog.task_api import TaskAPI, TaskAPIError, TaskTooLarge
from catalog.tasks import CatalogError, remote_catalog, task_for
from testkit.grid_checker import TOY_TASK_LINE
from testkit.servers import berth_server, free_port

TASK_ID = "dock-24B-w06x1-busy-0"


def test_splits_tasks_and_one_task_as_the_server_shows_them(env_url):
    with TaskAPI(env_url) as api:
        assert api.splits() == ["eval"]
        listed = api.tasks("eval")
        assert [t["task_id"] for t in listed] == [t["task_id"] for t in load_pack().split("eval")]
        assert all("reference" not in t for t in listed)  # public views
        one = api.task(TASK_ID)
        assert one == next(t for t in listed if t["task_id"] == TASK_ID)
        assert api.task("dock-00X-w01x1-none-0") is None  # not on this server
        assert api.tasks("nope") == []
    with TaskAPI(env_url.replace("http://", "ws://") + "/") as api:  # the form an OpenEnv client URL takes
        assert api.task(TASK_ID)["task_id"] == TASK_ID


@pytest.mark.parametrize("task_id", ["../healthz", "a/b", "", "..", ".", "x" * 129, "dock\n", "dock?x=1", "é", 7])
def test_an_unsafe_task_id_never_reaches_a_url(task_id):
    assert not valid_task_id(task_id)
    with TaskAPI("http://127.0.0.1:9") as api, pytest.raises(ValueError, match="must be 1-128 letters"):
        api.task(task_id)  # refused before any request: nothing listens on port 9


def test_failures_are_task_api_errors_naming_the_server_and_the_question(env_url):
    dead = f"http://127.0.0.1:{free_port()}"
    with TaskAPI(dead, timeout_s=2) as api, pytest.raises(TaskAPIError, match=f"the split list from {dead}: "):
        api.splits()
    with TaskAPI(env_url + "/not-a-server") as api, pytest.raises(TaskAPIError, match="404"):
        api.tasks("eval")
    with pytest.raises(CatalogError, match=dead):
        remote_catalog(dead, timeout_s=2)


def test_the_remote_catalog_lists_every_task_grouped_by_tier(env_url):
    choices = remote_catalog(env_url)
    assert len(choices) == 50 and {c.split for c in choices} == {"eval"}
    tiers = [c.difficulty for c in choices]
    assert tiers == sorted(tiers, key=["standard", "busy", "storm", "extreme"].index)


def test_task_for_prefers_the_pack_and_asks_no_server_without_one():
    full = task_for(TASK_ID, "http://127.0.0.1:9")  # the pack has it: no request is made
    assert full["reference"]["optimal_cost"] == 87
    assert task_for("toy-1") is None
    assert task_for("../etc", "http://127.0.0.1:9") is None


def test_task_for_reads_a_remote_public_task_and_never_keeps_a_failure(tmp_path, monkeypatch, warm_python):
    pack = tmp_path / "toy"
    pack.mkdir()
    (pack / "tasks.jsonl").write_text(TOY_TASK_LINE + "\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    assert task_for("toy-1", url) is None  # nobody listens yet
    monkeypatch.setattr(testkit.servers, "free_port", lambda: port)
    with berth_server(pack, python=warm_python) as started:
        assert started == url
        remote = task_for("toy-1", url)  # the failure above was not kept
        assert remote["task_id"] == "toy-1" and "reference" not in remote
        assert task_for("toy-2", url) is None
    assert task_for("toy-1", url) == remote  # a task found is kept: the server is gone now


# -- bounded answers: a server a visitor names must not fill the app's memory or hold a worker ---------------------

class _Hostile(http.server.BaseHTTPRequestHandler):
    """Answers every request one way: `huge` (48 MB of a valid task list, chunked, no length), `declared` (a
    Content-Length of 300 MB), `drip` (a byte every 0.2 s, forever) or `gzip` (a small gzip body of 50 MB)."""

    protocol_version = "HTTP/1.1"
    mode = "huge"
    sent = 0

    def handle(self):
        with contextlib.suppress(OSError):  # the client hung up, as a bounded client does
            super().handle()

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        kind, cls = self.mode, type(self)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        try:
            if kind == "declared":
                self.send_header("Content-Length", str(300 << 20))
                self.end_headers()
                self.wfile.write(b'{"tasks": [')
            elif kind == "gzip":
                body = gzip.compress(b'{"tasks": [' + b'{"task_id": "t"},' * (3 << 20) + b'{"task_id": "t"}]}')
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self._chunks(kind, cls)
        except OSError:  # the client hung up: what a bounded client does
            pass

    def do_GET(self):
        body = json.dumps({"task_id": "huge-0", "ships": [{"id": n} for n in range(10_240)]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _chunks(self, kind, cls):
        pieces = [b'{"tasks": ['] + [b'{"task_id": "t"},' * 65536] * 44 + [b'{"task_id": "t"}]}']
        for piece in pieces if kind == "huge" else iter(lambda: b" ", None):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            cls.sent += len(piece)
            if kind == "drip":
                time.sleep(0.2)
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, *args):
        pass


@pytest.fixture
def hostile():
    handler = type("Hostile", (_Hostile,), {"sent": 0})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def test_an_answer_past_the_size_bound_is_refused_while_it_streams(hostile):
    """Before, the client read and parsed the whole answer: 300 MB from a server took the app from 352 MB to
    1,255 MB. Now it stops reading at ANSWER_MAX_BYTES (32 MB) and says so."""
    url, handler = hostile
    handler.mode = "huge"  # 48 MB of a task list that parses: only the bound refuses it
    with TaskAPI(url) as api, pytest.raises(TaskAPIError, match="larger than 32 MB"):
        api.tasks("train")
    assert handler.sent < 40 << 20  # the rest was never asked for (socket buffers hold a few MB)
    handler.mode = "declared"
    started = time.monotonic()
    with TaskAPI(url) as api, pytest.raises(TaskAPIError, match="larger than 32 MB"):
        api.tasks("train")
    assert time.monotonic() - started < 5  # refused on its headers
    handler.mode = "gzip"  # 0.2 MB on the wire, 50 MB unpacked
    with TaskAPI(url) as api, pytest.raises(TaskAPIError, match="compressed answer"):
        api.tasks("train")


def test_an_answer_that_drips_is_given_up_at_the_time_bound(hostile):
    url, handler = hostile
    handler.mode = "drip"  # every read comes within the read timeout: only a bound on the whole answer ends it
    started = time.monotonic()
    with TaskAPI(url, timeout_s=2, max_s=1.0) as api, pytest.raises(TaskAPIError, match="took longer than 1 s"):
        api.tasks("train")
    assert time.monotonic() - started < 4


def test_a_task_too_large_to_draw_or_grade_is_refused_by_name(hostile):
    url, _ = hostile
    with TaskAPI(url) as api, pytest.raises(TaskAPIError, match="too large: 10,240 ships"):
        api.task("huge-0")  # a task the chart and the grader would take seconds on


def test_a_task_too_large_is_said_to_be_too_large_not_missing(hostile):
    """Issue 27, low: a task the server has but that is too large (its answer over the bound, or too many ships)
    is named as too large by the lookup and by Run's form, never "not one this server offers"."""
    from types import SimpleNamespace

    from viewer.request_check import FormError, check_request

    url, _ = hostile
    with pytest.raises(TaskTooLarge, match="too large: 10,240 ships"):
        task_for("huge-0", url)
    with TaskAPI(url, max_bytes=100_000) as api, pytest.raises(TaskTooLarge, match="the server's answer is too large"):
        api.task("huge-0")  # the answer is 0.12 MB, declared in its Content-Length
    ctx = SimpleNamespace(server_url=lambda choice, custom: custom, task_for=task_for)
    with pytest.raises(FormError) as refused:
        check_request(ctx, {"model": "baseline:greedy"}, "huge-0", 12, 24000, "custom", url, {})
    assert str(refused.value).startswith("Task 'huge-0' is too large: 10,240 ships")
    assert refused.value.field == "task" and "not one this server offers" not in str(refused.value)
