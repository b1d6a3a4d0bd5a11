"""`python -m rollouts compact [--dir D]`: fold a rollout folder's JSONL index rows into Parquet (rollouts.compact)."""

import sys

from rollouts.compact import main

sys.exit(main())
