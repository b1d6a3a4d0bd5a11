"""What the loop tells the model between turns, and how to tell which note a stored message was.

The loop keeps each note's kind in the record (`{"role": "user", "content", "kind"}`). Records written without
kinds (upstream's harness, PORTSIM_SPEC §9.1, stores its notes as bare `{role: user, content}`) still hold only
the three notes a harness sends the model: a nudge after a turn without a tool call, the notes and nudge after a
turn cut off by the output limit, and the last-turn reminder. `note_kind` names them again from their words and,
failing that, from where they stand in the conversation.
"""

from __future__ import annotations

from agent.events import NoteKind

OPENING = ("{situation}\n\nMake the new berth plan for every ship in the table. Test drafts with check_plan, "
           "then send your final plan with submit_plan.")
LAST_TURN = "This is your last turn. Call submit_plan now with the best plan you have."
NUDGE = ("You did not call a tool. A plan only counts when it goes through the tools: call check_plan to test a "
         "draft, or submit_plan to hand in your final plan.")
CUTOFF_NUDGE = ("Your last turn ran out of output tokens before it called a tool; your notes from it are above. "
                "Keep your reasoning short now and call check_plan with your current draft, or submit_plan.")
CUTOFF_NOTES = "(notes from the cut-off turn)\n{notes}"  # how the record keeps the notes handed back

# Words that give a note away, checked in this order: "your last turn had no tool call" is a nudge, and "your last
# turn ran out of output tokens" a cutoff, though both say "last turn".
_CUTOFF_WORDS = ("cut-off turn", "cut off", "output tokens", "output limit")
_NUDGE_WORDS = ("no tool call", "without a tool call", "did not call a tool", "didn't call a tool")
_LAST_TURN_WORDS = ("last turn", "final turn")


def note_kind(text: str, *, after_toolless_turn: bool = False, after_cut_off_turn: bool = False,
              before_last_turn: bool = False) -> NoteKind:
    """The kind of a user note stored without one.

    `after_toolless_turn`: the assistant turn before it called no tool (and `after_cut_off_turn`: it stopped at
    the output limit); `before_last_turn`: the next assistant turn is the episode's last.

    A note nothing gives away is a `nudge`: of the three notes a harness sends, `cutoff` and `last_turn` each
    claim a fact about the episode (the output limit was hit; the turns are up) that an unknown text does not
    support, while a nudge says only that the harness spoke to the model to make it act, which any such note does.
    """
    words = text.lower()
    if any(w in words for w in _CUTOFF_WORDS):
        return "cutoff"
    if any(w in words for w in _NUDGE_WORDS):
        return "nudge"
    if "submit" in words and any(w in words for w in _LAST_TURN_WORDS):
        return "last_turn"
    if after_toolless_turn:
        return "cutoff" if after_cut_off_turn else "nudge"
    return "last_turn" if before_last_turn else "nudge"
