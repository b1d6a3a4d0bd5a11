"""Rendering of records and events, the rollout store (local folder + Hub dataset) and the browse index."""
