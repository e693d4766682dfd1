"""Task corpora imported into profiles/tasks/ (the polyglot benchmark)."""
