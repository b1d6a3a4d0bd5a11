"""Model adapters: each streams one turn from its API and keeps that API's own conversation history."""
