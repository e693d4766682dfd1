"""Preflight: host admission before anything is acquired.

MemAvailable against the profile's host admission floor, free disk under the cache
against the provisioning budget, whether /dev/kvm exists (three answers), and which
cgroup version carries the memory controller, and whether loopback carries a TCP
connection (the SSH forward to every guest needs it). The accelerator itself is chosen by
the VM stage's probe boot (a present /dev/kvm is not proof it works).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from harness.profiles import Profile
from host.cgroups.detect import detect
from host.cgroups.errors import CgroupError
from host.loopback import loopback_usable
from receipts.kernelfacts import mem_available
from receipts.records import PreflightRecord
from receipts.records.preflight import PreflightCategory
from receipts.types import Probe


def mem_available_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    try:
        return mem_available(meminfo.read_text())
    except (OSError, ValueError):
        return None


def kvm_device(device: Path = Path("/dev/kvm")) -> Probe:
    try:
        os.stat(device)
    except FileNotFoundError:
        return "absent"
    except OSError:
        return "unread"
    return "present"


def preflight(profile: Profile, cache_dir: Path) -> PreflightRecord:
    started = time.monotonic()
    memory = mem_available_bytes()
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        disk: int | None = shutil.disk_usage(cache_dir).free
    except OSError:
        disk = None
    try:
        cgroup_version = detect().version
    except (CgroupError, OSError):
        cgroup_version = None
    category: PreflightCategory = "ok"
    if memory is None:
        category = "memory_unread"
    elif memory < profile.memory.host_admission_floor:
        category = "memory_below_floor"
    elif disk is None:
        category = "disk_unread"
    elif disk < profile.provisioning.disk:
        category = "disk_below_floor"
    elif cgroup_version is None:
        category = "cgroups_unavailable"
    elif not loopback_usable():
        category = "loopback_unavailable"
    return PreflightRecord(
        category=category,
        mem_available_bytes=memory,
        memory_floor_bytes=profile.memory.host_admission_floor,
        disk_free_bytes=disk,
        disk_floor_bytes=profile.provisioning.disk,
        kvm_device=kvm_device(),
        accelerator=None,
        accelerator_reason=None,
        cgroup_version=cgroup_version,
        duration_ms=int((time.monotonic() - started) * 1000),
    )
