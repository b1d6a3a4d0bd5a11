"""The agent loop: the run request, providers (one per model API, and the baselines), the OpenEnv session and the
guard on the servers it dials, and the episode loop that turns a request into events and a record. The app's live
episodes are `live/`, the task catalog `catalog/`, the CLI `batch/` (run as `python -m agent`). See ARCHITECTURE.md."""

APP_VERSION = "0.1.0"
