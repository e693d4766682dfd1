"""Closed vocabularies for the cgroup mechanism.

Every failure and every reason a reading was not taken is one of these names, so a
receipt can carry the category and nothing else (docs/engineering.md §3). Add a name here
rather than attaching free text to an error.
"""

from typing import Literal

CgroupVersion = Literal["v1", "v2"]
"""Which cgroup interface an implementation drives."""

Controller = Literal["memory", "cpu", "pids"]
"""The controllers the harness applies budgets through."""

ProbeState = Literal["present", "absent", "unread"]
"""Three-valued answer of a probe (docs/engineering.md §2): unread is never folded into absent."""

CgroupFailure = Literal[
    # Input rejected before anything was written.
    "invalid_name",
    "invalid_value",
    # What the host offers.
    "no_memory_controller",
    "controller_missing",
    "swap_accounting_missing",
    "interface_file_missing",
    # The cgroup itself.
    "already_exists",
    "not_found",
    "not_empty",
    "remove_failed",
    # Writing budgets.
    "permission_denied",
    "write_rejected",
    "readback_mismatch",
    # Reading.
    "read_failed",
    "parse_failed",
    "counter_missing",
    # Members.
    "process_not_found",
    "members_remain",
    "spawn_failed",
    "not_in_cgroup",
]
"""Every way a cgroup operation or reading can fail."""
