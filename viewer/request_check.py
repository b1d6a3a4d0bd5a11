"""The one check of a run request from a form or the API, shared by Run and the Arena: `check_request` is every
check a request gets (one model, or an arena match's two on one task), making their `EpisodeRequest`s once
(agent.request) or raising `FormError` naming the field to fix (on the Space's keys, within the spending budget's
bounds: live.budget); `budget_notice` says before a run what it may spend of that budget; `start_episode` checks
and starts one episode in the background (live.runs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.limits import DEFAULT_MAX_TOKENS, DEFAULT_MAX_TURNS, InputTooLarge, check_input, valid_task_id
from agent.providers.registry import MissingKey, parse_spec, playable, provider_class
from agent.request import EpisodeRequest, Limits
from agent.spec import ModelSpec, SpecError
from catalog.task_api import TaskTooLarge
from catalog.tasks import closest_tasks
from live.budget import BudgetExceeded, on_space_keys
from live.runs import CapacityError, EpisodeRun
from viewer.context import AppContext

KEY_MAX_CHARS = 1000  # the longest provider keys are about 200 characters


def excerpt(text: str, limit: int = 60) -> str:
    """A short excerpt of user input for an error message (the whole of it may be a megabyte); `repr` escapes
    control and direction-changing characters."""
    text = " ".join(str(text)[: limit * 4].split())
    return repr(text if len(text) <= limit else text[:limit] + "…")


class FormError(ValueError):
    """A run request that cannot start; `field` is the form field to fix (`model`, `task`, `server`, `limits`,
    `capacity`; an arena match's `model_a` or `model_b`).

    The message is plain text; the page escapes it.
    """

    def __init__(self, field: str, message: str, *, needs_key: bool = False) -> None:
        super().__init__(message)
        self.field, self.needs_key = field, needs_key


@dataclass
class Started:
    run: EpisodeRun
    task: dict | None
    server_url: str | None


@dataclass
class Checked:
    """A run request that passed every check: what to start, one EpisodeRequest per model field (agent.request:
    the spec parsed here, once, and handed as it is to the registry and the loop)."""

    requests: list[EpisodeRequest]
    task: dict | None
    server_url: str | None

    @property
    def task_id(self) -> str:
        return self.requests[0].task_id

    @property
    def models(self) -> list[str]:
        """The specs as given, trimmed."""
        return [request.model for request in self.requests]


def start_episode(ctx: AppContext, model: str, task_id: str, turns: Any, tokens: Any, server_choice: str,
                  url: str, keys: dict[str, str], owner: str, visitor: str | None = None) -> Started:
    """Check the request (`check_request`), then start the episode in the background; every problem is a
    FormError. `owner` may stop it; `visitor` (viewer.visitors) is whom the per-visitor cap counts. Blocking (it may
    resolve the server's name): call it from a worker thread."""
    checked = check_request(ctx, {"model": model}, task_id, turns, tokens, server_choice, url, keys)
    try:
        run = ctx.registry.start(checked.requests[0], owner=owner, visitor=visitor)
    except CapacityError as exc:
        raise FormError("capacity", str(exc)) from None
    return Started(run, checked.task, checked.server_url)


def check_request(ctx: AppContext, models: dict[str, Any], task_id: Any, turns: Any, tokens: Any,
                  server_choice: Any, url: Any, keys: dict[str, Any]) -> Checked:
    """Every check a run request gets, for one model or several on one task (`models`: form field -> spec, so an
    error names the field to fix); FormError otherwise.

    Every check happens here, whichever door the request came through (the form, the API, a raw call of a
    handler, the arena), and before anything starts: a request refused here leaves no rollout. Each field first
    meets the one size limit on what a visitor sends (agent.limits.check_input), then its own rules.
    """
    _check_sizes({**{field: ("the model spec", model) for field, model in models.items()},
                  "task": ("the task id", task_id), "limits": ("the limits", [turns, tokens]),
                  "server": ("the server", [server_choice, url]), "keys": ("the API keys", keys)})
    task_id = task_id.strip() if isinstance(task_id, str) else ""
    if not task_id:
        raise FormError("task", "Pick a task first.")
    if not valid_task_id(task_id):
        raise FormError("task", f"Task id {excerpt(task_id)} must be 1-128 letters, digits, '.', '-' or '_'.")
    keys = _checked_keys(keys)
    specs = [_checked_spec(field, model, keys) for field, model in models.items()]
    try:
        server_url = ctx.server_url(server_choice if isinstance(server_choice, str) else "",
                                    url if isinstance(url, str) else "")
    except ValueError as exc:  # netguard.ServerRefused: a fixed text, never the server's own words
        text = str(exc).rstrip(".")
        raise FormError("server", f"{text[:1].upper()}{text[1:]}.") from None
    try:
        task = ctx.task_for(task_id, server_url)
    except TaskTooLarge as exc:  # the server has it, but it is too large to play here
        text = str(exc)
        raise FormError("task", f"{text[:1].upper()}{text[1:]}.") from None
    if task is None:
        near = "" if server_url else f" The closest it offers: {', '.join(closest_tasks(task_id))}."
        raise FormError("task", f"Task {excerpt(task_id)} is not one this server offers.{near} Pick one from the "
                                "task list.")
    max_turns, max_tokens = _checked_limits(ctx, specs, keys, turns, tokens)
    limits = Limits(max_turns, max_tokens)
    requests = [EpisodeRequest(spec, task_id, limits, server_url, ctx.policy, keys, source="space",
                               baseline_pace_s=ctx.settings.baseline_pace_s) for spec in specs]
    return Checked(requests, task, server_url)


def _checked_limits(ctx: AppContext, specs: list[ModelSpec], keys: dict[str, str], turns: Any,
                    tokens: Any) -> tuple[int, int]:
    """Max turns and tokens a turn: within the loop's range, and on the Space's keys within the Space's bounds
    (live.budget; left out, they are the defaults as far as those bounds allow)."""
    budget = ctx.registry.budget
    spending = budget is not None and any(on_space_keys(model, keys) for model in specs)
    default_turns, default_tokens = budget.defaults() if spending else (DEFAULT_MAX_TURNS, DEFAULT_MAX_TOKENS)
    try:
        max_turns, max_tokens = int(turns or default_turns), int(tokens or default_tokens)
        if not 1 <= max_turns <= 60 or not 256 <= max_tokens <= 200000:
            raise ValueError
    except (TypeError, ValueError):
        raise FormError("limits", "Max turns must be 1-60 and max tokens 256-200000.") from None
    if spending:
        try:
            budget.check_bounds(max_turns, max_tokens)
        except BudgetExceeded as exc:
            raise FormError("limits", str(exc)) from None
    return max_turns, max_tokens


def budget_notice(ctx: AppContext, models: list[Any], turns: Any, tokens: Any, keys: dict[str, Any],
                  visitor: str) -> str | None:
    """What these models may spend of the Space's budget and what is left today (live.budget), for the form
    before the run starts; None when none of them plays on the Space's keys. Never raises."""
    budget = ctx.registry.budget
    if budget is None:
        return None
    keys = {k: v.strip() for k, v in (keys or {}).items() if isinstance(v, str) and v.strip()}
    models = [m.strip() for m in models if isinstance(m, str) and m.strip()]
    try:
        default_turns, default_tokens = budget.defaults()
        limits = {"max_turns": int(turns or default_turns), "max_tokens": int(tokens or default_tokens)}
    except (TypeError, ValueError, OverflowError):
        return None
    if min(limits.values()) < 1:  # the run's own checks refuse it
        return None
    return budget.notice(visitor, [(model, {**limits, "keys": keys}) for model in models])


def _checked_spec(field: str, model: Any, keys: dict[str, str]) -> ModelSpec:
    """The spec, trimmed and parsed, once it has its key (typed or the Space's) and somewhere to send requests."""
    model = model.strip() if isinstance(model, str) else ""
    try:
        spec, _ = playable(model, keys)
    except MissingKey:
        api = provider_class(parse_spec(model).provider)
        raise FormError(field, f"{excerpt(model)} needs an {api.key_name}: paste one under API keys below (used for "
                               f"this run only), or set {api.key_env} on the Space.", needs_key=True) from None
    except SpecError as exc:
        raise FormError(field, str(exc)) from None
    return spec


def _check_sizes(fields: dict[str, tuple[str, Any]]) -> None:
    for field, (what, value) in fields.items():
        try:
            check_input(value, what)
        except InputTooLarge as exc:
            first_model = next((f for f in fields if f.startswith("model")), "model")
            raise FormError(first_model if field == "keys" else field, str(exc), needs_key=field == "keys") from None


def _checked_keys(keys: dict[str, Any]) -> dict[str, str]:
    """Typed keys: text of a bounded length, printable (a key goes into a request header). Never quoted back."""
    checked = {}
    for provider, key in (keys or {}).items():
        key = key.strip() if isinstance(key, str) else ""
        if len(key) > KEY_MAX_CHARS or not key.isprintable():
            raise FormError("model", f"The {_key_name(provider)} must be at most {KEY_MAX_CHARS} "
                                     "printable characters.", needs_key=True)
        checked[provider] = key
    return checked


def _key_name(provider: str) -> str:
    """A provider's key in a sentence ("Anthropic API key"), as the provider declares it."""
    try:
        return provider_class(provider).key_name
    except SpecError:
        return "API key"
