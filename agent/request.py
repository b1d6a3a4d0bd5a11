"""One episode as it is asked for: the parsed model spec, the task, the limits, the server and the keys.

An `EpisodeRequest` is made once, by the door's one check (the Run and Arena forms' `viewer.request_check.check_request`,
the CLI's `check_model`, the sweep's shards through the CLI), and handed as it is to the live registry
(live.runs, live.match_runs) and the loop (`agent.loop.stream_episode`), so nothing downstream reads the spec's
grammar again. What only one run of it has (its episode id, its stop event, its journal) stays with that run.

The keys a visitor typed travel in it for this run only: they are left out of its repr (and so of its str), so a
request logged or shown in a traceback never prints one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from agent.limits import DEFAULT_MAX_TOKENS, DEFAULT_MAX_TURNS, DEFAULT_WALL_CLOCK_S
from agent.netguard import ServerPolicy
from agent.providers.registry import parse_spec
from agent.spec import ModelSpec


@dataclass(frozen=True, slots=True)
class Limits:
    """What an episode may take: its turns, its tokens a turn, its seconds of wall clock."""

    max_turns: int = DEFAULT_MAX_TURNS
    max_tokens: int = DEFAULT_MAX_TOKENS  # per turn
    wall_clock_s: float = DEFAULT_WALL_CLOCK_S

    def as_record(self) -> dict[str, Any]:
        """The record's `limits`."""
        return {"max_turns": self.max_turns, "max_tokens": self.max_tokens, "wall_clock_s": self.wall_clock_s}


def _frozen(keys: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType({provider: key for provider, key in (keys or {}).items() if key})


@dataclass(frozen=True)
class EpisodeRequest:
    """One episode to play (module docstring). `spec` is parsed (agent.providers.registry.parse_spec); a string
    where it belongs is refused, so a spec cannot reach the loop unread or be read twice."""

    spec: ModelSpec
    task_id: str
    limits: Limits = Limits()
    env_url: str | None = None  # None: the embedded server
    server_policy: ServerPolicy | None = None  # checks every connection to a server a visitor chose
    keys: Mapping[str, str] = field(default_factory=dict, repr=False)  # provider -> a key for this run only
    source: str = "cli"  # who asked: `cli` or `space` (the record's `source`)
    run: str | None = None  # the batch run's name (the record's `run`)
    retry_base_s: float | None = None  # the providers' first retry wait; None: theirs
    baseline_pace_s: float = 0.0  # seconds per step of a baseline player, for people watching live

    def __post_init__(self) -> None:
        if not isinstance(self.spec, ModelSpec):
            raise TypeError(f"an EpisodeRequest takes a parsed ModelSpec (registry.parse_spec), not "
                            f"{type(self.spec).__name__}")
        if not isinstance(self.limits, Limits):
            raise TypeError(f"an EpisodeRequest's limits are a Limits, not {type(self.limits).__name__}")
        object.__setattr__(self, "keys", _frozen(self.keys))

    @classmethod
    def of(cls, model: str, task_id: str, *, max_turns: int = DEFAULT_MAX_TURNS,
           max_tokens: int = DEFAULT_MAX_TOKENS, wall_clock_s: float = DEFAULT_WALL_CLOCK_S,
           **fields: Any) -> EpisodeRequest:
        """A request for `model` (a spec's text, parsed here: SpecError naming the valid choices) on `task_id`;
        `fields` as the class's. For a door that has not parsed the spec yet, a script or a test."""
        return cls(parse_spec(model), task_id, Limits(max_turns, max_tokens, wall_clock_s), **fields)

    @property
    def model(self) -> str:
        """The spec as given: it names the model in the record and on the board."""
        return self.spec.text

    @property
    def secrets(self) -> list[str]:
        """The typed keys, to scrub from every text the episode leaves."""
        return list(self.keys.values())
