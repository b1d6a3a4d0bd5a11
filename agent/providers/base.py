"""The one base class of every provider (`ModelAPI`) and what providers share: the turn, tool calls, retries.

`ModelAPI.stream_turn` is the turn, the same for every API: open the request (retrying what the provider says is
worth retrying, with a visible `retry` note for each wait), register the stream with the episode's interrupt so a
Stop or the wall clock closes it, read it, close it, check the interrupt again. A provider implements only what its
API does differently: build and send the request (`request`), read the stream into events and a `ModelTurn`
(`read_stream`), keep its own conversation history (`add_user`, `add_notes`, `add_tool_results`) and decide which
errors are worth a retry (`should_retry`). Subclasses register themselves by `prefixes`; see registry.py.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agent.interrupt import Interrupt
from agent.spec import ModelSpec, SpecError
from rollouts import events as ev
from rollouts import settings
from rollouts.prices import use_price_groups
from rollouts.scrub import scrub

__all__ = [
    "CHARS_PER_TOKEN", "NOTES_CHARS", "REQUEST_TIMEOUT_S", "Interrupt", "MissingKey", "ModelAPI",
    "ModelTurn", "ProviderSetup", "ToolCall", "TurnStream", "retry_delay", "scrub", "shared_http_client",
    "status_of",
]

# Long generations (32k tokens of reasoning) can take many minutes before the last byte.
REQUEST_TIMEOUT_S = 900.0
RETRY_ATTEMPTS = 5  # one request and four retries after a 429, a 5xx or a dropped connection
RETRY_BASE_S = 2.0
RETRY_CAP_S = 60.0
# A turn cut off mid-thought hands this much of its reasoning tail back to the model as notes.
NOTES_CHARS = 8000
# Chat providers that ignore max_tokens are cut by characters: about 5 characters per token.
CHARS_PER_TOKEN = 5

# prefix -> provider class; filled as provider modules are imported (registry.py imports them all).
PROVIDERS: dict[str, type[ModelAPI]] = {}


class MissingKey(SpecError):
    """A provider needs a key that was neither typed in nor set in the environment."""


_HTTP_CLIENTS: dict[str, Any] = {}
_HTTP_LOCK = threading.Lock()


def shared_http_client(sdk: str, make: Callable[[], Any]) -> Any:
    """One HTTP client per SDK for the whole process, shared by every episode (`make` builds it the first time).

    Building a client loads the CA bundle (about 20 ms of CPU); with dozens of episodes in flight that is worth
    doing once. The SDKs' clients are thread-safe and take their timeouts per request.
    """
    with _HTTP_LOCK:
        client = _HTTP_CLIENTS.get(sdk)
        if client is None:
            client = _HTTP_CLIENTS[sdk] = make()
        return client


@dataclass(slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # the raw JSON text the model produced; it may not parse

    def parsed(self) -> tuple[dict | None, str | None]:
        """The arguments as a dict, or the reason they can't be sent to the server."""
        return ev.parse_arguments(self.arguments)


@dataclass(slots=True)
class ModelTurn:
    text: str = ""
    reasoning: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    stop: str = ""  # the provider's own stop reason, as it said it
    usage: dict = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0})
    cut_off: bool = False  # the turn ran out of output tokens (or hit the harness character cap)


TurnStream = Generator[ev.Event, None, ModelTurn]


@dataclass(frozen=True, slots=True)
class ProviderSetup:
    """What a provider is told when an episode starts."""

    system: str  # the rules: the server's `instructions`
    tools: list[dict]  # the server's tools: name, description, input_schema
    max_tokens: int  # output tokens per turn
    task_id: str
    max_turns: int
    key: str | None = None  # never written anywhere: it goes to the SDK client only
    retry_base_s: float = RETRY_BASE_S  # the first retry wait when the provider names none
    pace_s: float = 0.0  # baselines only: seconds per step, so a person watching live can follow along


class ModelAPI:
    """A model behind one API, for one episode, holding that API's own conversation history."""

    prefixes: ClassVar[tuple[str, ...]] = ()  # the spec prefixes this class plays (`hf`, `vllm`, ...)
    label: ClassVar[str] = "The model provider"  # names the API in retry notes ("Anthropic answered HTTP 429")
    # What a provider declares once, for every door that names it (registry.py hands it on): the environment
    # variable holding its key (None: it needs none), that key in a sentence ("needs an Anthropic API key") and on
    # its password box in the Run and Arena forms (key_label, when it says more than key_name), where the box sits
    # among the others (key_order), the variable naming where its requests go instead of its default server (a
    # sweep's Jobs get it with the key), and its price group: a name in rollouts.prices.PRICE_GROUPS, None unpriced.
    key_env: ClassVar[str | None] = None
    key_name: ClassVar[str] = "API key"
    key_label: ClassVar[str | None] = None
    key_order: ClassVar[int] = 100
    key_required: ClassVar[bool] = True  # False: it runs without a key when none is given (a local vLLM)
    endpoint_env: ClassVar[str | None] = None
    price_group: ClassVar[str | None] = None
    # What a model of this API looks like after `prefix:` (and before `@effort`), and the same in words for the
    # error that refuses a spec breaking it; None: any model the spec's alphabet allows.
    model_grammar: ClassVar[re.Pattern[str] | None] = None
    model_form: ClassVar[str] = "<model>"

    provider_switches: list[str]
    retry_base_s: float = RETRY_BASE_S

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        prefixes = cls.__dict__.get("prefixes", ())
        for prefix in prefixes:
            taken = PROVIDERS.get(prefix)
            if taken is not None and _name(taken) != _name(cls):  # the same class imported again may replace itself
                raise TypeError(f"provider prefix {prefix!r} is taken by {_name(taken)}")
        # rollouts sits below agent and cannot ask the registry, so it is told (a group it does not hold: an error).
        use_price_groups({prefix: cls.price_group for prefix in prefixes})
        # Its variables are settings like any other (rollouts.settings), both secret: an endpoint URL may carry
        # credentials.
        if cls.key_env:
            settings.declare(settings.Setting(cls.key_env, str, None, f"the {cls.key_name or 'API key'}", secret=True))
        if cls.endpoint_env:
            settings.declare(settings.Setting(cls.endpoint_env, str, None, f"where {cls.__name__} sends its requests "
                                              "instead of its default", secret=True))
        PROVIDERS.update(dict.fromkeys(prefixes, cls))

    # -- before the episode ------------------------------------------------------------------------------------
    @classmethod
    def create(cls, spec: ModelSpec, setup: ProviderSetup) -> ModelAPI:
        """The provider for one episode of `spec`."""
        return cls(spec, setup)  # type: ignore[call-arg]  # subclasses take (spec, setup)

    @classmethod
    def resolve_key(cls, spec: ModelSpec, keys: dict[str, str] | None = None) -> str | None:
        """The key for this run: one passed in for this run wins over the environment's."""
        if cls.key_env is None:
            return None
        given = ((keys or {}).get(spec.provider) or "").strip()
        if given:
            return given
        from_env = settings.setting(cls.key_env).get()
        if from_env or not cls.key_required:
            return from_env or None
        raise MissingKey(f"{spec.text} needs an API key: type one in the form or set {cls.key_env}")

    @classmethod
    def endpoint_url(cls) -> str | None:
        """Where this API's requests go instead of its default, from its `endpoint_env` (None: the default)."""
        return settings.setting(cls.endpoint_env).get() if cls.endpoint_env else None

    @classmethod
    def check_model(cls, spec: ModelSpec) -> None:
        """SpecError naming what is wrong when `spec` names no model this API could play (its own model grammar);
        called as every spec is read (registry.parse_spec), so a typo is refused before anything is played."""
        names = (spec.model, *spec.fallbacks)
        if cls.model_grammar is not None and not all(cls.model_grammar.fullmatch(name) for name in names):
            raise SpecError(f"model spec {spec.text[:80]!r}: {spec.provider}: models are written "
                            f"{spec.provider}:{cls.model_form}")

    @classmethod
    def check_endpoint(cls, spec: ModelSpec) -> None:
        """Fail before the episode starts when the provider has nowhere to send requests."""

    # -- the conversation (each API keeps its own) ---------------------------------------------------------------
    def add_user(self, text: str) -> None:
        raise NotImplementedError

    def add_notes(self, text: str) -> None:
        """The reasoning tail of a turn cut off by the output limit, handed back so the model can go on."""
        raise NotImplementedError

    def add_tool_results(self, results: list[tuple[ToolCall, str]]) -> None:
        raise NotImplementedError

    # -- one turn ----------------------------------------------------------------------------------------------
    def stream_turn(self, turn: int, interrupt: Interrupt) -> TurnStream:
        """Stream one model turn as events; returns the turn. Raises Interrupted on a Stop or the wall clock."""
        stream = yield from self.open_stream(turn, interrupt)
        with interrupt.closing(stream.close):
            try:
                result = yield from self.read_stream(_checked(stream, interrupt), turn)
            except Exception:
                interrupt.check()  # a Stop that closed the stream is an interruption, not a provider error
                raise
            finally:
                stream.close()
        interrupt.check()
        return result

    def open_stream(self, turn: int, interrupt: Interrupt) -> Generator[ev.Event, None, Any]:
        """Send the request, retrying what `should_retry` allows with a visible note for each wait."""
        for attempt in range(RETRY_ATTEMPTS):
            interrupt.check()
            try:
                return self.request()
            except Exception as exc:
                if not self.should_retry(exc) or attempt == RETRY_ATTEMPTS - 1:
                    raise
                wait = retry_delay(exc, attempt, self.retry_base_s)
                status = status_of(exc)
                why = f"HTTP {status}" if status else type(exc).__name__
                yield ev.note(turn, "retry", f"{self.label} answered {why}; retrying in {wait:.1f} s "
                                             f"(attempt {attempt + 2} of {RETRY_ATTEMPTS})")
                interrupt.sleep(wait)
        raise AssertionError("unreachable")

    def request(self) -> Any:
        """Send this turn's request (the history as it stands) and return the open stream of the reply."""
        raise NotImplementedError

    def read_stream(self, stream: Iterable[Any], turn: int) -> TurnStream:
        """Turn the reply's stream into live events and a ModelTurn, and add the reply to the history."""
        raise NotImplementedError

    def should_retry(self, error: BaseException) -> bool:
        """Whether a failed request is worth sending again (after a wait)."""
        return False


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _checked(stream: Iterable[Any], interrupt: Interrupt) -> Iterator[Any]:
    """The stream's items, checking the interrupt before each one."""
    for item in stream:
        interrupt.check()
        yield item


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of an SDK error (anthropic and openai share the shape), or None for transport errors."""
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def retry_delay(exc: BaseException, attempt: int, base_s: float) -> float:
    """Honour the provider's retry-after(-ms) header; otherwise back off exponentially."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    for key, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(key) if hasattr(headers, "get") else None
        if value is None:
            continue
        try:
            return min(RETRY_CAP_S, max(0.0, float(value) * scale))
        except ValueError:
            continue
    return min(RETRY_CAP_S, base_s * (2 ** attempt))


