"""Which files this session has seen: OpenCode's rule that an edit names text it read.

An exact-match edit quotes the file's text (`oldString`). A model that has not read the
file writes the text it expects to be there; on a small model that was every edit of a
whole trial, each refused as `old_string_not_found` and none followed by a read
(docs/models.md). OpenCode's edit tool refuses a file its session has not read, and says
so; ours does the same (`file_not_read`). A file counts as seen once read (any part of
it: the model chose what to look at) or written whole by the agent (it knows what it
wrote). `write` itself needs no read: a whole-file write quotes nothing.
"""

from __future__ import annotations

from guest.tools.jail import RelPath


class SeenFiles:
    """The workspace paths (as the jail parsed them: no `.`, `..` or empty parts, so one
    file has one spelling) this session has read or written."""

    def __init__(self) -> None:
        self._seen: set[tuple[str, ...]] = set()

    def saw(self, path: RelPath) -> None:
        self._seen.add(path.parts)

    def has_seen(self, path: RelPath) -> bool:
        return path.parts in self._seen
