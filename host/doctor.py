"""`harness doctor`: are this host's prerequisites there? Closed answers, one fix each.

Each check answers `ok`, `missing` (looked, not there), `insufficient` (there, too
little), or `unread` (the instrument failed: docs/engineering.md §2 — never reported as
missing). Fixes are fixed texts per check, never command output.

KVM answers from the probe a trial uses (host/vm/accel.py): a /dev/kvm that opens is
only `present`; a probe guest booted under it makes it `usable`, one that does not
`unusable` (the reference host: KVM through PVM opens, but no normal guest runs). The
probe needs the guest image's kernel and initramfs; without a cached image the device
stays `present`.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from host.cgroups.detect import detect
from host.cgroups.errors import CgroupError
from host.image.manifest import INITRAMFS_NAME, VMLINUX_NAME
from host.image.show import list_entries
from host.release import release_cgroup
from host.vm.accel import KVM_DEVICE, choose_accelerator, kvm_device_state
from receipts.kernelfacts import mem_available

CheckState = Literal["ok", "missing", "insufficient", "unread", "present", "usable", "unusable"]
"""`present` / `usable` / `unusable` are the KVM check's (see above)."""
CheckName = Literal[
    "qemu",
    "kvm",
    "cgroups",
    "cgroups_writable",
    "image_tools",
    "test_runners",
    "firewall_tool",
    "libvirt",
    "disk",
    "memory",
    "llama_cpp",
]
MIN_DISK_BYTES = 10 << 30
MIN_MEMORY_BYTES = 4 << 30
APT = "apt-get install -y --no-install-recommends"


@dataclass(frozen=True)
class Check:
    name: CheckName
    state: CheckState
    required: bool
    fix: str


def _tools(*names: str) -> CheckState:
    return "ok" if all(shutil.which(name) for name in names) else "missing"


def _kvm(images: Path, device: Path = KVM_DEVICE, deadline_s: float = 15.0) -> CheckState:
    """The trial's own accelerator choice (`auto`), with the first verified cached image."""
    reason = kvm_device_state(device)
    if reason == "kvm_device_absent":
        return "missing"
    if reason is not None:
        return "unread"
    entry = next((e for e in list_entries(images) if e.state == "ok"), None)
    if entry is None:
        return "present"
    image = images / entry.key
    try:
        cgroup = detect().create(f"doctor-kvm-{os.getpid()}")
    except (CgroupError, OSError):
        return "unread"
    try:
        with tempfile.TemporaryDirectory(prefix="harness-doctor-") as scratch:
            choice = asyncio.run(
                choose_accelerator(
                    "auto",
                    image / VMLINUX_NAME,
                    image / INITRAMFS_NAME,
                    cgroup=cgroup,
                    scratch_root=Path(scratch),
                    tag=secrets.token_hex(8),
                    deadline_s=deadline_s,
                    device=device,
                )
            )
    finally:
        release_cgroup(cgroup)  # never raises; the check's answer is the probe's
    return "usable" if choice.accelerator == "kvm" else "unusable"


def _cgroups() -> CheckState:
    try:
        detect()
    except CgroupError as exc:
        return "missing" if exc.category == "no_memory_controller" else "unread"
    except OSError:
        return "unread"
    return "ok"


def _cgroups_writable() -> CheckState:
    name = f"doctor-{os.getpid()}"
    try:
        group = detect().create(name)
    except (CgroupError, OSError):
        return "unread"
    return "ok" if release_cgroup(group).confirmed else "unread"


def _test_runners() -> CheckState:
    try:
        python = subprocess.run(
            ["/usr/bin/python3", "-c", "import pytest"],
            capture_output=True,
            timeout=30,
            check=False,
        )
        node = subprocess.run(
            ["node", "--version"], capture_output=True, timeout=30, check=False, text=True
        )
    except FileNotFoundError:
        return "missing"
    except (OSError, subprocess.TimeoutExpired):
        return "unread"
    if python.returncode != 0 or node.returncode != 0:
        return "missing"
    major = node.stdout.strip().lstrip("v").split(".")[0]
    return "ok" if major.isdigit() and int(major) >= 18 else "insufficient"


def _libvirt(uri_answers: Callable[[], bool] | None = None) -> CheckState:
    """`ok` only when the daemon answers on qemu:///system through libvirt-python (what
    `--backend libvirt` uses); binaries on PATH alone are not enough."""
    if _tools("libvirtd", "virtlogd") != "ok":
        return "missing"
    try:
        if importlib.util.find_spec("libvirt") is None:
            return "missing"
    except (ImportError, ValueError):
        return "unread"
    if uri_answers is None:
        from host.vm.virtconn import VirtError, open_connection

        def uri_answers() -> bool:
            try:
                open_connection().close()
            except VirtError:
                return False
            return True

    return "ok" if uri_answers() else "missing"


def _disk(path: Path) -> CheckState:
    try:
        path.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(path).free
    except OSError:
        return "unread"
    return "ok" if free >= MIN_DISK_BYTES else "insufficient"


def _memory() -> CheckState:
    try:
        available = mem_available(Path("/proc/meminfo").read_text())
    except (OSError, ValueError):
        return "unread"
    if available is None:
        return "unread"
    return "ok" if available >= MIN_MEMORY_BYTES else "insufficient"


def _llama_cpp() -> CheckState:
    try:
        spec = importlib.util.find_spec("llama_cpp")
    except (ImportError, ValueError):
        return "unread"
    return "ok" if spec is not None else "missing"


def run_checks(cache_dir: Path) -> list[Check]:
    table: list[tuple[CheckName, Callable[[], CheckState], bool, str]] = [
        (
            "qemu",
            lambda: _tools("qemu-system-x86_64", "qemu-img"),
            True,
            f"{APT} qemu-system-x86 qemu-utils",
        ),
        (
            "kvm",
            lambda: _kvm(cache_dir / "images"),
            False,
            "optional: without a usable KVM trials run under TCG (slower); `present` means "
            "not probed yet: harness image build, then harness doctor boots a probe guest",
        ),
        ("cgroups", _cgroups, True, "mount a cgroup memory controller (v1 or v2)"),
        (
            "cgroups_writable",
            _cgroups_writable,
            True,
            "run as root, or delegate a writable cgroup subtree to this user",
        ),
        (
            "image_tools",
            lambda: _tools("mmdebstrap", "mkfs.ext4", "busybox", "socat"),
            True,
            f"{APT} mmdebstrap e2fsprogs busybox-static socat",
        ),
        ("test_runners", _test_runners, True, f"{APT} python3-pytest nodejs"),
        (
            "firewall_tool",
            lambda: "ok" if shutil.which("nft") or shutil.which("iptables-save") else "missing",
            True,
            f"{APT} nftables  (host-state snapshots read the ruleset)",
        ),
        (
            "libvirt",
            _libvirt,
            False,
            "optional, for --backend libvirt: bash .ci/setup (installs libvirt-daemon, its QEMU "
            "driver, libvirt-dev and libvirt-python), then bash .ci/libvirtd-up (starts libvirtd)",
        ),
        ("disk", lambda: _disk(cache_dir), True, "free at least 10 GiB under ~/.cache/harness"),
        ("memory", _memory, True, "at least 4 GiB of MemAvailable"),
        ("llama_cpp", _llama_cpp, True, "make setup (builds the pinned llama-cpp-python wheel)"),
    ]
    return [Check(name, probe(), required, fix) for name, probe, required, fix in table]
