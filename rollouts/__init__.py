"""The rollout data: the one Record and its events, the record and index-row schema, the dataset layout, the store
and its Hub pusher, the sources Browse reads, the index over them, search, flags, the leaderboard and its figures,
the training sets, and the settings every layer reads. See ARCHITECTURE.md."""
