"""One module per CLI command; each exposes `add_parser` and `run`."""
