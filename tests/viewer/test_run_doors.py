"""The Run tab's doors on the launched app, tried as a stranger would: a visitor's server on the Space's own network,
hostile model specs and task ids, someone else's stop, and a private handler called by its index over raw HTTP.
Each attempt is refused with a short message and leaves no rollout."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterator

import httpx
import pytest
from gradio_client import Client

from agent.request import EpisodeRequest
from testkit.listeners import Listener, loopback_listener
from testkit.peers import ChatPeer
from testkit.tasks import TASK_ID, slow_then_optimal


@pytest.fixture
def listener() -> Iterator[Listener]:
    with loopback_listener() as server:
        yield server


@pytest.fixture
def slow_model(monkeypatch):
    with ChatPeer(functools.partial(slow_then_optimal, words=40)) as peer:
        monkeypatch.setenv("VLLM_BASE_URL", peer.url + "/v1")
        yield peer


def wait_for(predicate, timeout: float = 30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out")


def refusal(client: Client, *args) -> str:
    """The error text of a `/run` call that must be refused before it starts."""
    with pytest.raises(Exception) as refused:  # gradio_client raises AppError with the handler's message
        client.predict(*args, api_name="/run")
    return str(refused.value)


def test_a_visitors_server_on_the_spaces_network_gets_nothing_and_leaves_no_rollout(arena, listener):
    client = Client(arena.url, verbose=False)
    before = len(arena.ctx.store.rows())
    for server in [f"http://127.0.0.1:{listener.port}", f"http://localhost:{listener.port}",
                   f"ws://user:pass@localhost:{listener.port}/", "http://10.0.0.1", "http://169.254.169.254"]:
        message = refusal(client, "baseline:greedy", TASK_ID, 12, 24000, server)
        assert "This server is not allowed." in message and str(listener.port) not in message
    assert listener.accepted == 0
    assert len(arena.ctx.store.rows()) == before


@pytest.mark.parametrize("model, task_id, expected", [
    ("baseline:" + "A" * 1_000_000, TASK_ID, "The model spec is too large: this app takes at most 64 KB"),
    ("baseline:" + "A" * 300, TASK_ID, "longer than 200 characters"),
    ("baseline:greedy\x1b[31m", TASK_ID, "may use only letters"),
    ("baseline:greedy", "dock\x00-24B", "must be 1-128 letters"),
    ("baseline:greedy", "../../etc/passwd", "must be 1-128 letters"),
    ("baseline:greedy", "\u202edock-24B", "must be 1-128 letters"),
    ("baseline:greedy", "x" * 100_000, "The task id is too large"),
    ("baseline:greedy", "x" * 200, "must be 1-128 letters"),
    ("baseline:greedy", "dock-99X-w01x1-busy-0", "not one this server offers"),
    # Before, these two passed the checks, played, and were saved as reward-0 rollouts on the board.
    ("baseline:smart", TASK_ID, "unknown baseline 'smart': the baselines are baseline:greedy, baseline:naive, "
                                "baseline:hasty"),
    ("hf:Qwen3-8B", TASK_ID, "hf: models are written hf:<org>/<model>"),
    ("baseline:greedy", "dock-24B-w06x1-busy-1", "not one this server offers. The closest it offers: "
                                                 "dock-24B-w06x1-busy-0, "),
])
def test_hostile_specs_and_task_ids_are_refused_briefly_and_leave_no_rollout(arena, model, task_id, expected):
    client = Client(arena.url, verbose=False)
    before = len(arena.ctx.store.rows())
    message = refusal(client, model, task_id, 12, 24000, "embedded")
    assert expected in message and len(message) < 400
    assert "\x00" not in message and "\x1b" not in message and "\u202e" not in message
    assert len(arena.ctx.store.rows()) == before and not list(arena.root.rglob("*.json"))


def test_the_watch_id_alone_cannot_stop_a_run_but_its_token_can(arena, slow_model):
    starter, stranger = Client(arena.url, verbose=False), Client(arena.url, verbose=False)
    job = starter.submit("vllm:slow", TASK_ID, 12, 24000, "embedded", api_name="/run")
    first = wait_for(lambda: job.outputs() and job.outputs()[0])
    episode_id, token = first["episode_id"], first["stop_token"]
    assert stranger.predict(episode_id, "", api_name="/stop") is False
    assert stranger.predict(episode_id, "0" * len(token), api_name="/stop") is False
    assert not arena.ctx.registry.get(episode_id).finished  # still running for its starter
    assert stranger.predict(episode_id, token, api_name="/stop") is True  # the token is the right to stop
    assert list(job)[-1]["end_reason"] == "stopped"


def _fn_index(demo, handler) -> int:
    return next(fn._id for fn in demo.fns.values() if getattr(fn.fn, "__wrapped__", None) is handler)


def _raw_call(url: str, fn_index: int, data: list, session: str) -> str:
    """Call a handler by its index the way a script can without the page: queue/join, then read the event stream
    to its end; returns everything the app sent."""
    with httpx.Client(base_url=url, timeout=60) as http:
        joined = http.post("gradio_api/queue/join", json={"data": data, "fn_index": fn_index,
                                                            "session_hash": session, "trigger_id": None})
        assert joined.status_code == 200, joined.text[:300]
        seen = []
        with http.stream("GET", "gradio_api/queue/data", params={"session_hash": session}) as stream:
            for line in stream.iter_lines():
                if line.startswith("data:"):
                    seen.append(line[5:])
                    if json.loads(line[5:]).get("msg") == "process_completed":
                        break
        return "\n".join(seen)


def test_the_private_run_handler_called_by_index_enforces_the_same_limits(arena, listener):
    from viewer.run.section import start_run

    index = _fn_index(arena.demo, start_run)
    before = len(arena.ctx.store.rows())
    keys = ["", "", "", ""]
    answer = _raw_call(arena.url, index, ["baseline:greedy", TASK_ID, 12, 24000, "custom",
                                          f"http://localhost:{listener.port}", *keys], "raw-door-1")
    assert "This server is not allowed" in answer
    answer = _raw_call(arena.url, index, ["baseline:" + "B" * 1_000_000, TASK_ID, 12, 24000, "embedded", "",
                                          *keys], "raw-door-2")
    assert "The model spec is too large" in answer and len(answer) < 20_000
    answer = _raw_call(arena.url, index, ["anthropic:claude-test", TASK_ID, 12, 24000, "custom", "h" * 200_000,
                                          "k" * 200_000, "", "", ""], "raw-door-4")
    assert "is too large" in answer and len(answer) < 20_000
    answer = _raw_call(arena.url, index, ["baseline:greedy", "../../latest/meta-data", 12, 24000, "embedded", "",
                                          *keys], "raw-door-3")
    assert "must be 1-128 letters" in answer
    assert listener.accepted == 0 and len(arena.ctx.store.rows()) == before


def test_a_server_that_cannot_be_reached_leaves_no_rollout(tmp_path):
    from agent.netguard import ServerPolicy
    from live.runs import RunRegistry
    from rollouts.store import RolloutStore
    from testkit.servers import free_port
    from viewer.chat import chat_messages

    store = RolloutStore(tmp_path / "rollouts")
    try:
        registry = RunRegistry(store.save, journal=store.running)
        request = EpisodeRequest.of("baseline:greedy", TASK_ID, env_url=f"http://localhost:{free_port()}",
                                    server_policy=ServerPolicy.build([], "localhost"))  # allowed, but nothing listens
        run = registry.start(request, owner="visitor")
        wait_for(lambda: run.finished, timeout=60)
        assert [e["type"] for e in run.events] == ["error", "episode_finished"]
        assert run.save_error == "The episode ended before its first turn, so it is not a rollout and nothing was saved."
        titled = [m for m in chat_messages(run.events) if (m.metadata or {}).get("title") == "❌ Berth server error"]
        assert len(titled) == 1  # the server's fault, named so, in words
        assert "could not start an episode on http://localhost" in titled[0].content
        assert "EnvError" not in titled[0].content
        assert store.rows() == [] and not list(store.root.rglob("*.json"))
        assert store.running.running() == []  # nor does the next start recover one from the journal
    finally:
        store.close()


def test_a_spec_from_the_run_form_reaches_the_provider_parsed_once(arena, monkeypatch):
    """The Run form's start: the spec is read once, by the request check (viewer.request_check.check_request), and that
    very ModelSpec reaches the provider; the registry, the budget and the loop never read its text again."""
    import agent.loop
    import agent.providers.registry as registry
    from viewer.run.section import start_run

    model = "baseline:greedy"
    parsed, played = [], []
    read_spec, make_provider = registry.read_spec, agent.loop.make_provider

    def counted_read(text, prefixes):
        spec = read_spec(text, prefixes)
        if text == model:
            parsed.append(spec)
        return spec

    def seen_provider(spec, **setup):
        played.append(spec)
        return make_provider(spec, **setup)

    monkeypatch.setattr(registry, "read_spec", counted_read)
    monkeypatch.setattr(agent.loop, "make_provider", seen_provider)
    before = len(arena.ctx.store.rows())
    answer = _raw_call(arena.url, _fn_index(arena.demo, start_run),
                       [model, TASK_ID, 12, 24000, "embedded", "", "", "", "", ""], "parsed-once-1")
    assert "process_completed" in answer
    wait_for(lambda: len(arena.ctx.store.rows()) == before + 1, timeout=60)  # the episode played and was saved
    assert len(parsed) == 1 and len(played) == 1 and played[0] is parsed[0]
    with pytest.raises(TypeError, match="takes an EpisodeRequest, not str"):
        agent.loop.stream_episode(model)
    with pytest.raises(TypeError, match="parsed ModelSpec"):
        EpisodeRequest(model, TASK_ID)
