"""When a sample is too small to measure or to rank: the one home of the minimums and of the words that say so.

Read by the board (rollouts.board: its intervals and its order; rollouts.board_text: its notes), the arena ratings
(rollouts.ratings: who is rated and ranked), and through them by Browse's leaderboard and the CLI (`python -m agent
board` and `ratings`), so every screen draws the line in the same place and says it in the same words.
"""

from __future__ import annotations

# An interval from one episode is that episode's value twice: a certainty it does not have.
MIN_INTERVAL_EPISODES = 2
# Below this a model is listed but not ranked: on the board, fewer episodes (listed after the ranked models); in the
# arena, fewer tasks with a battle (no rating, no rank). Five tasks is where a bootstrap over tasks starts to vary.
MIN_RANKED = 5
TOO_SMALL = "n too small"  # what an interval's place says instead
# Below either of these a model's standing is provisional (LMArena's word for a score short of votes): shown on the
# board (its `mark`), in the ratings and on its reproducibility card. Twenty tasks is two fifths of the eval week;
# fifty battles is where the arena's interval narrows to a few dozen points.
PROVISIONAL_TASKS = 20
PROVISIONAL_BATTLES = 50
PROVISIONAL = "provisional"


def has_interval(n: int) -> bool:
    """Whether `n` episodes (or priced episodes, or episodes with a naive reference) give an interval."""
    return n >= MIN_INTERVAL_EPISODES


def ranked(n: int) -> bool:
    """Whether a model with `n` episodes on the board (or tasks with a battle in the arena) is ranked."""
    return n >= MIN_RANKED


def interval_note() -> str:
    return f"{TOO_SMALL}: no interval from fewer than {MIN_INTERVAL_EPISODES} episodes"


def board_rank_note(small: list[str], *, everyone: bool = False) -> str:
    """Under a board listing the models in `small` (fewer than MIN_RANKED episodes) after the ranked ones, or
    holding no other (`everyone`)."""
    if everyone:
        return (f"every model has fewer than {MIN_RANKED} episodes, so none is ranked (no arena rating or rank): "
                "read the order as a first look, not a result")
    return (f"fewer than {MIN_RANKED} episodes, so listed last and unranked (no arena rating or rank): "
            + ", ".join(small))


def arena_minimum() -> str:
    return f"a model is rated and ranked once it has battles on at least {MIN_RANKED} tasks"


def arena_too_few(tasks: int) -> str:
    """The note of a model the arena does not rate for want of tasks."""
    return (f"no rating: battles on {tasks} task{'s' * (tasks != 1)}; a rating needs at least {MIN_RANKED} tasks "
            "shared with another model")


def provisional_why(tasks: int | None, battles: int | None) -> str | None:
    """Why a model on `tasks` tasks with `battles` arena battles (either None: not counted) is provisional; None
    when it is not."""
    short = [f"{tasks} task{'s' * (tasks != 1)} (fewer than {PROVISIONAL_TASKS})"
             if tasks is not None and tasks < PROVISIONAL_TASKS else "",
             f"{battles} battle{'s' * (battles != 1)} (fewer than {PROVISIONAL_BATTLES})"
             if battles is not None and battles < PROVISIONAL_BATTLES else ""]
    return " and ".join(s for s in short if s) or None


def provisional_note() -> str:
    return (f"{PROVISIONAL}: fewer than {PROVISIONAL_TASKS} tasks played or fewer than {PROVISIONAL_BATTLES} arena "
            "battles fought; read its place as a first look")
