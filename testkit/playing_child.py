"""A process that plays baseline episodes slowly into a rollout folder and never finishes them in time: the
victim of the crash tests (`kill -9` it, then open the folder again).

    python -m testkit.playing_child <rollout folder> <episodes> [<seconds per step>] [match]

It prints `started <episode_id>` for each episode it starts, then waits until it is killed. With `match`, the
episodes are one random arena match's two sides (agent.match_runs), and it prints `match <match_id>` first.
"""

from __future__ import annotations

import sys
import threading

from agent.match_runs import MatchRegistry
from agent.runs import RunRegistry
from berth_env.embedded import embedded_url
from rollouts.matches import MatchBook
from rollouts.store import RolloutStore
from testkit.tasks import TASK_ID


def main(folder: str, episodes: int, pace_s: float = 5.0, match: bool = False) -> None:
    store = RolloutStore(folder)
    registry = RunRegistry(store.save, max_total=episodes, max_per_visitor=episodes, journal=store.running)
    url = embedded_url()
    if match:
        matches = MatchRegistry(registry, MatchBook(store.root, store.writer_id))
        live = matches.start("baseline:greedy", "baseline:hasty", TASK_ID, mode="random", owner="crash-test",
                             env_url=url, baseline_pace_s=pace_s)
        print("match", live.match_id, flush=True)
        for run in live.runs:
            print("started", run.episode_id, flush=True)
        threading.Event().wait()
    for _ in range(episodes):
        run = registry.start("baseline:greedy", TASK_ID, owner="crash-test", env_url=url,
                             baseline_pace_s=pace_s)
        print("started", run.episode_id, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), *(float(a) for a in sys.argv[3:4]), match=sys.argv[4:5] == ["match"])
