"""An episode's default limits: the loop's, the CLI's flags and the Run form's fields all start from these."""

DEFAULT_MAX_TURNS = 12
DEFAULT_MAX_TOKENS = 24000  # per turn
DEFAULT_WALL_CLOCK_S = 1800.0
