"""The agent loop: model adapters, the episode loop and its events, baseline players, the rollout record, the CLI."""

APP_VERSION = "0.1.0"
