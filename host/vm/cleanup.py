"""Cleanup results: one per owned resource, each with the reading that proves it.

Why a result type of our own: the release code runs before the receipt's index is
known, and the same results are shown in tests and benchmarks. `to_record()` turns
one into `receipts.records.cleanup.CleanupRecord`, so the fields are the record's
own types (`Resource`, `CleanupStatus`, `Evidence`) and cannot drift from it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from receipts.records.cleanup import CleanupRecord, CleanupStatus, Evidence, Resource


@dataclass(frozen=True)
class CleanupResult:
    resource: Resource
    status: CleanupStatus
    evidence: Evidence
    duration_ms: int

    @property
    def confirmed(self) -> bool:
        return self.status == "confirmed"

    def to_record(self, index: int, released_by: Literal["trial", "gc"] = "trial") -> CleanupRecord:
        return CleanupRecord.model_validate(
            {
                "schema": "harness.receipt.cleanup/1",
                "index": index,
                "resource": self.resource,
                "status": self.status,
                "evidence": self.evidence,
                "released_by": released_by,
                "duration_ms": self.duration_ms,
            }
        )


def not_acquired(resource: Resource) -> CleanupResult:
    return CleanupResult(resource, "not_acquired", "nothing_to_release", 0)


class Stopwatch:
    """Milliseconds since construction (monotonic)."""

    def __init__(self) -> None:
        self._start = time.monotonic()

    def ms(self) -> int:
        return int((time.monotonic() - self._start) * 1000)
