"""A tasks dataset on testkit/fakehub.py for the dataset, play and browser tests.

`published_dataset(hub)` commits `tasks/eval.parquet` (the 50 bundled eval tasks) and `tasks/train.parquet`
(TRAIN_COUNT bundled tasks relabeled `train` with new ids, then two broken rows: one whose optimum is wrong in the
row and in its task, one whose naive cost is wrong) and returns what a load must offer and leave out.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from berth_env import load_pack
from berth_env.pack import base_pack
from testkit.published import publish
from testkit.task_dataset import as_train, dataset_files, task_row, train_copies

REPO = "FineEnvs/PortSimEnv"
TOKEN = "hf_test"
TRAIN_COUNT = 20
TRAIN_TASK = "dock-24B-w06x1-busy-100"  # the first train copy: dock-24B-w06x1-busy-0 (optimum 87) relabeled


@dataclass
class Published:
    revision: str
    eval_ids: list[str]
    train_ids: list[str]
    broken: dict[str, str]  # task id -> what is wrong with it

    @property
    def offered(self) -> list[str]:
        return [*self.eval_ids, *self.train_ids]


def bundled() -> list[dict]:
    return list(base_pack().tasks)


def broken_rows() -> tuple[list[dict], dict[str, str]]:
    """Two rows whose references do not hold under our grader."""
    tasks = bundled()
    wrong_optimum = as_train(tasks[0], 900)
    wrong_optimum["reference"] = {**wrong_optimum["reference"],
                                  "optimal_cost": wrong_optimum["reference"]["optimal_cost"] - 1}
    wrong_naive = as_train(tasks[1], 901)
    wrong_naive["reference"] = {**wrong_naive["reference"], "naive_cost": wrong_naive["reference"]["naive_cost"] + 5}
    rows = [task_row(wrong_optimum), task_row(wrong_naive)]
    return rows, {wrong_optimum["task_id"]: "optimal plan costs", wrong_naive["task_id"]: "naive plan costs"}


def published_dataset(hub, *, train_count: int = TRAIN_COUNT, repo: str = REPO) -> Published:
    tasks = bundled()
    train = train_copies(tasks, train_count)
    rows, broken = broken_rows()
    revision = publish(hub.url, repo, dataset_files(tasks, train, broken_rows=rows), token=TOKEN)
    return Published(revision, [t["task_id"] for t in tasks], [t["task_id"] for t in train], broken)


def full_task(task_id: str) -> dict:
    return copy.deepcopy(load_pack().get(task_id))
