"""Constrained field types shared by every record.

Records carry only enumerated categories, bounded integers, hex digests and fixed
identifiers (docs/engineering.md §3). These aliases are where the bounds live, so a record
cannot widen one by accident.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

Sha256Hex = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
"""A SHA-256 digest in lower-case hex."""

GitObjectId = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")]
"""A git object id (SHA-1, or SHA-256 for repositories in that mode)."""

TrialId = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32}$")]
"""128 random bits in hex, minted by the orchestrator for one trial."""

MemberId = Annotated[str, StringConstraints(pattern=r"^[0-9]{4,6}$")]
"""A suite member's id: its position in the suite, `0000`, `0001`, ..."""

TrialTag = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{8,32}$")]
"""A trial's tag (the first hex digits of its id): what its host resources are named by."""

Identifier = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_.-]{0,63}$")]
"""A profile, task or resource name: lower-case, no spaces, no path separators."""

DebianPackage = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9.+-]{1,127}$")]
"""A Debian package name as dpkg accepts it."""

Version = Annotated[str, StringConstraints(pattern=r"^[0-9]{1,6}(?:\.[0-9]{1,6}){1,3}$")]
"""A dotted numeric version, e.g. 0.3.36. Never a free-form self-description."""

Count = Annotated[int, Field(ge=0, le=1_000_000_000)]
"""How many times something happened."""

Index = Annotated[int, Field(ge=0, le=999_999)]
"""A position in a numbered sequence of records (six digits in the entry name)."""

ByteCount = Annotated[int, Field(ge=0, le=1 << 50)]
"""A size in bytes, up to 1 PiB."""

Millis = Annotated[int, Field(ge=0, le=30 * 24 * 3600 * 1000)]
"""A duration in milliseconds, up to 30 days."""

UnixMillis = Annotated[int, Field(ge=0, le=1 << 45)]
"""Wall-clock time in milliseconds since the Unix epoch (UTC)."""

Probe = Literal["present", "absent", "unread"]
"""Three answers, never two (docs/engineering.md §2): `unread` means the instrument failed."""

Provenance = Literal["built_by_this_run", "adopted_from_cache"]
"""Whether this run made an artifact or adopted it by its content key (docs/engineering.md §6)."""
