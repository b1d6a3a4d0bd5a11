"""Gradio's per-session state without its up-front cost, so a flood of new visitors is answered at once.

Gradio makes a `SessionState` for every new session, and each API call without a session (a script's `/run`, a
`gradio_client` call) is a new session. Its constructor renders the config of every block of the app up front,
for one use only: the `deep_link` route, which sends the session's whole config. With this app's ~230 blocks that
is about 50 ms of the event loop per new session on an idle core (190 ms on the shared machine): 64 callers at once
held every answer, refusals included, for seconds (BENCHMARKS.md "Load").

`install()` makes that config lazy: a block's config is rendered when the session changes it (as before) or when
the deep link asks for all of them, in block order, from the same blocks, so the deep link sends what it sent
before. It checks itself against Gradio's own constructor on a small app first and stays out when they differ (a
Gradio version that changed the class), logging why.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from copy import copy
from typing import Any

from gradio import state_holder

from rollouts import settings

log = logging.getLogger(__name__)

_ORIGINAL_INIT = state_holder.SessionState.__init__
_ORIGINAL_COMPONENTS = state_holder.SessionState.components
_installed = False


def _lazy_init(self: Any, blocks: Any) -> None:
    self.blocks_config = copy(blocks.default_config)
    # The blocks whose config the original renders at once, in its order.
    self._lazy_ids = [k for k in self.blocks_config.blocks if k in blocks.blocks]
    self.config_values = {}
    self.state_data = {}
    self._state_ttl = {}
    self.is_closed = False
    self.STATE_TTL_WHEN_CLOSED = 1 if settings.GRADIO_IS_E2E_TEST.get() else 3600


def _lazy_components(self: Any) -> Iterator[dict]:
    ids = getattr(self, "_lazy_ids", None)
    if ids is not None:
        made = self.config_values
        ordered = {k: made[k] if k in made else self.blocks_config.config_for_block(k, [], self.blocks_config.blocks[k])
                   for k in ids if k in made or k in self.blocks_config.blocks}
        self.config_values = {**ordered, **{k: v for k, v in made.items() if k not in ordered}}
        self._lazy_ids = None
    yield from _ORIGINAL_COMPONENTS.fget(self)


def _same_as_gradio() -> str | None:
    """Why the lazy state would differ from Gradio's on a small app, or None when it does not."""
    import gradio as gr

    with gr.Blocks() as probe:
        text = gr.Textbox("a", label="t")
        gr.Number(3)
        gr.State(1)
    original, lazy = state_holder.SessionState.__new__(state_holder.SessionState), \
        state_holder.SessionState.__new__(state_holder.SessionState)
    _ORIGINAL_INIT(original, probe)
    _lazy_init(lazy, probe)
    if set(vars(original)) != set(vars(lazy)) - {"_lazy_ids"}:
        return f"SessionState has other fields: {sorted(set(vars(original)) ^ (set(vars(lazy)) - {'_lazy_ids'}))}"
    for state in (original, lazy):
        state[text._id] = gr.Textbox("b", label="t")
    lazy_configs = list(_lazy_components(lazy))
    if list(_ORIGINAL_COMPONENTS.fget(original)) != lazy_configs:
        return "the deep link's configs differ"
    return None


def install() -> bool:
    """Make new sessions cheap (once per process); False when Gradio's class is not the one this was made for."""
    global _installed
    if _installed:
        return True
    problem = _same_as_gradio()
    if problem is not None:
        log.warning("Gradio's session state left as it is (%s): each new session renders every block", problem)
        return False
    state_holder.SessionState.__init__ = _lazy_init  # type: ignore[method-assign]
    state_holder.SessionState.components = property(_lazy_components)  # type: ignore[method-assign,assignment]
    _installed = True
    return True
