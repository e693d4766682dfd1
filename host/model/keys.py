"""Content keys (docs/engineering.md §6): SHA-256 of the canonical JSON of declared inputs.

The serializer is ``receipts.canonical.canonical``, the project's one canonical JSON
(section 7), so a key computed here equals one computed anywhere else.
"""

from __future__ import annotations

import hashlib

from receipts.canonical import canonical


def content_key(obj: object) -> str:
    """SHA-256 hex digest of the canonical JSON of *obj*."""
    return hashlib.sha256(canonical(obj)).hexdigest()
