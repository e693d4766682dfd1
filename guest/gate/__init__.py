"""The guest runtime gate. `bootstrap.py` is sent over SSH and runs before any import of ours."""
