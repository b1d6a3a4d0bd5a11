"""The agent loop: providers (one per model API, and the baselines), the episode loop and its typed events, building
the rollout record, the task catalog, episodes that outlive a page, hand play, the CLI. See ARCHITECTURE.md."""

APP_VERSION = "0.1.0"
