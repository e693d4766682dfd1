"""Choosing the accelerator by booting a probe guest (a present /dev/kvm is not proof).

Why a boot: on this project's reference host `/dev/kvm` opens and KVM_CREATE_VM
succeeds, yet a normal guest dies on its first `cmpxchg16b` (KVM is provided by PVM).
Only a guest that reaches userspace proves KVM works. The probe boots the image's
own kernel and initramfs with `harness.probe=1`; the initramfs prints a line and
powers off. Seeing that line within the deadline means `kvm`; QEMU exiting without it
or the deadline passing means `tcg`, and the reason says which. The probe QEMU runs
in the caller's cgroup like any other, and is reaped and its scratch removed.
"""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path

from host.cgroups import Cgroup
from host.image.contract import CONSOLE_PROBE_DONE
from host.release import Stopwatch
from host.vm.categories import Accelerator, AcceleratorReason, AccelRequest
from host.vm.cmdline import QemuConfig, qemu_argv
from host.vm.process import spawn_qemu, wait_exit
from host.vm.scratch import create_scratch

KVM_DEVICE = Path("/dev/kvm")
PROBE_STALL_S = 4.0
"""A probe whose console says nothing new for this long has stopped. Measured on the
reference host (KVM through PVM): SeaBIOS prints `Booting from ROM..` 0.6 s after start,
then nothing, ever, where a booting kernel prints its first message within milliseconds;
under TCG, with every message on, no gap of a second was seen. Before, such a guest held
every `auto` trial for the whole 15 s deadline."""


@dataclass(frozen=True)
class AccelChoice:
    accelerator: Accelerator
    reason: AcceleratorReason
    probe_ms: int | None


def kvm_device_state(device: Path = KVM_DEVICE) -> AcceleratorReason | None:
    """None if the device opens read-write; else why KVM cannot even be tried."""
    try:
        fd = os.open(device, os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        return (
            "kvm_device_absent"
            if exc.errno in (errno.ENOENT, errno.ENXIO)
            else ("kvm_device_unread")
        )
    os.close(fd)
    return None


async def probe_boot(
    vmlinux: Path,
    initramfs: Path,
    *,
    accelerator: Accelerator,
    cgroup: Cgroup,
    scratch_root: Path,
    tag: str,
    deadline_s: float,
    stall_s: float = PROBE_STALL_S,
) -> AcceleratorReason:
    """Boot kernel + initramfs under `accelerator`: probe_booted/_failed/_timeout.
    `probe_timeout` when the deadline passes, or sooner when the console has been silent
    for `stall_s` (the probe's kernel prints every boot message: cmdline.PROBE_CONSOLE)."""
    scratch = create_scratch(scratch_root, tag)
    serial = scratch / "console.log"
    config = QemuConfig(
        tag=tag,
        accelerator=accelerator,
        vmlinux=vmlinux.absolute(),
        initramfs=initramfs.absolute(),
        serial_log=serial,
        qmp_socket=scratch / "qmp.sock",
        memory_mib=256,
        vcpus=1,
        probe=True,
    )
    try:
        process = spawn_qemu(qemu_argv(config), cgroup, scratch / "qemu.log")
        try:
            loop = asyncio.get_running_loop()
            end = loop.time() + deadline_s
            silence = ConsoleSilence(serial, loop.time(), stall_s)
            while loop.time() < end:
                if silence.stalled(loop.time()):
                    return "probe_timeout"  # the guest stopped where a booting one speaks
                if _has_line(serial, CONSOLE_PROBE_DONE):
                    return "probe_booted"
                if _has_line(scratch / "qemu.log", "KVM internal error"):
                    return "probe_failed"  # QEMU stops the vCPU and waits; do not wait too
                if process.poll() is not None:
                    return (
                        "probe_booted"
                        if _has_line(serial, CONSOLE_PROBE_DONE)
                        else ("probe_failed")
                    )
                await asyncio.sleep(0.05)
            return "probe_timeout"
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
            await wait_exit(process, 10.0)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class ConsoleSilence:
    """How long the probe's console has said nothing new, read from its log's size."""

    def __init__(self, log: Path, now: float, stall_s: float) -> None:
        self.log = log
        self.stall_s = stall_s
        self.size = -1
        self.changed = now

    def stalled(self, now: float) -> bool:
        """True once the log has not grown for `stall_s` (its start counts as a change)."""
        try:
            size = self.log.stat().st_size
        except OSError:
            size = -1
        if size != self.size:
            self.size, self.changed = size, now
        return now - self.changed >= self.stall_s


def _has_line(path: Path, line: str) -> bool:
    try:
        return line.encode("ascii") in path.read_bytes()
    except OSError:
        return False


async def choose_accelerator(
    requested: AccelRequest,
    vmlinux: Path,
    initramfs: Path,
    *,
    cgroup: Cgroup,
    scratch_root: Path,
    tag: str,
    deadline_s: float = 15.0,
    device: Path = KVM_DEVICE,
) -> AccelChoice:
    """`auto`: KVM only if a probe guest boots under it; otherwise TCG, with the reason."""
    if requested != "auto":
        return AccelChoice(requested, "forced_by_flag", None)
    device_reason = kvm_device_state(device)
    if device_reason is not None:
        return AccelChoice("tcg", device_reason, None)
    watch = Stopwatch()
    reason = await probe_boot(
        vmlinux,
        initramfs,
        accelerator="kvm",
        cgroup=cgroup,
        scratch_root=scratch_root,
        tag=tag,
        deadline_s=deadline_s,
    )
    return AccelChoice("kvm" if reason == "probe_booted" else "tcg", reason, watch.ms())
