"""Time loading the tasks dataset at full size: 1,100 tasks (the 50 bundled eval tasks + 1,050 train copies) served by
testkit/fakehub.py, through catalog.task_dataset with the real huggingface_hub.

Cold: an empty cache folder (download, read the Parquet, grade every reference, write the pack, load it). Warm: a
restart on the same cache (one probe, hash the two files, load the pack; no download, no grading). Warm with the Hub
down: the same without the probe's answer. Also the picker's work on 1,100 tasks (the catalog and a filter) and the
resident memory the served pack takes.

    python bench/tasks_bench.py [--runs 3]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from berth_env.pack import base_pack  # noqa: E402
from catalog.task_dataset import TaskDataset, uninstall  # noqa: E402
from catalog.tasks import embedded_catalog, filter_choices  # noqa: E402
from testkit.fakehub import running_fakehub  # noqa: E402
from testkit.task_dataset import dataset_files, train_copies  # noqa: E402

REPO = "bench/PortSimEnv"


def publish(url: str, files: dict[str, bytes]) -> None:
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi(endpoint=url, token="hf_bench")
    api.create_repo(REPO, repo_type="dataset", exist_ok=True)
    api.create_commit(REPO, [CommitOperationAdd(p, d) for p, d in files.items()], commit_message="tasks",
                      repo_type="dataset")


def timed(work) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def load_time(cache: Path, endpoint: str) -> float:
    return timed(lambda: TaskDataset(REPO, cache_dir=cache, endpoint=endpoint).load())


def rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096 / 1e6


def pack_memory_mb(cache: Path) -> float:
    """What loading the written pack adds to this process (its own load, outside the pack cache)."""
    from berth_env import load_pack

    [pack_dir] = [p for p in (cache / "packs").iterdir() if not p.name.startswith(".")]
    gc.collect()
    before = rss_mb()
    pack = load_pack([pack_dir])
    gc.collect()
    added = rss_mb() - before
    del pack
    return added


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    tasks = list(base_pack().tasks)
    files = dataset_files(tasks, train_copies(tasks, 1050))
    sizes = {p: len(d) for p, d in files.items() if p.endswith(".parquet")}
    cold, warm, offline = [], [], []
    with running_fakehub() as hub:
        publish(hub.url, files)
        for _ in range(runs):
            cache = Path(tempfile.mkdtemp(prefix="tasks-bench-"))
            cold.append(load_time(cache, hub.url))
            uninstall()
            warm.append(load_time(cache, hub.url))
            status = TaskDataset(REPO, cache_dir=cache, endpoint=hub.url).load()
            assert status.total == 1100, status
        hub.down()
        for _ in range(runs):
            uninstall()
            offline.append(load_time(cache, hub.url))
    catalog = statistics.median(timed(lambda: embedded_catalog()) for _ in range(20))
    choices = embedded_catalog()
    refilter = statistics.median(timed(lambda: filter_choices(choices, split="train", tier="storm", ships="21–30"))
                                 for _ in range(200))
    memory = pack_memory_mb(cache)
    uninstall()
    print(f"Parquet files: {', '.join(f'{p} {n / 1e6:.1f} MB' for p, n in sizes.items())}")
    print(f"| cold start (download, grade 1,100 references, write and load the pack), median of {runs} | "
          f"{statistics.median(cold):.2f} s |")
    print(f"| warm restart (probe, hash, load the pack), median of {runs} | {statistics.median(warm):.2f} s |")
    print(f"| warm restart with the Hub down, median of {runs} | {statistics.median(offline):.2f} s |")
    print(f"| the picker's catalog of 1,100 tasks (cached per pack) | {catalog * 1000:.2f} ms |")
    print(f"| one filter over 1,100 tasks | {refilter * 1000:.2f} ms |")
    print(f"| resident memory of the served pack (1,050 tasks) | {memory:.0f} MB |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
