"""The server guard (agent/netguard.py) against real sockets: a visitor's URL reaches nothing the policy forbids,
not even with a DNS answer that changes between the check and the connection, nor through a redirect."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator

import pytest

from agent.loop import stream_episode
from agent.netguard import (
    CURRENT_POLICY,
    NOT_ALLOWED,
    UNREACHABLE,
    ServerPolicy,
    ServerRefused,
    clean_url,
    http_client,
    public_address,
)
from agent.request import EpisodeRequest
from agent.session import EnvError, EnvSession
from catalog.task_api import TaskAPI, TaskAPIError
from testkit import aio
from testkit.listeners import Listener, loopback_listener
from testkit.tasks import TASK_ID

# What a visitor's server gets on a public Space: no trusted server but the Space's own, custom servers on.
VISITOR = ServerPolicy.build(["https://fineenvs-portsimenv.hf.space"], custom=True)
PUBLIC_IP = "93.184.215.14"  # a public address: the guard lets it through to the connect


@pytest.fixture
def listener() -> Iterator[Listener]:
    with loopback_listener() as server:
        yield server


@pytest.fixture
def resolve_as(monkeypatch):
    """Make chosen host names resolve to chosen addresses (what a hostile DNS server can do)."""
    answers: dict[str, str] = {}
    real = socket.getaddrinfo

    def fake(host, port, *args, **kwargs):
        if isinstance(host, str) and host in answers:
            return real(answers[host], port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return answers


@pytest.mark.parametrize("address, public", [
    ("127.0.0.1", False), ("10.0.0.1", False), ("172.16.5.4", False), ("192.168.1.1", False),
    ("169.254.169.254", False), ("0.0.0.0", False), ("224.0.0.1", False), ("240.0.0.1", False), ("::1", False),
    ("fe80::1", False), ("fd00::1", False), ("::ffff:127.0.0.1", False), ("100.64.0.1", False),
    (PUBLIC_IP, True), ("2606:4700::1111", True),
])
def test_only_public_addresses_pass(address, public):
    assert public_address(address) is public


def test_a_url_loses_its_userinfo_and_anything_but_http_or_ws_is_refused():
    assert clean_url(" https://user:secret@Example.ORG:8443/base/?q=1#x ") == "https://example.org:8443/base"
    assert clean_url("wss://a:b@host.example/") == "wss://host.example"
    for bad in ["file:///etc/passwd", "gopher://x", "http://", "javascript:alert(1)", "http://x\n.example",
                "http://host:99999", "h" * 400]:
        with pytest.raises(ServerRefused):
            clean_url(bad)


def test_loopback_private_and_names_resolving_to_them_are_refused_and_never_dialled(listener, monkeypatch):
    dialled = []
    real_connect = socket.socket.connect
    monkeypatch.setattr(socket.socket, "connect", lambda self, addr: (dialled.append(addr), real_connect(self, addr)))
    for url in [f"http://127.0.0.1:{listener.port}", f"http://localhost:{listener.port}", "http://10.0.0.1",
                "http://169.254.169.254/latest/meta-data", f"ws://[::1]:{listener.port}"]:
        with pytest.raises(ServerRefused, match=NOT_ALLOWED):
            VISITOR.admit(url)
        with TaskAPI(url, policy=VISITOR) as api, pytest.raises(TaskAPIError) as refused:
            api.splits()
        assert str(refused.value) == NOT_ALLOWED  # no status, no address, no body
    assert dialled == [] and listener.accepted == 0


def test_the_episode_session_refuses_a_loopback_server_with_one_plain_sentence(listener):
    session = EnvSession(f"http://localhost:{listener.port}", policy=VISITOR)
    with pytest.raises(EnvError) as refused:
        session.reset(TASK_ID, "ep-guard-1")
    session.close()
    # One sentence and the address the visitor typed; no status code or body (the port may contain "403").
    assert str(refused.value) == f"{UNREACHABLE} http://localhost:{listener.port}"
    assert listener.accepted == 0


def test_a_dns_answer_that_changes_after_the_check_is_caught_at_connect_time(listener, resolve_as):
    url = f"http://rebind.example:{listener.port}"
    resolve_as["rebind.example"] = PUBLIC_IP
    assert VISITOR.admit(url) == url  # the form's check sees a public address...
    resolve_as["rebind.example"] = "127.0.0.1"  # ...and the name points home by the time the app connects
    with TaskAPI(url, policy=VISITOR) as api, pytest.raises(TaskAPIError, match=NOT_ALLOWED):
        api.splits()
    session = EnvSession(url, policy=VISITOR)
    with pytest.raises(EnvError, match=UNREACHABLE):
        session.reset(TASK_ID, "ep-guard-2")
    session.close()

    async def websocket_alone():  # the WebSocket dial, on its own (openenv opens it after its HTTP session)
        from openenv.core import env_client

        CURRENT_POLICY.set(VISITOR)
        await env_client.ws_connect(f"ws://rebind.example:{listener.port}/ws", open_timeout=5)

    with pytest.raises(ServerRefused, match=NOT_ALLOWED):
        aio.run(websocket_alone())
    assert listener.accepted == 0


class _Redirector(http.server.BaseHTTPRequestHandler):
    target = ""

    def do_GET(self):
        self.send_response(302)
        self.send_header("Location", self.target)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def redirector() -> Iterator[tuple[int, type]]:
    handler = type("Redirector", (_Redirector,), {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], handler
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("hop", ["loopback", "private"])
def test_a_redirect_to_a_private_address_is_not_followed_and_its_hop_is_refused(listener, redirector, hop):
    port, handler = redirector
    handler.target = f"http://127.0.0.1:{listener.port}/api/tasks/x" if hop == "loopback" else "http://10.1.2.3/x"
    policy = ServerPolicy.build([], "localhost", custom=True)  # the operator allows the redirecting server
    with TaskAPI(f"http://localhost:{port}", policy=policy) as api, pytest.raises(TaskAPIError):
        api.splits()  # the Task API follows no redirect
    with http_client(policy, timeout_s=5) as client, pytest.raises(ServerRefused, match=NOT_ALLOWED):
        client.get(f"http://localhost:{port}/", follow_redirects=True)  # and a client that does: each hop checked
    assert listener.accepted == 0


def test_with_custom_servers_off_only_the_spaces_own_and_allowed_servers_pass(resolve_as):
    resolve_as["berths.example"] = PUBLIC_IP
    closed = ServerPolicy.build(["http://127.0.0.1:8000"], "*.allowed.example", custom=False)
    assert closed.admit("http://127.0.0.1:8000/") == "http://127.0.0.1:8000"
    assert closed.admit("https://x.allowed.example") == "https://x.allowed.example"
    with pytest.raises(ServerRefused, match=NOT_ALLOWED):
        closed.admit("http://berths.example")
    with pytest.raises(ServerRefused, match=NOT_ALLOWED):
        closed.admit("http://127.0.0.1:8001")  # the trusted server's host, another port


def test_userinfo_never_reaches_the_record(env_url):
    secret_url = env_url.replace("http://", "http://visitor:hunter2@")
    events = list(stream_episode(EpisodeRequest.of("baseline:naive", TASK_ID, env_url=secret_url,
                                                   server_policy=ServerPolicy.build([env_url]))))
    record = events[-1]["record"]
    assert record["end_reason"] == "submitted" and record["env_url"] == env_url
    assert "hunter2" not in repr(events)


@pytest.mark.parametrize("space_id, flag, custom", [(None, None, True), ("org/arena", None, False),
                                                    ("org/arena", "1", True), (None, "0", False)])
def test_visitors_servers_are_off_on_a_public_space_unless_the_operator_turns_them_on(monkeypatch, resolve_as,
                                                                                     space_id, flag, custom):
    from viewer.context import Settings

    for name, value in {"SPACE_ID": space_id, "CUSTOM_SERVERS": flag, "ALLOWED_SERVERS": "berths.partner.example",
                        "BERTH_ENV_URL": "http://127.0.0.1:8123"}.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    resolve_as["somewhere.example"] = PUBLIC_IP
    policy = Settings.from_env().server_policy()
    assert policy.admit("http://127.0.0.1:8123") == "http://127.0.0.1:8123"  # the Space's own server
    assert policy.admit("https://berths.partner.example") == "https://berths.partner.example"
    assert policy.admit("https://fineenvs-portsimenv.hf.space")
    if custom:
        assert policy.admit("http://somewhere.example") == "http://somewhere.example"
    else:
        with pytest.raises(ServerRefused, match=NOT_ALLOWED):
            policy.admit("http://somewhere.example")


def test_a_guarded_sessions_websocket_is_dialled_by_the_guard(env_url, monkeypatch):
    """openenv opens its WebSocket itself: the guard must still be the one dialling it (agent.session wraps
    openenv's connect; if openenv stopped using it, this would fail)."""
    import agent.netguard as netguard

    dialled = []
    real = netguard.open_socket

    async def spy(policy, host, port, timeout_s):
        dialled.append((host, port))
        return await real(policy, host, port, timeout_s)

    monkeypatch.setattr(netguard, "open_socket", spy)
    session = EnvSession(env_url, policy=ServerPolicy.build([env_url]))
    try:
        assert "instructions" in session.reset(TASK_ID, "ep-guard-3")
    finally:
        session.close()
    host, port = env_url.removeprefix("http://").split(":")
    assert dialled == [(host, int(port))]


def test_allowed_servers_are_host_and_port_never_a_character_class(listener):
    """Before, `ALLOWED_SERVERS` entries were fnmatch patterns: `[2001:db8::1]:8000` read as a character class that
    trusts host `0` (0.0.0.0: this machine), which was then dialled unchecked."""
    port = listener.port
    policy = ServerPolicy.build([], f"[2001:db8::1]:{port}, *.partner.example, 10.0.0.5:8000", custom=True)
    assert policy.trusts("2001:db8::1", port) and policy.trusts("2001:0DB8:0::1", port)  # one address, any spelling
    assert not policy.trusts("2001:db8::1", port + 1) and not policy.trusts("0", port)
    assert policy.trusts("a.partner.example", 443) and policy.trusts("a.b.partner.example", 80)
    assert not policy.trusts("partner.example", 443) and not policy.trusts("evilpartner.example", 443)
    assert policy.trusts("10.0.0.5", 8000) and not policy.trusts("10.0.0.5", 8001)
    with pytest.raises(ServerRefused, match=NOT_ALLOWED):
        policy.admit(f"http://0:{port}")
    with TaskAPI(f"http://0:{port}", policy=policy) as api, pytest.raises(TaskAPIError, match=NOT_ALLOWED):
        api.splits()
    assert listener.accepted == 0


@pytest.mark.parametrize("entry, why", [
    ("2001:db8::1", "IPv6 address in brackets"), ("[2001:db8::1", "not host"), ("berths.example:http", "not host"),
    ("10.0.0.[1-9]", "not host"), ("b?rths.example", "not host"), ("*berths.example", "not host"),
    ("[::1]:99999", "not host"), ("*.[::1]", "not host"),
])
def test_a_malformed_allowed_servers_entry_stops_the_start_naming_it(tmp_path, entry, why):
    from testkit.app import settings_for
    from viewer.context import AppContext

    with pytest.raises(ValueError, match=why) as refused:
        AppContext.create(settings_for(tmp_path, allowed_servers=f"berths.example, {entry}"))
    assert repr(entry) in str(refused.value)
    assert not (tmp_path / ".push").exists()  # refused before anything started
