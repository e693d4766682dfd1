"""Suites: many trials over many tasks, each its own `harness trial` process and receipt."""
