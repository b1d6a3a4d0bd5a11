"""What the app's tabs share: settings read once from the environment, the store and the running episodes."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from agent.runs import RunRegistry
from agent.tasks import PUBLIC_SERVER
from rollouts.store import RolloutStore

SERVER_CHOICES = [("Embedded (this Space, offline)", "embedded"),
                  ("Public PortSimEnv (fineenvs-portsimenv.hf.space)", "public"),
                  ("Custom URL", "custom")]


@dataclass
class Settings:
    env_url: str | None  # BERTH_ENV_URL: play on this server by default instead of the embedded one
    rollout_dir: Path
    dataset: str | None
    hub_token: str | None
    public_rollouts: str | None
    space_id: str | None
    max_episodes: int
    max_episodes_per_session: int

    @classmethod
    def from_env(cls) -> Settings:
        space_id = os.environ.get("SPACE_ID") or None
        default_dir = "/data/rollouts" if space_id and Path("/data").is_dir() else "rollouts"
        return cls(
            env_url=os.environ.get("BERTH_ENV_URL") or None,
            rollout_dir=Path(os.environ.get("ROLLOUT_DIR") or default_dir),
            dataset=os.environ.get("ROLLOUT_DATASET") or None,
            hub_token=os.environ.get("HF_TOKEN") or None,
            public_rollouts=os.environ.get("PUBLIC_ROLLOUTS", "FineEnvs/PortSimEnv") or None,
            space_id=space_id,
            max_episodes=int(os.environ.get("ARENA_MAX_EPISODES", "16")),
            max_episodes_per_session=int(os.environ.get("ARENA_MAX_EPISODES_PER_SESSION", "2")),
        )

    @property
    def public_url(self) -> str | None:
        """The Space's public page: share links must point there, since the app runs in an iframe."""
        return f"https://huggingface.co/spaces/{self.space_id}" if self.space_id else None


@dataclass
class AppContext:
    settings: Settings
    store: RolloutStore
    registry: RunRegistry

    @classmethod
    def create(cls, settings: Settings | None = None) -> AppContext:
        settings = settings or Settings.from_env()
        pushing = bool(settings.dataset and settings.hub_token)
        store = RolloutStore(settings.rollout_dir, dataset=settings.dataset if pushing else None,
                             token=settings.hub_token if pushing else None)
        registry = RunRegistry(store.save, max_total=settings.max_episodes,
                               max_per_owner=settings.max_episodes_per_session)
        return cls(settings, store, registry)

    def server_url(self, choice: str, custom: str = "") -> str | None:
        """The server a run plays on: None for the embedded one."""
        if choice == "public":
            return PUBLIC_SERVER
        if choice == "custom":
            url = (custom or "").strip()
            if not url.startswith(("http://", "https://", "ws://", "wss://")):
                raise ValueError("Enter the server URL, e.g. https://fineenvs-portsimenv.hf.space")
            return url
        if choice in ("embedded", "", None):
            return self.settings.env_url
        # The API takes a URL in the same slot.
        return self.server_url("custom", choice)

    def share_link(self, query: str, base_url: str | None = None) -> str:
        """A link to this app with `query` (`episode=...` or `tab=browse&rollout=...`)."""
        base = self.settings.public_url or (base_url or "").rstrip("/")
        return f"{base}/?{query}" if base else f"?{query}"
