"""What the agent loop costs, and how batch runs scale. Prints a markdown table for BENCHMARKS.md.

1. Overhead per tool call: episodes played through `stream_episode` by an in-process scripted model (so no provider
   HTTP is timed) against the same tool calls sent with bare `MCPToolClient.step` on the same server: nine
   `check_plan`s of the largest task's optimum and a `submit_plan`, timed from after the reset to the last answer
   (connecting and resetting cost the same either way). The loop's own work per call is its time minus the server
   round trips it waited for; the overhead is that over a bare step. Target: under 10% extra.
2. Batch scaling: `python -m agent run` against a local chat-completions peer (its own process) that sleeps 1 s per
   turn, 50 episodes (one turn each) at concurrency 16 against concurrency 1. Target: at least 10x (12.5x is the
   ceiling: 50 episodes in rounds of 16 take four rounds). Measured with the berth server in its own process and
   embedded in the CLI's process, where it shares one interpreter lock with 16 clients.

    python bench/loop_bench.py              # about three minutes (each concurrency-1 run takes 50 s)
    python bench/loop_bench.py --quick      # fewer episodes, for a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from openenv.core.env_server.mcp_types import CallToolAction  # noqa: E402
from openenv.core.mcp_client import MCPToolClient  # noqa: E402

import agent.loop  # noqa: E402
from agent.providers.base import ModelTurn, ToolCall  # noqa: E402
from agent.providers.registry import preload_and_freeze  # noqa: E402
from agent.request import EpisodeRequest  # noqa: E402
from agent.session import EnvSession  # noqa: E402
from berth_env import load_pack  # noqa: E402
from testkit.servers import berth_server  # noqa: E402

CHECKS = 9


def largest_task() -> dict:
    return max(load_pack().tasks, key=lambda task: len(task["ships"]))


class ScriptedModel:
    """A model that answers at once: nine checks of the optimum, then a submit (one call per turn)."""

    provider_switches: tuple[str, ...] = ()

    def __init__(self, plan_json: str):
        self.plan_json = plan_json
        self.turn = 0

    def add_user(self, text: str) -> None:
        pass

    add_notes = add_user

    def add_tool_results(self, results) -> None:
        pass

    def stream_turn(self, turn, interrupt):
        self.turn += 1
        name = "check_plan" if self.turn <= CHECKS else "submit_plan"
        return ModelTurn(calls=[ToolCall(f"c{self.turn}", name, self.plan_json)], stop="tool_use")
        yield  # a generator, like every provider


def loop_episode(url: str, task_id: str, plan_json: str) -> tuple[float, float]:
    """(seconds from the episode's start to its last tool result, seconds of it spent in server round trips)."""
    real_provider, real_call = agent.loop.make_provider, EnvSession.call
    round_trips: list[float] = []

    def timed_call(session: EnvSession, name: str, arguments: dict):
        start = time.perf_counter()
        try:
            return real_call(session, name, arguments)
        finally:
            round_trips.append(time.perf_counter() - start)

    agent.loop.make_provider = lambda *a, **k: ScriptedModel(plan_json)
    EnvSession.call = timed_call
    try:
        began = ended = None
        for event in agent.loop.stream_episode(EpisodeRequest.of("hf:bench/scripted", task_id, env_url=url,
                                                                  max_turns=CHECKS + 1, keys={"hf": "unused"})):
            if event["type"] == "episode_started":
                began = time.perf_counter()
            elif event["type"] == "tool_result":
                ended = time.perf_counter()
            elif event["type"] == "episode_finished":
                record = event["record"]
    finally:
        agent.loop.make_provider, EnvSession.call = real_provider, real_call
    assert record["reward"] == 1.0 and len(record["steps"]) == CHECKS + 1, record["errors"]
    return ended - began, sum(round_trips)


class ReplayedSession:
    """Answers every call at once with a real check reply: what is left of an episode is the loop's own work."""

    def __init__(self, task: dict, plan: list):
        from agent.session import ToolOutcome
        from berth_env import evaluate

        self.check = ToolOutcome(json.dumps(evaluate(task, plan) | {"checks_left": 5}, separators=(",", ":")),
                                 False, 0.0, {})
        self.submit = ToolOutcome('{"submitted":true,"feasible":true,"reward":1.0}', True, 1.0,
                                  {"grade": {"reward": 1.0}, "rubric": {}})

    def reset(self, task_id: str, episode_id: str) -> dict:
        return {"instructions": "rules", "situation": "situation"}

    def tools(self) -> list[dict]:
        return []

    def call(self, name: str, arguments: dict):
        return self.submit if name == "submit_plan" else self.check

    def close(self, *, wait: bool = True) -> None:
        pass


def own_work_ms(task: dict, plan_json: str, episodes: int = 300) -> float:
    """Median milliseconds per tool call the loop spends on itself, with the server's answers replayed."""
    plan = json.loads(plan_json)["plan"]
    real_provider, real_session = agent.loop.make_provider, agent.loop.EnvSession
    agent.loop.make_provider = lambda *a, **k: ScriptedModel(plan_json)
    agent.loop.EnvSession = lambda url, **_: ReplayedSession(task, plan)  # the policy too, when the loop passes one
    try:
        times = []
        for _ in range(episodes):
            start = time.perf_counter()
            for event in agent.loop.stream_episode(EpisodeRequest.of("hf:bench/scripted", task["task_id"],
                                                                      env_url="http://replay", max_turns=CHECKS + 1,
                                                                      keys={"hf": "unused"})):
                if event["type"] == "episode_finished":
                    assert event["record"]["reward"] == 1.0
            times.append(time.perf_counter() - start)
    finally:
        agent.loop.make_provider, agent.loop.EnvSession = real_provider, real_session
    return statistics.median(times) * 1000 / (CHECKS + 1)


def bare_episode(url: str, task_id: str, plan: list) -> float:
    """Seconds from after the reset to the last step's answer, with bare `MCPToolClient.step` calls."""
    client = MCPToolClient(url).sync()
    try:
        client.reset(task_id=task_id)
        client.list_tools()
        began = time.perf_counter()
        for i in range(CHECKS + 1):
            step = client.step(CallToolAction(tool_name="check_plan" if i < CHECKS else "submit_plan",
                                              arguments={"plan": plan}))
        ended = time.perf_counter()
        assert step.done and step.reward == 1.0
    finally:
        client.close()
    return ended - began


def overhead(episodes: int) -> dict:
    # The server in a child process, so client and server don't share one interpreter lock.
    with berth_server() as url:
        return _overhead(url, episodes)


def _overhead(url: str, episodes: int) -> dict:
    task = largest_task()
    plan = task["reference"]["optimal_plan"]
    plan_json = json.dumps({"plan": plan})
    loop_episode(url, task["task_id"], plan_json)  # warm both paths up
    bare_episode(url, task["task_id"], plan)
    preload_and_freeze()  # as `python -m agent run` does before its first episode
    loop_times, own_times, bare_times = [], [], []
    for _ in range(episodes):  # interleaved, so drift on a shared machine hits both alike
        total, round_trips = loop_episode(url, task["task_id"], plan_json)
        loop_times.append(total)
        own_times.append(total - round_trips)
        bare_times.append(bare_episode(url, task["task_id"], plan))
    calls = CHECKS + 1
    replayed_ms = own_work_ms(task, plan_json)
    loop_ms = statistics.median(loop_times) * 1000 / calls
    own_ms = statistics.median(own_times) * 1000 / calls
    bare_ms = statistics.median(bare_times) * 1000 / calls
    return {"loop_ms": loop_ms, "own_ms": own_ms, "bare_ms": bare_ms, "extra": own_ms / bare_ms,
            "replayed_ms": replayed_ms, "ships": len(task["ships"])}


def batch(episodes: int, concurrency: int, out: Path, env_url: str | None = None) -> float:
    """One `python -m agent run`, in this process so interpreter start-up is not timed."""
    from batch.cli import main as agent_cli

    tasks = [t["task_id"] for t in load_pack().split("eval")][:episodes]
    args = ["run", "--model", "vllm:sleepy", "--out", str(out), "--run", f"scaling-c{concurrency}",
            "--concurrency", str(concurrency)] + (["--env-url", env_url] if env_url else [])
    for task_id in tasks:
        args += ["--task", task_id]
    start = time.perf_counter()
    code = agent_cli(args)
    elapsed = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"agent run exited with {code}")
    return elapsed


SLEEPY_PEER = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from testkit.peers import ChatPeer, ToolCall, Turn

def sleepy(request):
    time.sleep(1.0)
    return Turn(ToolCall("submit_plan", json.dumps({"plan": []})))

with ChatPeer(sleepy) as peer:
    print(peer.url, flush=True)
    sys.stdin.read()
"""


def scaling(episodes: int) -> dict:
    """The provider peer runs in its own process, as a real provider would: its work is not ours."""
    import contextlib
    import subprocess

    peer = subprocess.Popen([sys.executable, "-c", SLEEPY_PEER, str(ROOT)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    results = {"episodes": episodes}
    try:
        os.environ["VLLM_BASE_URL"] = peer.stdout.readline().strip() + "/v1"
        with tempfile.TemporaryDirectory() as tmp, open(os.devnull, "w") as quiet, berth_server() as child_url, \
                contextlib.redirect_stderr(quiet), contextlib.redirect_stdout(quiet):
            # The berth server as a separate process (--env-url), then embedded in the CLI's own process.
            for where, url in (("child", child_url), ("embedded", None)):
                serial = batch(episodes, 1, Path(tmp) / f"{where}-c1", url)
                parallel = batch(episodes, 16, Path(tmp) / f"{where}-c16", url)
                results[where] = {"serial_s": serial, "parallel_s": parallel, "speedup": serial / parallel}
    finally:
        peer.stdin.close()
        peer.wait(10)
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    cost = overhead(episodes=5 if args.quick else 30)
    scale = scaling(episodes=16 if args.quick else 50)
    print("| measure | value | target |")
    print("|---|---:|---|")
    print(f"| tool call through the loop ({cost['ships']}-ship plan), all in | {cost['loop_ms']:.2f} ms | |")
    print(f"| of which the loop's own work (parse the call, the answer, events, record) | {cost['own_ms']:.2f} ms | |")
    print(f"| bare `MCPToolClient.step` on the same server | {cost['bare_ms']:.2f} ms | |")
    print(f"| loop overhead per tool call (own work / bare step) | +{cost['extra'] * 100:.1f}% | < +10% |")
    print(f"| the loop's own work with the server's answers replayed instantly | {cost['replayed_ms']:.2f} ms "
          f"(+{cost['replayed_ms'] / cost['bare_ms'] * 100:.1f}% of a bare step) | |")
    for where, label in (("child", "server in its own process (--env-url)"), ("embedded", "embedded server")):
        run = scale[where]
        print(f"| {scale['episodes']} episodes, 1 s per turn, {label}: concurrency 1 / 16 "
              f"| {run['serial_s']:.1f} s / {run['parallel_s']:.1f} s | |")
        print(f"| batch speed-up, {label} | {run['speedup']:.1f}x | >= 10x |")


if __name__ == "__main__":
    main()
