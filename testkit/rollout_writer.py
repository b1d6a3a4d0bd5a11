"""`python -m testkit.rollout_writer --dir D --dataset R --endpoint URL --records N --seed S`: one writer process
for the many-writers test: saves N generated records through a RolloutStore pushing to R, flushes, prints
"flushed" when nothing is left to push. The compaction threshold is lowered so the writer folds its index into
Parquet while it pushes."""

from __future__ import annotations

import argparse

from rollouts import hub_push
from rollouts.store import RolloutStore
from testkit.records import make_records


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--token", default="hf_test")
    parser.add_argument("--records", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compact-over-bytes", type=int, default=2500)
    parser.add_argument("--started", default="2026-11-29T10:00:00Z", help="every record's start: one index file")
    args = parser.parse_args()
    hub_push.COMPACT_OVER_BYTES = args.compact_over_bytes
    hub_push.CONFLICT_BASE_S = 0.02
    store = RolloutStore(args.dir, dataset=args.dataset, token=args.token, endpoint=args.endpoint,
                         push_every_s=0.2, push_every_n=3, retry_base_s=0.05, retry_max_s=0.5)
    for record in make_records(args.records, seed=args.seed, started=args.started):
        store.save(record)
    print("flushed" if store.flush(timeout=120) else f"not flushed: {store.status()}", flush=True)
    store.close()


if __name__ == "__main__":
    main()
