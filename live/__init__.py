"""The app's live episodes: runs, arena matches and hand play that outlive a page, capped per visitor (the quota) and by what the Space's keys may spend (the budget)."""
