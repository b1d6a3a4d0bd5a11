"""What the loop tells the model between turns.

The loop keeps each note's kind in the record (`{"role": "user", "content", "kind"}`); a record written without
kinds has them read again from their words by rollouts.replay's `note_kind`.
"""

from __future__ import annotations

OPENING = ("{situation}\n\nMake the new berth plan for every ship in the table. Test drafts with check_plan, "
           "then send your final plan with submit_plan.")
LAST_TURN = "This is your last turn. Call submit_plan now with the best plan you have."
NUDGE = ("You did not call a tool. A plan only counts when it goes through the tools: call check_plan to test a "
         "draft, or submit_plan to hand in your final plan.")
CUTOFF_NUDGE = ("Your last turn ran out of output tokens before it called a tool; your notes from it are above. "
                "Keep your reasoning short now and call check_plan with your current draft, or submit_plan.")
CUTOFF_NOTES = "(notes from the cut-off turn)\n{notes}"  # how the record keeps the notes handed back
