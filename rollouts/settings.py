"""Every environment variable the project reads, with its type, its default and what it is for: the one door to the
environment for rollouts, the agent, the viewer and the app (berth_env, which stands alone, reads its own four
through berth_env/settings.py).

A setting is read when it is asked for, never cached at import: a test that sets a variable for itself, a shard
started by a sweep with its own environment and a warm interpreter forked for each command all see their own
values. Blank counts as unset (the default) unless a setting says otherwise (`blank`).

A provider's key and endpoint variables are declared by its class (agent.providers.base, from its `key_env` and
`endpoint_env`), so they too are settings, secret ones. A secret's value never prints: `current()`'s repr and str
mask it, and a Setting holds no value at all.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MASK = "****"


@dataclass(frozen=True)
class Setting:
    """One environment variable: `kind` turns its text into the value (ValueError naming the variable when it
    cannot), `default` when unset or blank. `blank`: what a set but empty variable means, when not the default
    (PUBLIC_ROLLOUTS= turns the public rollouts off)."""

    name: str
    kind: Callable[[str], Any]
    default: Any
    doc: str
    secret: bool = False
    blank: Any = ...  # ...: the default

    def text(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The variable's text as set (stripped), or None when unset."""
        raw = (os.environ if environ is None else environ).get(self.name)
        return None if raw is None else raw.strip()

    def get(self, environ: Mapping[str, str] | None = None) -> Any:
        """The value now (from `environ` when given, else this process's environment)."""
        raw = self.text(environ)
        if raw is None:
            return self.default
        if not raw:
            return self.default if self.blank is ... else self.blank
        try:
            return self.kind(raw)
        except ValueError:
            shown = MASK if self.secret else repr(raw[:80])
            raise ValueError(f"{self.name}={shown} is not a valid {getattr(self.kind, '__name__', 'value')}: "
                             f"{self.doc}") from None

    def is_set(self, environ: Mapping[str, str] | None = None) -> bool:
        return bool(self.text(environ))


_lock = threading.Lock()
SETTINGS: dict[str, Setting] = {}


def declare(setting: Setting) -> Setting:
    """Add a setting (a provider's variables, as its class is defined); the same name twice must say the same."""
    with _lock:
        known = SETTINGS.setdefault(setting.name, setting)
    if known.kind is not setting.kind or known.secret != setting.secret:
        raise ValueError(f"{setting.name} is declared twice, differently")
    return known


def setting(name: str) -> Setting:
    """The declared setting of that variable; KeyError when nothing declares it (a typo in the code)."""
    return SETTINGS[name]


def child_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment, with `extra` on top, for a child process (a sweep's local shard), which reads
    the same settings itself."""
    return {**os.environ, **(extra or {})}


class Current(Mapping[str, Any]):
    """The declared settings' values now; its repr and str mask the secret ones."""

    def __init__(self, values: dict[str, Any]) -> None:
        self._values = values

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        shown = {name: (MASK if SETTINGS[name].secret and value else value) for name, value in self._values.items()}
        return f"Current({shown!r})"

    __str__ = __repr__


def current() -> Current:
    """Every declared setting's value now (the set ones; a malformed one raises, naming it)."""
    return Current({name: s.get() for name, s in sorted(SETTINGS.items()) if s.is_set()})


def _on_unless_off(text: str) -> bool:
    """A switch set to anything but 0, false, no or off (any case) is on."""
    return text.lower() not in ("0", "false", "no", "off")


def _yes(text: str) -> bool:
    """huggingface_hub's reading of a switch: 1, true or yes (any case) is on, anything else off."""
    return text.lower() in ("1", "true", "yes")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def _non_negative(text: str) -> float:
    value = float(text)
    if not value >= 0 or value == float("inf"):
        raise ValueError(text)
    return value


def _first_host(text: str) -> str:
    return text.split(",")[0].strip().rstrip("/")


def _declare(name: str, kind: Callable[[str], Any], default: Any, doc: str, **options: Any) -> Setting:
    return declare(Setting(name, kind, default, doc, **options))


# -- where things are -------------------------------------------------------------------------------------------
ROLLOUT_DIR = _declare("ROLLOUT_DIR", Path, None, "the rollout folder (default: the Space's /data, else ./data)")
TASKS_CACHE = _declare("TASKS_CACHE", Path, None, "where the tasks dataset is cached")
XDG_CACHE_HOME = _declare("XDG_CACHE_HOME", Path, None, "the user's cache folder (default ~/.cache)")
BERTH_ENV_URL = _declare("BERTH_ENV_URL", str, None, "play on this berth server by default, not the embedded one")
# -- the Hub ------------------------------------------------------------------------------------------------------
HF_TOKEN = _declare("HF_TOKEN", str, None, "the Hugging Face token: pushes, Jobs, hf: models", secret=True)
HF_ENDPOINT = _declare("HF_ENDPOINT", str, None, "the Hub's address, read now (huggingface_hub reads it at import)")
HF_HUB_CACHE = _declare("HF_HUB_CACHE", str, None, "huggingface_hub's file cache")
HF_HUB_OFFLINE = _declare("HF_HUB_OFFLINE", _yes, False, "no Hub requests at all")
ROLLOUT_DATASET = _declare("ROLLOUT_DATASET", str, None, "the Hub dataset the app pushes its rollouts to")
PUBLIC_ROLLOUTS = _declare("PUBLIC_ROLLOUTS", str, "FineEnvs/PortSimEnv",
                           "upstream's public rollouts to browse (blank: none)", blank=None)
TASKS_DATASET = _declare("TASKS_DATASET", str, "FineEnvs/PortSimEnv",
                         "every dock-v1 task (blank: the bundled eval tasks alone)", blank=None)
# -- the Space ----------------------------------------------------------------------------------------------------
SPACE_ID = _declare("SPACE_ID", str, None, "owner/name of the Space this runs on (set by the Hub)")
SPACE_HOST = _declare("SPACE_HOST", _first_host, None, "the Space's public host (set by the Hub; the first of a list)")
SYSTEM = _declare("SYSTEM", str, None, "`spaces` on a Space (set by the Hub)")
ARENA_URL = _declare("ARENA_URL", lambda text: text.rstrip("/"), None, "the arena's public address for links")
GRADIO_SERVER_NAME = _declare("GRADIO_SERVER_NAME", str, None, "where `python app.py` listens (as Gradio's)")
GRADIO_SERVER_PORT = _declare("GRADIO_SERVER_PORT", int, 7860, "the port `python app.py` listens on")
GRADIO_IS_E2E_TEST = _declare("GRADIO_IS_E2E_TEST", str, None, "Gradio's own test mode: closed sessions go at once")
# -- what visitors may do -----------------------------------------------------------------------------------------
ARENA_MAX_EPISODES = _declare("ARENA_MAX_EPISODES", int, 16, "episodes running at once, in total")
ARENA_MAX_EPISODES_PER_VISITOR = _declare("ARENA_MAX_EPISODES_PER_VISITOR", int, None,
                                          "episodes one visitor may run at once (default 2)")
ARENA_MAX_EPISODES_PER_SESSION = _declare("ARENA_MAX_EPISODES_PER_SESSION", int, 2,
                                          "the old name of ARENA_MAX_EPISODES_PER_VISITOR")
ARENA_BASELINE_PACE_S = _declare("ARENA_BASELINE_PACE_S", float, 0.5, "seconds a baseline waits before each call")
ARENA_MAX_ROLLOUTS_PER_HOUR = _declare("ARENA_MAX_ROLLOUTS_PER_HOUR", int, 30, "rollouts one visitor saves an hour")
ARENA_MAX_FLAGS_PER_HOUR = _declare("ARENA_MAX_FLAGS_PER_HOUR", int, 20,
                                    "flags one signed-in account puts on steps an hour (0: no cap)")
ADMINS = _declare("ADMINS", str, "", "more Hugging Face accounts that may hide flags, comma-separated")
ARENA_MAX_VOTES_PER_HOUR = _declare("ARENA_MAX_VOTES_PER_HOUR", int, 60, "arena votes one visitor casts an hour")
ALLOWED_SERVERS = _declare("ALLOWED_SERVERS", str, "", "more trusted servers, comma-separated host[:port]")
CUSTOM_SERVERS = _declare("CUSTOM_SERVERS", _on_unless_off, None, "visitors' own servers (default: on unless on a Space)")
# -- what runs on the Space's keys may spend (live/budget.py; 0: no cap) -----------------------------------------
BUDGET = {
    "visitor_tokens_per_hour": _declare("ARENA_BUDGET_VISITOR_TOKENS_PER_HOUR", _positive_int, None,
                                        "tokens one visitor may spend an hour on the Space's keys"),
    "visitor_usd_per_hour": _declare("ARENA_BUDGET_VISITOR_USD_PER_HOUR", _non_negative, None,
                                     "dollars one visitor may spend an hour on the Space's keys"),
    "space_tokens_per_day": _declare("ARENA_BUDGET_SPACE_TOKENS_PER_DAY", _positive_int, None,
                                     "tokens the Space's keys may spend a day"),
    "space_usd_per_day": _declare("ARENA_BUDGET_SPACE_USD_PER_DAY", _non_negative, None,
                                  "dollars the Space's keys may spend a day"),
    "max_turns": _declare("ARENA_SPACE_MAX_TURNS", _positive_int, None, "turns a run on the Space's keys may take"),
    "max_tokens": _declare("ARENA_SPACE_MAX_TOKENS", _positive_int, None, "tokens a turn on the Space's keys"),
}
