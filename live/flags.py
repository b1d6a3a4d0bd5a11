"""Flags on a step, as the app takes them (the rows themselves are rollouts.annotations'): who may add one, how many
an hour, which step of a rollout it may name, and who may hide one.

- Only a signed-in account flags (a Hugging Face account on a Space, or Gradio's own user): an address is anyone's,
  and a flag carries its author's name. Anyone sees flags.
- Each account adds at most `per_hour` flags in any hour (live/quota.py's window, counted per account).
- A flag names a step the rollout has: a turn from 1 to its turns, or a draft from 1 to the plans it sent
  (rollouts.record's `plan_steps`), with a label of rollouts.annotations.LABELS and a note of at most
  NOTE_CHARS characters.
- The Space's owner hides one: the account of the Space's own `HF_TOKEN` (asked of the Hub once, `whoami`) or any
  account `ADMINS` names (comma-separated), so a Space run by an organisation's token names its people there.

Every refusal is a FlagRefused whose message the page and the API show as it is.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from live.quota import QuotaExceeded, SaveQuota
from rollouts import settings
from rollouts.annotations import LABELS, NOTE_CHARS, STEP_KINDS, FlagBook, FlagError, clean_note, new_flag
from rollouts.schema import valid_episode_id

log = logging.getLogger(__name__)

FLAGS_PER_HOUR = 20
SIGN_IN = "Sign in with Hugging Face to flag a step: anyone sees flags, only a signed-in account adds one."
WHOAMI_AGAIN_S = 600.0  # a failed `whoami` is asked again after this long (the Hub may have been down)


class FlagRefused(ValueError):
    """A flag or a hide that is not taken; the message says why, for the visitor."""


def label_key(label: str) -> str | None:
    """A label's key from its key or its words (`misread_rule` or `misread a rule`); None when it is neither."""
    text = str(label or "").strip()
    if text in LABELS:
        return text
    return next((key for key, words in LABELS.items() if words == text.lower()), None)


class SpaceOwners:
    """The accounts that may hide a flag: `ADMINS` and the `HF_TOKEN` account, looked up once (`whoami`)."""

    def __init__(self, admins: Iterable[str] = (), *, token: str | None = None, endpoint: str | None = None,
                 whoami: Callable[[str], str] | None = None) -> None:
        self._admins = {a.strip() for a in admins if a and a.strip()}
        self._token = token
        self._whoami = whoami or (lambda secret: _hub_whoami(secret, endpoint))
        self._owner: str | None = None
        self._asked_at: float | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, token: str | None = None) -> SpaceOwners:
        return cls((settings.ADMINS.get() or "").split(","), token=token, endpoint=settings.HF_ENDPOINT.get())

    def names(self) -> set[str]:
        with self._lock:
            due = self._token and self._owner is None and (
                self._asked_at is None or time.monotonic() - self._asked_at > WHOAMI_AGAIN_S)
            if due:
                self._asked_at = time.monotonic()
                try:
                    self._owner = self._whoami(self._token or "") or None
                except Exception as exc:  # the Hub unreachable, a token without read rights: ADMINS still hold
                    log.warning("could not ask the Hub whose HF_TOKEN this is: %s", type(exc).__name__)
            return self._admins | ({self._owner} if self._owner else set())

    def __contains__(self, account: object) -> bool:
        return isinstance(account, str) and bool(account) and account in self.names()


def _hub_whoami(token: str, endpoint: str | None) -> str:
    from huggingface_hub import HfApi

    return str(HfApi(endpoint=endpoint, token=token).whoami().get("name") or "")


class FlagDesk:
    """Takes flags into a FlagBook and hides them, under the caps above. Thread-safe (the book's files lock)."""

    def __init__(self, book: FlagBook, *, per_hour: int = FLAGS_PER_HOUR, owners: SpaceOwners | None = None,
                 on_change: Callable[[], None] | None = None) -> None:
        self.book, self.owners = book, owners or SpaceOwners()
        self._quota = SaveQuota(per_hour, noun="flag", done="added", counted="account",
                                then="The next one can be added")
        self._on_change = on_change or (lambda: None)

    @property
    def per_hour(self) -> int:
        return self._quota.per_hour

    def flag(self, author: str | None, episode_id: str, step_kind: str, step: object, label: str, note: str, *,
             turns: int | None, drafts: int) -> dict:
        """Add `author`'s flag on one step of a rollout that took `turns` turns and sent `drafts` plans; the row
        written. FlagRefused saying why when it is not taken (nothing written, nothing counted)."""
        if not author:
            raise FlagRefused(SIGN_IN)
        if not valid_episode_id(episode_id):
            raise FlagRefused("Open a rollout first: a flag points at one of its steps.")
        key = label_key(label)
        if key is None:
            raise FlagRefused(f"Pick a label: {', '.join(LABELS.values())}.")
        number = _step_number(step)
        _check_step(step_kind, number, turns, drafts)
        text = clean_note(note)
        if len(text) > NOTE_CHARS:
            raise FlagRefused(f"A note is at most {NOTE_CHARS} characters; this one has {len(text)}.")
        try:
            row = new_flag(episode_id, step_kind, number, key, text, author)
        except FlagError as exc:
            raise FlagRefused(f"That flag cannot be kept: {exc}") from None
        try:
            self._quota.take(author)
        except QuotaExceeded as exc:
            raise FlagRefused(str(exc)) from None
        try:
            written = self.book.add(row)
        except OSError as exc:
            self._quota.give_back(author)
            raise FlagRefused(f"The flag could not be saved: {exc.strerror or exc}") from None
        self._on_change()
        return written

    def may_hide(self, account: str | None) -> bool:
        return account in self.owners

    def hide(self, account: str | None, flag_id: str) -> dict:
        """Hide a flag, for the Space's owner; the row as it now stands. FlagRefused saying why otherwise."""
        if not account:
            raise FlagRefused("Sign in with Hugging Face first: only the Space's owner hides a flag.")
        if not self.may_hide(account):
            raise FlagRefused("Only the Space's owner (the account of its HF_TOKEN, or one ADMINS names) hides a "
                              "flag.")
        if not valid_episode_id(flag_id):
            raise FlagRefused("That is not a flag id: ids are 1-64 letters, digits, '-' or '_'.")
        try:
            row = self.book.hide(flag_id)
        except KeyError:
            raise FlagRefused(f"No flag {flag_id} on this Space.") from None
        except OSError as exc:
            raise FlagRefused(f"The flag could not be hidden: {exc.strerror or exc}") from None
        self._on_change()
        return row


def _step_number(step: object) -> int:
    try:
        number = int(step)  # type: ignore[call-overload]
        if isinstance(step, bool) or number != float(step):  # type: ignore[arg-type]
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        raise FlagRefused(f"The step is a whole number from 1, not {str(step)[:20]!r}.") from None
    return number


def _check_step(step_kind: str, number: int, turns: int | None, drafts: int) -> None:
    if step_kind not in STEP_KINDS:
        raise FlagRefused(f"A flag points at a {' or a '.join(STEP_KINDS)}, not {str(step_kind)[:20]!r}.")
    last = drafts if step_kind == "draft" else turns
    if step_kind == "draft" and not drafts:
        raise FlagRefused("This rollout sent no plan, so it has no draft to flag: flag a turn.")
    if last is not None and not 1 <= number <= last:
        raise FlagRefused(f"This rollout has {step_kind}s 1 to {last}; there is no {step_kind} {number}.")
    if last is None and number < 1:
        raise FlagRefused(f"Steps count from 1; there is no {step_kind} {number}.")
