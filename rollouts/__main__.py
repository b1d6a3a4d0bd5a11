"""`python -m rollouts ...`: rollouts.cli."""

import sys

from rollouts.cli import main

sys.exit(main())
