"""A process that plays baseline episodes slowly into a rollout folder and never finishes them in time: the
victim of the crash tests (`kill -9` it, then open the folder again).

    python -m testkit.playing_child <rollout folder> <episodes> [<seconds per step>] [match]

It prints `started <episode_id>` for each episode it starts, then waits until it is killed. With `match`, the
episodes are one random arena match's two sides (live.match_runs), and it prints `match <match_id>` first.
`killed_after_first_turns` starts it, and kills it once every episode is a rollout (one turn taken) and not yet done.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from agent.request import EpisodeRequest
from berth_env.embedded import embedded_url
from live.match_runs import MatchRegistry
from live.runs import RunRegistry
from rollouts.journal import RUNNING_DIR
from rollouts.matches import MatchBook
from rollouts.store import RolloutStore
from testkit.tasks import TASK_ID


def main(folder: str, episodes: int, pace_s: float = 5.0, match: bool = False) -> None:
    store = RolloutStore(folder)
    registry = RunRegistry(store.save, max_total=episodes, max_per_visitor=episodes, journal=store.running)
    url = embedded_url()
    if match:
        matches = MatchRegistry(registry, MatchBook(store.root, store.writer_id))
        live = matches.start(*(EpisodeRequest.of(model, TASK_ID, env_url=url, baseline_pace_s=pace_s)
                               for model in ("baseline:greedy", "baseline:hasty")), mode="random", owner="crash-test")
        print("match", live.match_id, flush=True)
        for run in live.runs:
            print("started", run.episode_id, flush=True)
        threading.Event().wait()
    for _ in range(episodes):
        run = registry.start(EpisodeRequest.of("baseline:greedy", TASK_ID, env_url=url, baseline_pace_s=pace_s),
                             owner="crash-test")
        print("started", run.episode_id, flush=True)
    threading.Event().wait()


def journal_entries(root: Path) -> dict[str, dict]:
    """The records of the episodes running in `root`'s crash journal, by episode id, as they stand now."""
    found = {}
    for path in (root / RUNNING_DIR).glob("*.json"):
        try:
            found[path.stem] = json.loads(path.read_bytes())["record"]
        except (OSError, ValueError, KeyError):
            continue  # being replaced right now
    return found


def killed_after_first_turns(warm_python: Any, root: Path, episodes: int, pace_s: float = 4.0,
                             match: bool = False) -> tuple[str, dict[str, dict]]:
    """Play `episodes` (a match's two sides with `match`) in this child, `kill -9` it once each has taken its first
    turn (killed before, it would be no rollout) and, `pace_s` a step, none has finished; what it printed and the
    journal's records as they stood at the kill."""
    child = warm_python.popen("testkit.playing_child", str(root), str(episodes), str(pace_s),
                              *(["match"] if match else []))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            entries = journal_entries(root)
            if len(entries) == episodes and all(r.get("turns", 0) >= 1 for r in entries.values()):
                break
            assert child.poll() is None, child.output("stderr")
            time.sleep(0.2)
        else:
            raise AssertionError(f"the episodes never took a turn: {child.output('stderr')}")
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
    return child.output("stdout"), journal_entries(root)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), *(float(a) for a in sys.argv[3:4]), match=sys.argv[4:5] == ["match"])
