"""What one visitor may see of an arena match, as plain values: the match now (from the app's registry while it is
fresh, from its row in the folder after), and its verdict, heads and votes as Markdown or JSON.

In random mode the models' names are left out of everything here until the visitor votes or skips (`names_shown`);
the episodes' own displays are masked by viewer/run/stream.py. Model specs are anyone's text: every one is escaped
before it reaches Markdown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from live.match_runs import LiveMatch
from rollouts.arena import Verdict, verdict
from rollouts.links import beat_query
from rollouts.matches import VOTE_CHOICES
from rollouts.record import Record
from viewer.markdown import escape_cell

SIDES = ("a", "b")
VOTE_LABELS = {"a": "A is better", "b": "B is better", "tie": "Tie", "both_bad": "Both are bad"}
HIDDEN = "hidden until you vote or skip"
RULE = "the higher reward wins, then the lower cost, then fewer checks, then fewer output tokens"


@dataclass(frozen=True)
class Snapshot:
    """A match as one visitor may see it now."""

    match_id: str
    mode: str
    task_id: str
    models: tuple[str, str]
    episodes: tuple[str, str]
    records: tuple[dict | None, dict | None]  # each side's record once both have ended
    ended: bool
    row: dict | None  # the saved row (votes included), once written
    problem: str | None  # why there is no row
    names_shown: bool
    ballot: str  # live.match_runs.LiveMatch.ballot, or `closed` for a match no longer held here

    @property
    def votes_shown(self) -> bool:
        """Counts show once the visitor has had their say (or cannot any more), so they never sway a vote."""
        return self.row is not None and self.ballot in ("voted", "skipped", "closed")

    def names(self, markdown: bool = True) -> tuple[str, str]:
        """How the sides are called: `A` and `B`, with each model once the names may be shown."""
        if not self.names_shown:
            return "A", "B"
        shown = [escape_cell(m) if markdown else m for m in self.models]
        return f"A ({shown[0]})", f"B ({shown[1]})"

    @property
    def judged(self) -> Verdict | None:
        """The verdict from both records, once the match is saved (None before, or without records)."""
        if self.row is None or not all(self.records):
            return None
        return verdict(self.records[0] or {}, self.records[1] or {})


def live_snapshot(match: LiveMatch, visitor: str | None) -> Snapshot:
    ended = match.finished
    records = (match.a.record, match.b.record) if ended else (None, None)
    return Snapshot(match.match_id, match.mode, match.task_id, (match.a.model, match.b.model),
                    (match.a.episode_id, match.b.episode_id), records, ended, match.row, match.problem,
                    match.names_shown_to(visitor), match.ballot(visitor))


def stored_snapshot(row: Mapping[str, Any], records: tuple[dict | None, dict | None],
                    ballot: LiveMatch | None = None, visitor: str | None = None) -> Snapshot:
    """A match no longer held whole here, from its row: with its `ballot` while that is open (names as they may be
    shown to `visitor`), else its names shown and its votes closed."""
    shown, stands = (ballot.names_shown_to(visitor), ballot.ballot(visitor)) if ballot else (True, "closed")
    return Snapshot(row["match_id"], row["mode"], row["task_id"], (row["model_a"], row["model_b"]),
                    (row["episode_a"], row["episode_b"]), records, True, dict(row), None, shown, stands)


def api_view(snap: Snapshot) -> dict:
    """The `/arena_match` answer: names and episode ids null (and `names` saying so) until the caller may see
    them; votes null until the caller has voted or skipped."""
    judged, row = snap.judged, snap.row or {}
    ends = [_end_reason(record) for record in snap.records]
    return {"match_id": snap.match_id, "mode": snap.mode, "task_id": snap.task_id,
            "state": "ended" if snap.ended else "running", "names": "shown" if snap.names_shown else HIDDEN,
            "model_a": snap.models[0] if snap.names_shown else None,
            "model_b": snap.models[1] if snap.names_shown else None,
            "episode_a": snap.episodes[0] if snap.names_shown else None,
            "episode_b": snap.episodes[1] if snap.names_shown else None,
            "reward_a": row.get("reward_a"), "reward_b": row.get("reward_b"),
            "end_reason_a": ends[0], "end_reason_b": ends[1], "winner": row.get("winner"),
            "verdict": judged.sentence(snap.names(markdown=False)) if judged else None,
            "votes": dict(row["votes"]) if snap.votes_shown else None, "ballot": snap.ballot,
            "saved": snap.row is not None, "problem": snap.problem}


def verdict_markdown(snap: Snapshot) -> str:
    """`#arena-verdict`: who is playing, who won and on what, or why there is no verdict."""
    if not snap.ended:
        return f"⏳ Both agents are playing `{escape_cell(snap.task_id)}`: the verdict comes when both have ended."
    if snap.row is None:
        return f"⚠️ No verdict: {escape_cell(snap.problem or 'the match is still being saved')}."
    judged = snap.judged
    if judged is not None:
        line = judged.sentence(snap.names())
    else:  # an old match whose records cannot be read here: its row still says who won
        line = "A tie." if snap.row["winner"] == "tie" else f"{snap.names()['ab'.index(snap.row['winner'])]} wins."
    icon = "🤝" if snap.row["winner"] == "tie" else "🏆"
    return f"### {icon} {line}" + beat_links(snap)


def beat_links(snap: Snapshot) -> str:
    """"Try to beat this": Play on the match's task from either side's last plan, once the names are shown (an
    episode id would name a hidden side) and for the sides that sent a plan."""
    if not snap.names_shown:
        return ""
    links = [f"[{side.upper()}'s plan](?{beat_query(snap.task_id, episode)})"
             for side, episode, record in zip(SIDES, snap.episodes, snap.records, strict=True)
             if episode and record is not None and Record.of(record).plan_steps]
    return f"\n\n▶ Try to beat this in Play, from {' or '.join(links)}." if links else ""


def ballot_markdown(snap: Snapshot) -> str:
    """The line beside the vote: the question, or what became of this visitor's vote, and the votes once shown."""
    question = {"open": "**Which agent would you trust with the port?** " + (
                    "The names show after your vote (or Skip)." if snap.mode == "random" and not snap.names_shown
                    else "One vote per visitor."),
                "voted": "✅ Your vote is counted.",
                "skipped": "Names shown: this match takes no vote from you (random-mode votes are blind).",
                "closed": "Voting on this match is closed.", "unsaved": "", "wait": ""}.get(snap.ballot, "")
    return " ".join(part for part in (question, votes_line(snap)) if part)


def votes_line(snap: Snapshot) -> str:
    if not snap.votes_shown:
        return ""
    votes = snap.row["votes"] if snap.row else {}
    counted = " · ".join(f"{VOTE_LABELS[c].lower()} {int(votes.get(c, 0))}" for c in VOTE_CHOICES)
    return f"Votes so far: {counted} (shown beside the arena rating, never mixed into it)."


def head_markdown(snap: Snapshot, side: str) -> str:
    """A side's head: its letter, its model or that the name is hidden, and a cup for the winner."""
    index = SIDES.index(side)
    name = f"**{escape_cell(snap.models[index])}**" if snap.names_shown else f"*model {HIDDEN}*"
    won = snap.row is not None and snap.row.get("winner") == side
    return f"### {'🏆 ' if won else ''}{side.upper()} · {name}"


def _end_reason(rollout: Record | Mapping[str, Any] | None) -> str | None:
    return Record.of(rollout).end_reason or None if rollout is not None else None
