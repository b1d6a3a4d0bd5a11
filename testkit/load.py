"""Many visitors calling the app's `/run` API at once, over raw HTTP (Gradio's `/gradio_api/call/run`), for the load
test and the load benchmark.

Each caller has its own connection and its own `X-Forwarded-For` address. uvicorn (under Gradio) takes that header
from loopback peers only (`FORWARDED_ALLOW_IPS` defaults to 127.0.0.1), so on a loopback app each caller is a
distinct visitor, as strangers behind the Space's proxy are; from anywhere else the header is ignored.

Each call ends one of four ways: `finished` (the episode's last update arrived), `refused` (an error with a
message), `failed` (an error without one, or a broken reply) or `no_answer` (nothing conclusive within the timeout).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

import httpx

RUN_DATA = ["baseline:greedy", "dock-24B-w06x1-busy-0", 12, 24000, "embedded"]


@dataclass
class Outcome:
    kind: str  # finished | refused | failed | no_answer
    seconds: float
    message: str = ""
    episode_id: str | None = None  # known once the episode streamed its first update


def visitor_ip(number: int) -> str:
    return f"10.{number // 65536 % 256}.{number // 256 % 256}.{number % 256}"


async def call_run(base_url: str, visitor: str, *, data: list | None = None, timeout_s: float = 90.0) -> Outcome:
    """One `/run` call by `visitor` (an IP address for X-Forwarded-For), on a connection of its own."""
    started = time.monotonic()
    episode: dict = {}
    try:
        return await asyncio.wait_for(_call(base_url, visitor, data or RUN_DATA, started, episode), timeout_s)
    except TimeoutError:
        return Outcome("no_answer", time.monotonic() - started, episode_id=episode.get("id"))
    except (httpx.HTTPError, ValueError) as exc:
        return Outcome("failed", time.monotonic() - started, f"{type(exc).__name__}: {exc}", episode.get("id"))


async def _call(base_url: str, visitor: str, data: list, started: float, episode: dict) -> Outcome:
    limits = httpx.Limits(max_connections=1)
    async with httpx.AsyncClient(base_url=base_url, headers={"X-Forwarded-For": visitor}, timeout=None,
                                 limits=limits) as client:
        posted = await client.post("gradio_api/call/run", json={"data": data})
        if posted.status_code != 200:
            kind = "refused" if _message(posted.text) else "failed"
            return Outcome(kind, time.monotonic() - started, _message(posted.text) or f"HTTP {posted.status_code}")
        event_id = posted.json()["event_id"]
        async with client.stream("GET", f"gradio_api/call/run/{event_id}") as reply:
            event = None
            async for line in reply.aiter_lines():
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:") and event in ("generating", "complete"):
                    update = _first(line[5:])
                    if update.get("episode_id"):
                        episode["id"] = update["episode_id"]
                    if event == "complete" or update.get("state") == "finished":
                        return Outcome("finished", time.monotonic() - started, episode_id=episode.get("id"))
                elif line.startswith("data:") and event == "error":
                    message = _message(line[5:])
                    return Outcome("refused" if message else "failed", time.monotonic() - started, message,
                                   episode.get("id"))
    return Outcome("failed", time.monotonic() - started, "the stream ended without an outcome", episode.get("id"))


def _first(text: str) -> dict:
    value = json.loads(text)
    value = value[0] if isinstance(value, list) and value else value
    return value if isinstance(value, dict) else {}


def _message(text: str) -> str:
    """The error message of a Gradio error reply, '' when it has none."""
    try:
        value = json.loads(text)
    except ValueError:
        return ""
    if isinstance(value, dict):
        value = value.get("error") or value.get("detail") or ""
    return value.strip() if isinstance(value, str) else ""


async def flood(base_url: str, callers: int, *, timeout_s: float = 90.0, first_visitor: int = 1,
                data: list | None = None) -> list[Outcome]:
    """`callers` visitors calling `/run` at the same moment; their outcomes in caller order."""
    return list(await asyncio.gather(*(call_run(base_url, visitor_ip(first_visitor + i), data=data,
                                                timeout_s=timeout_s) for i in range(callers))))


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] if ordered else 0.0
