"""A stored rollout record's chat, rendered exactly like a live one (the record's events: rollouts.replay)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gradio import ChatMessage

from rollouts.record import Record
from viewer.chat import chat_by_turn, chat_messages


def record_messages(rollout: Record | Mapping[str, Any], task: Mapping[str, Any] | None = None) -> list[ChatMessage]:
    """The chat of a stored rollout, rendered exactly like a live one."""
    return chat_messages(Record.of(rollout).events(), task)


def record_turns(rollout: Record | Mapping[str, Any], task: Mapping[str, Any] | None = None) -> list[tuple[ChatMessage, int | None]]:
    """`record_messages`, each message with the turn it was made in (the share page's turns to link to)."""
    return chat_by_turn(Record.of(rollout).events(), task)
