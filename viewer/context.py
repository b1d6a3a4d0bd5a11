"""What the app's sections share: settings read once from the environment, the store (the write side) and the
archive (the read side, with the few records the page has open), the running episodes (model and hand-played), the
tasks dataset loading in the background and the downloads the page offers."""

from __future__ import annotations

import atexit
import threading
from dataclasses import dataclass, field
from pathlib import Path

from agent.netguard import ServerPolicy
from catalog.standard import default_standard
from catalog.task_dataset import TaskDataset, dataset_from_env, serve_tasks_dataset
from catalog.tasks import PUBLIC_SERVER, TaskChoice, embedded_catalog, task_for
from live.budget import BudgetLimits, SpendBudget
from live.flags import FLAGS_PER_HOUR, FlagDesk, SpaceOwners
from live.hand_play import PlayRegistry
from live.match_runs import MatchRegistry
from live.quota import SaveQuota
from live.runs import RunRegistry
from rollouts import settings as environment
from rollouts.annotations import FlagBook
from rollouts.archive import Archive
from rollouts.layout import default_rollout_dir
from rollouts.links import app_link, public_base, rollout_page, space_url
from rollouts.matches import MatchBook
from rollouts.store import RolloutStore
from viewer.downloads import Downloads
from viewer.records import RecordCache

REMOTE_CHOICES_KEPT = 20_000
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
    max_episodes_per_visitor: int  # one IP address or signed-in account, however many sessions or clients
    # A baseline pauses this long before each tool call in the app, so a person watching can follow the story.
    baseline_pace_s: float = 0.5
    tasks_dataset: str | None = None  # TASKS_DATASET: every dock-v1 task; None serves the bundled eval tasks
    tasks_cache: Path | None = None  # TASKS_CACHE: where it is cached (None: catalog.task_dataset's default)
    allowed_servers: str = ""  # ALLOWED_SERVERS: more trusted servers, comma-separated `host[:port]` (netguard)
    custom_servers: bool | None = None  # CUSTOM_SERVERS=0/1: visitors' own servers; None: on unless on a Space
    # Rollouts one visitor may save in any hour, Run and Play together (0: no cap). Every rollout is public; a
    # person playing or watching saves a few an hour, a script 178 in 22 s before this cap.
    max_rollouts_per_hour: int = 30
    # The public address links are built on (rollouts.links.public_base: ARENA_URL, the Space's host, else where
    # the app listens); None: none is known, and links name the address each visitor used.
    arena_url: str | None = None
    # Arena votes one visitor may cast in any hour (0: no cap), one per match at most whatever this says.
    max_votes_per_hour: int = 60
    # What runs on the Space's own keys may spend (live/budget.py): ARENA_BUDGET_* and ARENA_SPACE_MAX_*.
    budget: BudgetLimits = field(default_factory=BudgetLimits)
    # Flags on a step one signed-in account may add in any hour (0: no cap).
    max_flags_per_hour: int = FLAGS_PER_HOUR

    @classmethod
    def from_env(cls, listen: tuple[str, int] | None = None) -> Settings:
        """The settings from the environment; `listen`: where the app listens, its public address when nothing
        else names one (rollouts.links.public_base)."""
        env = environment
        return cls(
            env_url=env.BERTH_ENV_URL.get(),
            rollout_dir=default_rollout_dir(),
            dataset=env.ROLLOUT_DATASET.get(),
            hub_token=env.HF_TOKEN.get(),
            public_rollouts=env.PUBLIC_ROLLOUTS.get(),
            space_id=env.SPACE_ID.get(),
            max_episodes=env.ARENA_MAX_EPISODES.get(),
            max_episodes_per_visitor=(env.ARENA_MAX_EPISODES_PER_VISITOR.get()
                                      or env.ARENA_MAX_EPISODES_PER_SESSION.get()),
            baseline_pace_s=env.ARENA_BASELINE_PACE_S.get(),
            tasks_dataset=dataset_from_env(),
            tasks_cache=env.TASKS_CACHE.get(),
            allowed_servers=env.ALLOWED_SERVERS.get(),
            custom_servers=env.CUSTOM_SERVERS.get(),
            max_rollouts_per_hour=env.ARENA_MAX_ROLLOUTS_PER_HOUR.get(),
            arena_url=public_base(listen=listen),
            max_votes_per_hour=env.ARENA_MAX_VOTES_PER_HOUR.get(),
            budget=budget_from_env(),
            max_flags_per_hour=environment.ARENA_MAX_FLAGS_PER_HOUR.get(),
        )

    @property
    def custom_servers_on(self) -> bool:
        """Whether a visitor may name a server of their own (on by default only off a public Space)."""
        return self.custom_servers if self.custom_servers is not None else not self.space_id

    def server_policy(self) -> ServerPolicy:
        """The guard for servers a visitor names (agent/netguard.py): this Space's own servers are trusted."""
        return ServerPolicy.build([self.env_url, PUBLIC_SERVER], self.allowed_servers, custom=self.custom_servers_on)

    @property
    def public_url(self) -> str | None:
        """The arena's public address (on a Space its `*.hf.space` host, where crawlers read a share page's tags;
        rollouts.links decides), or None: links are then built on the address the visitor used."""
        return self.arena_url or (space_url(self.space_id) if self.space_id else None)


@dataclass
class AppContext:
    settings: Settings
    store: RolloutStore
    registry: RunRegistry
    plays: PlayRegistry
    archive: Archive
    records: RecordCache
    matches: MatchRegistry | None = None  # the arena's matches (viewer/arena); None only in a bare test context
    tasks: TaskDataset | None = None  # loading in the background; catalog.task_dataset.tasks_status() says how
    policy: ServerPolicy = field(default_factory=ServerPolicy)  # where runs and task lookups may connect
    downloads: Downloads = field(default_factory=Downloads)
    flags: FlagDesk | None = None  # flags on a step (live/flags.py); None only in a bare test context
    # Tasks listed by remote servers this process has read, so their labels survive a filter change.
    _remote: dict[str, TaskChoice] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def create(cls, settings: Settings | None = None) -> AppContext:
        settings = settings or Settings.from_env()
        policy = settings.server_policy()  # first: a malformed ALLOWED_SERVERS stops the start, saying which entry
        pushing = bool(settings.dataset and settings.hub_token)
        store = RolloutStore(settings.rollout_dir, dataset=settings.dataset if pushing else None,
                             token=settings.hub_token if pushing else None)
        # Index rows from an older version get their newer columns from the records, without holding up the start.
        threading.Thread(target=store.fill_index, name="index-fill", daemon=True).start()
        quota = SaveQuota(settings.max_rollouts_per_hour)  # one budget per visitor for Run and Play together
        registry = RunRegistry(store.save, max_total=settings.max_episodes,
                               max_per_visitor=settings.max_episodes_per_visitor, journal=store.running, quota=quota,
                               budget=SpendBudget(settings.budget))
        plays = PlayRegistry(store.save, env_url=settings.env_url, quota=quota)
        # Match rows go where the index goes, pushed with it (the store's pusher takes every changed match file).
        book = MatchBook(store.root, store.writer_id, on_write=store.notify)
        book.recover(store.load, store.running.running)  # matches a restart cut short, their records closed by now
        matches = MatchRegistry(registry, book, votes_per_hour=settings.max_votes_per_hour)
        # Registered after the store's own exit hook, so it runs first: open hand-played episodes are saved
        # (`interrupted`) before the store pushes what waits.
        atexit.register(plays.close)
        tasks = serve_tasks_dataset(settings.tasks_dataset or "", background=True, cache_dir=settings.tasks_cache)
        archive = Archive.from_settings(store.root, dataset=settings.dataset, public_rollouts=settings.public_rollouts,
                                        token=settings.hub_token)
        archive.withheld = matches.withheld_episodes  # the one rule for "is this episode public yet"
        archive.standard = default_standard()  # what a verified model on the board was played under
        store.hold_back(matches.withheld_episodes)  # ...which the pusher asks too, so the dataset waits as well
        archive.refresh_local(force=True)
        archive.start_remote()  # the Hub sources load while the first visitor arrives
        # Flag rows go where the match rows go, pushed with them; the archive reads them back at once.
        flags = FlagDesk(FlagBook(store.root, store.writer_id, on_write=store.notify),
                         per_hour=settings.max_flags_per_hour, owners=SpaceOwners.from_env(settings.hub_token),
                         on_change=lambda: archive.refresh_local(force=True))
        return cls(settings, store, registry, plays, archive, RecordCache(archive, registry.get), matches, tasks, policy,
                   flags=flags)

    def public(self, episode_id: str) -> bool:
        """Whether a door may show this episode (running or stored) yet: not while it is a side of an undecided
        random match (live.match_runs.MatchRegistry.withheld_episodes). A door answers as for an unknown id."""
        return self.matches is None or episode_id not in self.matches.withheld_episodes()

    def server_url(self, choice: str, custom: str = "") -> str | None:
        """The server a run plays on: None for the embedded one. A URL a visitor typed comes back cleaned (no
        userinfo) once the server policy admits it; ServerRefused (a ValueError) says why not."""
        if choice == "public":
            return PUBLIC_SERVER
        if choice == "custom":
            return self.policy.admit(custom)
        if choice in ("embedded", "", None):
            return self.settings.env_url
        # The API takes a URL in the same slot.
        return self.server_url("custom", choice)

    def task_for(self, task_id: str, server_url: str | None) -> dict | None:
        """The full task (the embedded pack's, reference included) or the public one a remote server shows."""
        return task_for(task_id, server_url, self.policy)

    def remember_tasks(self, choices: list[TaskChoice]) -> None:
        with self._lock:
            self._remote.update({c.task_id: c for c in choices})
            # Remote servers are anyone's: their lists fill a bounded memory, the oldest labels going first.
            for task_id in list(self._remote)[: max(0, len(self._remote) - REMOTE_CHOICES_KEPT)]:
                del self._remote[task_id]

    def choices_for(self, ids: list[str]) -> list[TaskChoice]:
        """The picker's tasks, in the order given: embedded ones, then those remote servers listed."""
        known = {c.task_id: c for c in embedded_catalog()}
        with self._lock:
            known.update({k: v for k, v in self._remote.items() if k not in known})
        return [known[i] for i in ids if i in known]

    def link_base(self, base_url: str | None = None) -> str:
        """The address links are built on: the public one when known, else `base_url` (the one the visitor used)."""
        return (self.settings.public_url or base_url or "").rstrip("/")

    def share_link(self, query: str, base_url: str | None = None) -> str:
        """A link into this app with `query` (`episode=...` watches a run; `tab=browse&rollout=...` opens Browse)."""
        return app_link(query, self.link_base(base_url))

    def rollout_link(self, episode_id: str, base_url: str | None = None) -> str:
        """A rollout's share link: its own page, `/r/<episode_id>`, which unfurls where it is pasted."""
        return rollout_page(episode_id, self.link_base(base_url))


def budget_from_env() -> BudgetLimits:
    """The spending budget's caps (rollouts.settings.BUDGET: ARENA_BUDGET_* and ARENA_SPACE_MAX_*), each left at its
    default when unset; a malformed or negative one stops the start, naming it (a typo must not turn the budget
    off)."""
    values = {name: setting.get() for name, setting in environment.BUDGET.items()}
    return BudgetLimits(**{name: value for name, value in values.items() if value is not None})
