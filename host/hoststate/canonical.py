"""The digest of a host-state facet: SHA-256 of its canonical JSON (receipts.canonical)."""

import hashlib

from host.hoststate.facet import CanonicalValue
from receipts.canonical import canonical as canonical_json

__all__ = ["canonical_json", "digest"]


def digest(obj: CanonicalValue) -> str:
    """SHA-256 hex of the canonical JSON of `obj`."""
    return hashlib.sha256(canonical_json(obj)).hexdigest()
