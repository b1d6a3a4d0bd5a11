"""The rollout data: the record and index-row schema, the dataset layout, the store and its Hub pusher, the sources
Browse reads, the index over them, search, the leaderboard and the per-rollout figures. See ARCHITECTURE.md."""
