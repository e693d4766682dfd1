"""Agent CLIs the harness runs in the agent's guest, each pinned and kept by content key."""
