"""One OpenEnv WebSocket session on a berth-planning server: reset, list tools, call a tool.

Every tool call the model makes goes through here to the server, so the reward in a record is always the server's.
What goes either way is bounded (agent/limits.py): a call's arguments at most INPUT_MAX_BYTES (a larger one is
answered here, unsent), a message from the server at most MESSAGE_MAX_BYTES and MESSAGE_TIMEOUT_S, an HTTP answer
as agent/http_bounds.py bounds it.
"""

from __future__ import annotations

import functools
import json
import logging
import ssl
import threading
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import certifi
import httpx
from openenv.core import env_client as openenv_client
from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.mcp_client import MCPToolClient

from agent.limits import INPUT_MAX_BYTES, MESSAGE_MAX_BYTES, input_size
from agent.netguard import (
    CURRENT_POLICY,
    UNREACHABLE,
    ServerPolicy,
    async_http_client,
    guard_websockets,
    http_url,
    origin,
)

log = logging.getLogger(__name__)
# A check of a 59-ship plan takes milliseconds; the generous timeout is for a public server under load.
MESSAGE_TIMEOUT_S = 120.0
CONNECT_TIMEOUT_S = 15.0


# A server's tools do not change between episodes; listing them costs an HTTP round trip and a client per episode.
_TOOLS: dict[str, list[dict]] = {}
_TOOLS_LOCK = threading.Lock()


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One TLS context for the process: loading the CA bundle costs about 30 ms of CPU, once per client otherwise."""
    return ssl.create_default_context(cafile=certifi.where())


# openenv dials its WebSocket with `websockets`; a session under a policy gets a socket the guard dialled.
guard_websockets(openenv_client)


class _ToolClient(MCPToolClient):
    """openenv's MCPToolClient, with its HTTP session client built on the shared TLS context, and, under a server
    policy (agent/netguard.py), every connection it opens checked by that policy.

    Every episode opens a session, and with sixteen episodes in flight the per-client CA-bundle load was the largest
    part of starting one (bench/loop_bench.py).
    """

    policy: ServerPolicy | None = None

    async def _get_http_client(self) -> httpx.AsyncClient:
        if self._http_client is None:
            self._http_client = async_http_client(self.policy, headers=self._headers, verify=_tls_context(),
                                                  max_s=getattr(self, "_message_timeout", MESSAGE_TIMEOUT_S))
        return self._http_client

    async def _connect_async(self) -> Any:
        token = CURRENT_POLICY.set(self.policy)
        try:
            return await super()._connect_async()
        finally:
            CURRENT_POLICY.reset(token)


class EnvError(RuntimeError):
    """The berth server could not be reached or refused a request."""


@dataclass(slots=True)
class ToolOutcome:
    """What one tool call returned: the text the model reads, and the server's verdict on the episode."""

    text: str
    done: bool
    reward: float | None
    metadata: dict = field(default_factory=dict)
    is_error: bool = False


class EnvSession:
    """A berth-planning episode's connection to the server (one episode per session)."""

    def __init__(self, url: str, *, message_timeout_s: float = MESSAGE_TIMEOUT_S, policy: ServerPolicy | None = None):
        """`policy` (agent/netguard.py) checks every connection when a visitor chose the server; errors from a
        server it does not trust then say only that the server could not be reached."""
        self.url = http_url(url)
        client = _ToolClient(self.url, connect_timeout_s=CONNECT_TIMEOUT_S, message_timeout_s=message_timeout_s,
                             max_message_size_mb=MESSAGE_MAX_BYTES / 2**20)
        client.policy = policy
        self._client = client.sync()
        self._tools: list[dict] | None = None
        self._quiet = policy is not None and not policy.trusts(*origin(self.url))

    def reset(self, task_id: str, episode_id: str) -> dict:
        """Start the episode on `task_id`; returns the reset metadata (instructions, situation, limits...)."""
        try:
            result = self._client.reset(task_id=task_id, episode_id=episode_id)
        except Exception as exc:
            if self._quiet:  # a status or a reason from a visitor's server would map the network behind it
                log.info("reset on %s failed: %s", self.url, _reason(exc))
                raise EnvError(f"{UNREACHABLE} {self.url}") from None
            raise EnvError(f"could not start an episode on {self.url}: {_reason(exc)}") from exc
        metadata = dict(result.observation.metadata or {})
        if "instructions" not in metadata or "situation" not in metadata:
            raise EnvError(f"{self.url} answered reset without instructions and situation; is it a PortSimEnv "
                           "v1 server (openenv >= 0.10)?")
        return metadata

    def tools(self) -> list[dict]:
        """The server's tools as `{name, description, input_schema}` dicts (cached per server URL)."""
        with _TOOLS_LOCK:
            self._tools = self._tools or _TOOLS.get(self.url)
        if self._tools is None:
            try:
                listed = self._client.list_tools()
            except Exception as exc:
                raise EnvError(f"could not list the tools of {self.url}: {_reason(exc)}") from exc
            self._tools = [{"name": t.name, "description": t.description or "",
                            "input_schema": t.input_schema or {"type": "object", "properties": {}}}
                           for t in listed]
            if not self._tools:
                raise EnvError(f"{self.url} lists no tools")
            with _TOOLS_LOCK:
                _TOOLS[self.url] = self._tools
        return self._tools

    def call(self, name: str, arguments: dict) -> ToolOutcome:
        """Call one tool through the environment's step, so counters, reward and `done` are the server's. Arguments
        over INPUT_MAX_BYTES are not sent: the answer is an error, as for any unreadable call."""
        if input_size(arguments) > INPUT_MAX_BYTES:
            text = json.dumps({"error": f"the arguments are larger than {INPUT_MAX_BYTES // 1024} KB; not sent"})
            return ToolOutcome(text, False, None, {}, True)
        try:
            step = self._client.step(CallToolAction(tool_name=name, arguments=arguments))
        except Exception as exc:
            raise EnvError(f"the call to {name} on {self.url} failed: {_reason(exc)}") from exc
        obs = step.observation
        metadata = dict(obs.metadata or {})
        error = getattr(obs, "error", None)
        if error:
            message = error.get("message") if isinstance(error, dict) else getattr(error, "message", str(error))
            text, is_error = json.dumps({"error": str(message)}, ensure_ascii=False), True
        else:
            text, is_error = result_text(getattr(obs, "result", None)), False
        reward = step.reward if step.reward is not None else obs.reward
        return ToolOutcome(text, bool(step.done or obs.done), reward, metadata, is_error)

    def close(self, *, wait: bool = True) -> None:
        """End the session; with `wait=False` the goodbye happens in the background (the record is already done)."""
        if not wait:
            threading.Thread(target=self.close, name="env-session-close", daemon=True).start()
            return
        # Closing a dead connection must not hide the episode's own outcome.
        with suppress(Exception):
            self._client.close()


def result_text(result: Any) -> str:
    """The text of an MCP tool result, whether it arrives as a dict (over the wire) or an object."""
    if result is None:
        return ""
    if isinstance(result, dict):
        blocks = result.get("content") or []
        text = "\n".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
        if text:
            return text
        data = result.get("data")
    else:
        data = getattr(result, "data", None)
        if data is None:
            return str(result)
    if data is None:
        return ""
    return data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text[:300]
