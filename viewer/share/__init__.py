"""The share pages, `/r/<episode_id>`: one HTML document per rollout, no JavaScript, and their routes."""
