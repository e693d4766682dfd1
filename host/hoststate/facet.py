"""What a facet reader returns, and what a snapshot keeps of it.

A reader returns the facet's canonical object (host detail such as interface names
and addresses, hashed but never kept) or why it has none. The snapshot keeps only
the state, the digest, a count and, for the firewall, the tool and the raw-bytes
digest: nothing that names a host path or carries raw text. Items left out as another
live trial's (host/hoststate/others.py) are counted, with that trial's tag, and are
not in the canonical object or its digest.
"""

import re
from dataclasses import dataclass
from typing import TypeAlias

from host.hoststate.categories import FacetName, FacetState, FirewallTool, UnreadReason

CanonicalValue: TypeAlias = (
    bool | int | str | list["CanonicalValue"] | dict[str, "CanonicalValue"] | None
)

_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class FacetRead:
    """A reader's answer: `present` with a canonical object and item count."""

    state: FacetState
    canonical: CanonicalValue = None
    count: int = 0
    reason: UnreadReason | None = None
    tool: FirewallTool | None = None
    raw_sha256: str | None = None
    excluded: int = 0
    """Items left out as another live trial's."""
    excluded_tags: frozenset[str] = frozenset()
    """The tags of the trials they belong to."""
    unrelated: int = 0
    """Items left out as no trial's (attribution.py): other programs' activity."""

    def __post_init__(self) -> None:
        if (self.state == "unread") != (self.reason is not None):
            raise ValueError("a reason is given exactly when the facet is unread")
        if (self.excluded > 0) != bool(self.excluded_tags):
            raise ValueError("tags are given exactly when items were excluded")


@dataclass(frozen=True)
class FacetSnapshot:
    """One facet as recorded: state, digest of its canonical JSON, count, category."""

    name: FacetName
    state: FacetState
    sha256: str | None
    count: int
    reason: UnreadReason | None = None
    tool: FirewallTool | None = None
    raw_sha256: str | None = None
    excluded: int = 0
    excluded_tags: tuple[str, ...] = ()
    """Sorted; the tags of the other live trials whose items were left out."""
    unrelated: int = 0
    """Items left out as no trial's."""

    def __post_init__(self) -> None:
        if (self.excluded > 0) != bool(self.excluded_tags):
            raise ValueError("tags are recorded exactly when items were excluded")
        if self.excluded_tags != tuple(sorted(set(self.excluded_tags))):
            raise ValueError("excluded tags are sorted and unique")
        if (self.state == "present") != (self.sha256 is not None):
            raise ValueError("a digest is recorded exactly when the facet is present")
        if (self.state == "unread") != (self.reason is not None):
            raise ValueError("a reason is recorded exactly when the facet is unread")
        for value in (self.sha256, self.raw_sha256):
            if value is not None and _HEX64.fullmatch(value) is None:
                raise ValueError("digests are 64 lowercase hex digits")
        if self.count < 0 or self.unrelated < 0:
            raise ValueError("counts are not negative")
