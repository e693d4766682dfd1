"""receipts/kernelfacts.py: the one /proc/meminfo parser and the one "no limit" line."""

from __future__ import annotations

from pathlib import Path

from guest.worker.memory import HeadroomUnread, host_available
from harness.trial.preflight import mem_available_bytes
from receipts.kernelfacts import CGROUP_UNLIMITED, mem_available, meminfo

V1_NO_LIMIT = 9223372036854771712
"""What cgroup v1's memory.limit_in_bytes reads with no limit set (4 KiB pages)."""


def test_the_host_states_mem_available_and_every_reader_agrees() -> None:
    text = Path("/proc/meminfo").read_text()
    available = mem_available(text)
    assert available is not None and available > 0 and available % 1024 == 0
    assert meminfo(text)["MemTotal"] >= available
    assert host_available(f"MemAvailable: {available // 1024} kB\n") == available
    assert mem_available_bytes() is not None


def test_a_malformed_or_missing_line_is_unread_never_zero() -> None:
    for text in ("", "MemAvailable: lots kB\n", "MemAvailable:\n", "MemAvailable: 12 MB\n"):
        assert mem_available(text) is None
    try:
        host_available("MemTotal: 10 kB\n")
    except HeadroomUnread:
        pass
    else:
        raise AssertionError("the guest worker read a missing MemAvailable as a number")


def test_no_limit_is_above_the_line_and_a_real_budget_below_it() -> None:
    assert V1_NO_LIMIT >= CGROUP_UNLIMITED
    assert CGROUP_UNLIMITED > (1 << 40) * 64  # 64 TiB: no budget this harness sets


def test_no_limit_is_what_the_kernel_writes_for_none_and_only_that() -> None:
    """cgroup v1 reports "no limit" as PAGE_COUNTER_MAX in bytes (LONG_MAX rounded down
    to a page: 2**63 - 4096 with 4 KiB pages, 2**63 - 65536 with 64 KiB ones): both
    read as unlimited. Any limit below 2**62 (4 EiB, far above any real machine) is a
    limit, so no set limit is ever mistaken for none."""
    for page in (4096, 16384, 65536):
        assert (2**63 - 1) // page * page >= CGROUP_UNLIMITED
    assert CGROUP_UNLIMITED > (1 << 62) - 1
