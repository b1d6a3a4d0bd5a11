"""The one secret scrubber: every text that may reach a record, a log, a terminal or a page leaves without a secret
in it (an API key, a Hugging Face token), nor what gives part of one away.

It sits in rollouts, the lowest layer that handles a secret (the store's pusher holds the Hub token), so the loop,
the providers, the sweep and the pusher all scrub through it; agent.providers.base re-exports it as `scrub`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

REDACTED = "[redacted]"
_KEY_CHAR = r"[A-Za-z0-9_\-]"
# A key echoed masked: its first characters, a mask (`***`, `...`, `…`, `•••`), its last characters. Head and tail
# are bounded so a long run of key characters without a mask costs a few steps per character, not a scan each.
_MASKED = re.compile(rf"(?<!{_KEY_CHAR})(?P<head>{_KEY_CHAR}{{0,32}})(?P<mask>(?:[*•·#]|\.{{2,}}|…)+)"
                     rf"(?P<tail>{_KEY_CHAR}{{0,32}})")
_KEY_RUN = re.compile(rf"{_KEY_CHAR}{{8,}}")


def scrub(text: str, secrets: Mapping[str, str] | Iterable[str]) -> str:
    """Remove every secret (an API key, a token; of a mapping, its values) from a text that may reach a record, a
    log, a terminal or a page, and what gives part of one away: a masked echo (providers quote a wrong key as
    `sk-proj-****...WXYZ` or `sk-ant-ap...WXYZ`: its first characters, from 4, or its last, from 3, around a mask)
    and any run of 8 or more of its characters in a row (a key cut off by a length limit). The one scrubber: the
    loop's errors, the sweep's messages and logs, the pusher's errors alike."""
    values = secrets.values() if isinstance(secrets, Mapping) else secrets
    keys = [secret for secret in values if secret and len(secret) >= 4]
    for secret in keys:
        text = text.replace(secret, REDACTED)
    if not keys:
        return text

    def masked(match: re.Match) -> str:
        head, tail = match["head"], match["tail"]
        gives_away = any((len(head) >= 4 and key.startswith(head)) or (len(tail) >= 3 and key.endswith(tail))
                         for key in keys)
        return REDACTED if gives_away else match[0]

    text = _MASKED.sub(masked, text)
    return _KEY_RUN.sub(lambda run: REDACTED if any(run[0] in key for key in keys) else run[0], text)
