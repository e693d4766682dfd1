"""Typed results of cgroup readings and of applied budgets.

A reading is three-valued (docs/engineering.md §2): `present` with a value, `absent` when the
thing demonstrably does not exist (for example no memory limit is set), or `unread`
with the category that says why it could not be taken. The invariants are checked at
construction so a `present` reading without a value cannot exist.
"""

from dataclasses import dataclass

from host.cgroups.categories import CgroupFailure, CgroupVersion, ProbeState


@dataclass(frozen=True)
class Reading:
    """One integer reading with its probe state."""

    state: ProbeState
    value: int | None = None
    reason: CgroupFailure | None = None

    def __post_init__(self) -> None:
        if self.state == "present" and (self.value is None or self.reason is not None):
            raise ValueError("a present reading has a value and no reason")
        if self.state == "absent" and (self.value is not None or self.reason is not None):
            raise ValueError("an absent reading has neither value nor reason")
        if self.state == "unread" and (self.value is not None or self.reason is None):
            raise ValueError("an unread reading has a reason and no value")

    @staticmethod
    def present(value: int) -> "Reading":
        return Reading("present", value=value)

    @staticmethod
    def absent() -> "Reading":
        return Reading("absent")

    @staticmethod
    def unread(reason: CgroupFailure) -> "Reading":
        return Reading("unread", reason=reason)


@dataclass(frozen=True)
class MemoryReadings:
    """What the memory controller says about one cgroup, each part read independently.

    `working_set` is usage minus inactive file cache (reclaimable page cache is not
    counted as used; see FIELD-NOTES.md). `headroom` is limit minus working set and is
    `absent` when no limit is set.
    """

    version: CgroupVersion
    limit: Reading
    usage: Reading
    peak: Reading
    inactive_file: Reading
    working_set: Reading
    headroom: Reading
    oom_kills: Reading


@dataclass(frozen=True)
class MemoryLimitApplied:
    """Memory budget as read back from the kernel after writing it."""

    limit_bytes: int
    swap_bytes: int


@dataclass(frozen=True)
class CpuQuotaApplied:
    """CPU budget as read back: `quota_us` of CPU time per `period_us`."""

    quota_us: int
    period_us: int


@dataclass(frozen=True)
class PidsLimitApplied:
    """Task-count budget as read back."""

    max_pids: int


@dataclass(frozen=True)
class NameListing:
    """Names of cgroups under the harness parent, per hierarchy key.

    `state` is `absent` when the hierarchy is readable and the parent does not exist,
    `unread` when a directory could not be listed.
    """

    state: ProbeState
    names: tuple[str, ...] = ()
    reason: CgroupFailure | None = None
