"""The Run section: pick a model and a task, see the task before running, watch the episode live (section.py);
starting an episode and its frames (stream.py); the same for scripts (api.py)."""
