"""The batch side: the CLI (`python -m agent`), the task x model grid and its shards, and sweeps on Hugging Face Jobs or local processes."""
