"""Agent CLIs as the agent: each CLI is one adapter (adapter.py) to one confined runner
(run.py), so another CLI is one more adapter, not a fork of the loop."""
