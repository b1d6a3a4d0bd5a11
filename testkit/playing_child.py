"""A process that plays baseline episodes slowly into a rollout folder and never finishes them in time: the
victim of the crash tests (`kill -9` it, then open the folder again).

    python -m testkit.playing_child <rollout folder> <episodes> [<seconds per step>]

It prints `started <episode_id>` for each episode it starts, then waits until it is killed.
"""

from __future__ import annotations

import sys
import threading

from agent.runs import RunRegistry
from berth_env.embedded import embedded_url
from rollouts.store import RolloutStore
from testkit.tasks import TASK_ID


def main(folder: str, episodes: int, pace_s: float = 5.0) -> None:
    store = RolloutStore(folder)
    registry = RunRegistry(store.save, max_total=episodes, max_per_visitor=episodes, journal=store.running)
    url = embedded_url()
    for _ in range(episodes):
        run = registry.start("baseline:greedy", TASK_ID, owner="crash-test", env_url=url,
                             baseline_pace_s=pace_s)
        print("started", run.episode_id, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), *(float(a) for a in sys.argv[3:4]))
