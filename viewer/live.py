"""What the Run tab shows of an episode, kept up to date one event at a time.

Pure state: events in, display objects out (chat messages, status line, plans for the chart, the grade). The Gradio
handlers decide when to send what; this module decides what it looks like.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rollouts.events import Event
from rollouts.record import Record
from viewer.chat import ChatBuilder
from viewer.summary import status_line

# Non-delta events are few (a handful per turn); the status line only needs those and the newest event.
_DELTAS = ("text_delta", "reasoning_delta", "tool_args_delta")


class LiveView:
    def __init__(self, task: dict | None = None, *, show_tokens: bool = True):
        self.task = task
        self.show_tokens = show_tokens  # baselines spend no tokens: a "0 in / 0 out" line would only puzzle
        self.chat = ChatBuilder(task)
        self.steps: list[dict] = []
        self.record: dict | None = None
        self.new_plan = False  # a plan arrived since the chart was last drawn
        self._key_events: list[Event] = []
        self._last: Event | None = None

    def add(self, event: Event) -> None:
        self.chat.add(event)
        self._last = event
        kind = event["type"]
        if kind in _DELTAS:
            return
        self._key_events.append(event)
        if kind == "tool_result" and event.get("step"):
            self.steps.append(event["step"])
            self.new_plan = True
        elif kind == "episode_finished":
            self.record = event["record"]
            steps = Record(self.record).steps
            if len(steps) > len(self.steps):
                self.steps = list(steps)
                self.new_plan = True

    def extend(self, events: Iterable[Event]) -> None:
        for event in events:
            self.add(event)

    @property
    def messages(self) -> list[Any]:
        return self.chat.messages

    def status(self) -> str:
        events = self._key_events
        if self._last is not None and (not events or events[-1] is not self._last):
            events = [*events, self._last]
        return status_line(events, tokens=self.show_tokens) if events else "starting"
