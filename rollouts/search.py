"""Words in the transcripts of the rollouts at hand, for Browse's search box.

The index rows say who played what; the words a model wrote live in the records. `TranscriptWords` keeps, for
every record it was given (the local folder's, and any record opened from the Hub or upstream), the set of words
of its messages, reasoning and tool calls, as an inverted index: word -> episodes. A search term matches a word
exactly or as its prefix (terms of 3 characters or more), so "gantr" finds "gantry". Thread-safe; records are
added in the background while the page is already answering.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Mapping
from typing import Any

WORD = re.compile(r"[^\W_]{3,32}", re.UNICODE)
MAX_CHARS_PER_RECORD = 400_000  # a runaway transcript is indexed by its first 400k characters


def transcript_text(record: Mapping[str, Any]) -> str:
    """The searchable text of a record: what the model said, thought and called, and the server's answers.

    The rules and the situation are left out: every rollout of a task shares them, and the task id finds those.
    """
    parts: list[str] = []
    for message in record.get("messages") or []:
        if not isinstance(message, Mapping) or message.get("role") not in ("assistant", "tool"):
            continue
        for key in ("content", "reasoning"):
            value = message.get(key)
            if isinstance(value, str):
                parts.append(value)
            elif isinstance(value, list):  # content blocks
                parts += [str(b.get("text", "")) for b in value if isinstance(b, Mapping)]
        for call in message.get("tool_calls") or []:
            if isinstance(call, Mapping):
                parts.append(f"{call.get('name', '')} {str(call.get('arguments', ''))[:2000]}")
    for error in record.get("errors") or []:
        parts.append(str(error))
    return "\n".join(parts)[:MAX_CHARS_PER_RECORD]


def words_of(text: str) -> set[str]:
    return {w.lower() for w in WORD.findall(text)}


class TranscriptWords:
    def __init__(self) -> None:
        self._ids: list[str] = []
        self._number: dict[str, int] = {}
        self._postings: dict[str, set[int]] = {}
        self._vocabulary: list[str] = []  # sorted, rebuilt lazily for prefix search
        self._sorted = True
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, episode_id: str) -> bool:
        return episode_id in self._number

    def add(self, episode_id: str, record: Mapping[str, Any]) -> None:
        """Index one record's words (a record already indexed is left as it is)."""
        words = words_of(transcript_text(record))
        with self._lock:
            if episode_id in self._number:
                return
            number = self._number[episode_id] = len(self._ids)
            self._ids.append(episode_id)
            for word in words:
                posting = self._postings.get(word)
                if posting is None:
                    self._postings[word] = {number}
                    self._sorted = False
                else:
                    posting.add(number)

    def matching(self, term: str) -> set[str]:
        """Episodes whose transcript has a word equal to `term`, or starting with it (terms of 3+ characters)."""
        term = term.lower().strip()
        if len(term) < 3:
            return set()
        with self._lock:
            if not self._sorted:
                self._vocabulary = sorted(self._postings)
                self._sorted = True
            numbers: set[int] = set()
            start = bisect.bisect_left(self._vocabulary, term)
            for word in self._vocabulary[start:]:
                if not word.startswith(term):
                    break
                numbers |= self._postings[word]
            return {self._ids[n] for n in numbers}
