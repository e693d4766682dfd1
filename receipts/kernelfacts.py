"""How this code reads two of the kernel's numbers, shared by the host and the guest.

Why here: the host (preflight, doctor, the memory sampler, cgroup budgets) and the
guest worker (its admission headroom) read the same kernel files, and the guest
runtime ships `guest/` and `receipts/` only. Three parsers of /proc/meminfo and three
"no limit" thresholds (`1 << 62` twice, `1 << 60` once) were the result of not having
one place both sides can import.
"""

from __future__ import annotations

from typing import Final

CGROUP_UNLIMITED: Final = 1 << 62
"""A cgroup memory figure at or above this is the kernel's "no limit": v1 reports
PAGE_COUNTER_MAX in bytes (2**63 minus a page); v2 writes the word `max`."""


def meminfo(text: str) -> dict[str, int]:
    """The `Key: N kB` lines of /proc/meminfo text, in bytes. A malformed line is left
    out, so a caller that needs a key and does not find it reads it as unread."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if len(fields) == 2 and fields[1] == "kB" and fields[0].isdigit():
            found[key] = int(fields[0]) * 1024
    return found


def mem_available(text: str) -> int | None:
    """MemAvailable in bytes, or None when /proc/meminfo text does not state it."""
    return meminfo(text).get("MemAvailable")
