"""Budget values checked before anything is written.

A value the kernel would refuse or silently alter is refused here with
`invalid_value`, so a budget is either applied exactly or not at all (docs/engineering.md
§11). The kernel still has the last word: its refusals surface as `write_rejected`
and anything it alters as `readback_mismatch`.
"""

import os

from host.cgroups.errors import CgroupError
from receipts.kernelfacts import CGROUP_UNLIMITED


def page_size() -> int:
    """The kernel page size; memory limits must be multiples of it to read back."""
    return os.sysconf("SC_PAGE_SIZE")


def validate_limit(limit_bytes: int) -> int:
    """A memory limit the kernel will store exactly: a positive whole number of pages.

    Both versions round a limit down to a page; rather than accept a rounded budget
    (docs/engineering.md §11) an unaligned limit is refused before anything is written.
    """
    if (
        isinstance(limit_bytes, bool)
        or not isinstance(limit_bytes, int)
        or limit_bytes < page_size()
        or limit_bytes >= CGROUP_UNLIMITED
        or limit_bytes % page_size() != 0
    ):
        raise CgroupError("invalid_value", controller="memory")
    return limit_bytes


def validate_cpu(quota_us: int, period_us: int) -> None:
    """Kernel bounds for CFS bandwidth: period 1 ms to 1 s, quota at least 1 ms."""
    for v in (quota_us, period_us):
        if isinstance(v, bool) or not isinstance(v, int):
            raise CgroupError("invalid_value", controller="cpu")
    if not 1000 <= period_us <= 1_000_000 or quota_us < 1000 or quota_us > (1 << 40):
        raise CgroupError("invalid_value", controller="cpu")


def validate_pids(max_pids: int) -> None:
    """A positive task count."""
    if isinstance(max_pids, bool) or not isinstance(max_pids, int) or not 1 <= max_pids < 1 << 22:
        raise CgroupError("invalid_value", controller="pids")
