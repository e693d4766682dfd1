"""CLI and orchestration of trials."""
