"""The Browse section: the list beside the open rollout, the leaderboard, compare (section.py builds and wires,
handlers.py answers events, state.py is everything on screen as one URL-shaped value, views.py draws tables and
lines, filter_form.py the filters' widgets); the same for scripts (api.py)."""
