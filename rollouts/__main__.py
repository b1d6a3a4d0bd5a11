"""`python -m rollouts compact [--dir D]`: fold a rollout folder's JSONL index rows into Parquet (rollouts.compact).
`python -m rollouts traces --backfill [--dir D]`: write the agent-trace files its records lack (rollouts.traces)."""

import sys

from rollouts import compact, traces

# compact.main owns the command line; `traces` is routed here so the two commands stay in their own modules.
args = sys.argv[1:]
sys.exit(traces.main(args[1:]) if args[:1] == ["traces"] else compact.main(args))
