"""Snapshots of a booted, idle guest: made once per image and guest shape, restored per trial.

What a snapshot is: QEMU's own migration stream of a guest that booted with the
control flag and waits on its control port for a trial (host/vm/control.py), saved to
a file, plus the qcow2 layer its root disk had written by then. Nothing of any trial
is in it: the guest has no keys, no data disk content, no trial clock or seed yet.
Why the migration stream and not `savevm`: `savevm` writes RAM into the qcow2 it
snapshots, so every trial's overlay would carry (or share) it; a stream file is one
read-only cache entry with its own digest, restored by `-incoming` into a fresh
overlay over that disk layer, so nothing writable is shared between trials.

The key is the image key and everything that shapes the guest's devices and memory
(accelerator, memory, vCPUs, translation cache, the QEMU build, this format): a
restored guest must have exactly the devices it was saved with. Entries are written
to a temporary directory and renamed into place under a lock; before every use both
files are hashed again and compared with the manifest, and an entry that does not
match is refused (`digest_mismatch`), removed and made again, never used.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import json
import os
import shutil
import stat
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from host.cgroups import Cgroup
from host.image.digest import sha256_file
from host.vm.backend import BootImage
from host.vm.categories import Accelerator
from host.vm.cmdline import QEMU_BINARY, QemuConfig, qemu_argv
from host.vm.control import wait_waiting
from host.vm.errors import VmError
from host.vm.ports import pick_loopback_port
from host.vm.process import spawn_qemu, wait_exit
from host.vm.qmp import qmp_execute, qmp_quit
from host.vm.scratch import create_overlay
from host.vm.snapshotentry import Snapshot
from receipts.snapshotkey import SNAPSHOT_FORMAT, snapshot_key

__all__ = ["Snapshot", "SnapshotShape", "SnapshotStore", "data_slot", "qemu_build"]

FORMAT = SNAPSHOT_FORMAT
MEMORY_NAME = "memory.stream"
DISK_NAME = "disk.qcow2"
MANIFEST_NAME = "manifest.json"
DATA_SLOT_BYTES = 64 << 30
"""The data disk slot's fixed size: a restored guest's disk must keep the size its
kernel saw. A trial's raw data disk is put in a sparse qcow2 of this size."""
SAVE_DEADLINE_S = 120.0

SnapshotRefusal = Literal["absent", "digest_mismatch", "unreadable"]
"""Why a snapshot was not used: none yet, one whose files do not hash to its manifest's
digests, or one whose manifest cannot be read or is not of this key."""


@functools.cache
def qemu_build() -> str:
    """The QEMU build's own version line: a migration stream is only read by its build."""
    done = subprocess.run(
        [QEMU_BINARY, "--version"], capture_output=True, text=True, check=False, timeout=30
    )
    return done.stdout.splitlines()[0].strip() if done.returncode == 0 and done.stdout else ""


@dataclass(frozen=True)
class SnapshotShape:
    """Everything a snapshot's bytes depend on besides the guest's own path to idle."""

    image_key: str
    accelerator: Accelerator
    memory_mib: int
    vcpus: int
    tb_size_mib: int
    qemu: str

    @property
    def key(self) -> str:
        """sha256 of the shape as canonical JSON, with the format: the cache entry's name
        and what the receipt records (the audit recomputes it from the image key)."""
        return snapshot_key(**asdict(self))


def data_slot(directory: Path, data_disk: Path | None) -> Path:
    """The trial's data disk slot: a qcow2 of `DATA_SLOT_BYTES` over its raw disk (read
    through, zeros past its end) or an empty one; the raw disk is never written."""
    slot = directory / "data-slot.qcow2"
    argv = ["qemu-img", "create", "-q", "-f", "qcow2"]
    if data_disk is not None:
        argv += ["-b", str(data_disk.absolute()), "-F", "raw"]
    argv += [str(slot), str(DATA_SLOT_BYTES)]
    done = subprocess.run(
        argv, stdin=subprocess.DEVNULL, capture_output=True, check=False, timeout=60
    )
    if done.returncode != 0 or not slot.is_file():
        raise VmError("qemu_start_failed")
    os.chmod(slot, 0o600)
    return slot


class SnapshotStore:
    """The cache directory of snapshots, one subdirectory per key."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock_handle: int | None = None

    def entry(self, key: str) -> Path:
        return self.root / key

    def load(self, shape: SnapshotShape) -> Snapshot | SnapshotRefusal:
        """The entry for `shape`, hashed again now; or why there is none to use. An entry
        that fails its digests is removed (the next make rebuilds it)."""
        key = shape.key
        directory = self.entry(key)
        if not directory.is_dir():
            return "absent"
        try:
            manifest = json.loads((directory / MANIFEST_NAME).read_text())
            files = manifest["files"]
            fine = manifest["schema"] == FORMAT and manifest["key"] == key
        except (OSError, ValueError, KeyError, TypeError):
            fine, files = False, {}
        if not fine:
            self._discard(directory)
            return "unreadable"
        for name in (MEMORY_NAME, DISK_NAME):
            try:
                digest = sha256_file(directory / name)
            except OSError:
                digest = ""
            if not isinstance(files.get(name), dict) or files[name].get("sha256") != digest:
                self._discard(directory)
                return "digest_mismatch"
        return Snapshot(key, directory / MEMORY_NAME, directory / DISK_NAME)

    def _discard(self, directory: Path) -> None:
        """Out of the way first (a rename), then removed: a maker never finds half of it."""
        aside = Path(tempfile.mkdtemp(prefix=".discard-", dir=self.root))
        with contextlib.suppress(OSError):
            os.rename(directory, aside / "entry")
        shutil.rmtree(aside, ignore_errors=True)

    async def make(
        self,
        shape: SnapshotShape,
        image: BootImage,
        cgroup: Cgroup,
        deadline_s: float,
        *,
        tag: str,
    ) -> Snapshot:
        """Boot a guest for the control port, wait until it waits for a trial, save it.
        A concurrent maker of the same key is waited for (the lock), not repeated. The
        maker's QEMU is named by `tag`, the trial's that makes it: it is that trial's
        (its lease covers it, so `harness gc` leaves it alone; its host state counts it
        as the trial's own), in that trial's `cgroup`."""
        key = shape.key
        await self._acquire_lock()
        try:
            self._sweep()
            found = await asyncio.to_thread(self.load, shape)  # hashing: off the loop
            if isinstance(found, Snapshot):
                return found
            work = Path(tempfile.mkdtemp(prefix=".make-", dir=self.root))
            try:
                await _boot_and_save(shape, image, cgroup, work, deadline_s, tag=tag)
                await asyncio.to_thread(_write_manifest, work, key, shape)
                for name in (MEMORY_NAME, DISK_NAME, MANIFEST_NAME):
                    os.chmod(work / name, 0o444)
                final = self.entry(key)
                shutil.rmtree(final, ignore_errors=True)
                os.rename(work, final)
            finally:
                shutil.rmtree(work, ignore_errors=True)
        finally:
            self._release_lock()
        found = await asyncio.to_thread(self.load, shape)
        if not isinstance(found, Snapshot):
            raise VmError("qemu_start_failed")
        return found

    def _sweep(self) -> None:
        """Remove what a maker killed half way left (its `.make-*` directory): only the
        lock's holder makes, so under the lock any such directory is nobody's."""
        for leftover in self.root.glob(".make-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        for leftover in self.root.glob(".discard-*"):
            shutil.rmtree(leftover, ignore_errors=True)

    async def _acquire_lock(self) -> None:
        """Polled without blocking, so a cancel while another process makes the same key
        leaves no thread behind holding the lock."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle = os.open(self.root / ".make.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    await asyncio.sleep(0.05)
        except BaseException:
            os.close(handle)
            raise
        self._lock_handle = handle

    def _release_lock(self) -> None:
        if self._lock_handle is not None:
            os.close(self._lock_handle)
            self._lock_handle = None


def _write_manifest(work: Path, key: str, shape: SnapshotShape) -> None:
    files = {
        name: {"sha256": sha256_file(work / name), "size": (work / name).stat().st_size}
        for name in (MEMORY_NAME, DISK_NAME)
    }
    manifest = {"schema": FORMAT, "key": key, "shape": asdict(shape), "files": files}
    (work / MANIFEST_NAME).write_text(json.dumps(manifest, sort_keys=True, indent=1) + "\n")


async def _boot_and_save(
    shape: SnapshotShape,
    image: BootImage,
    cgroup: Cgroup,
    work: Path,
    deadline_s: float,
    *,
    tag: str,
) -> None:
    """One guest, never given a trial: booted, seen waiting, stopped, streamed, quit."""
    os.chmod(work, 0o700)
    disk = work / DISK_NAME
    create_overlay(image.base, disk)
    slot = data_slot(work, None)
    config = QemuConfig(
        tag=tag,
        accelerator=shape.accelerator,
        vmlinux=image.vmlinux.absolute(),
        initramfs=image.initramfs.absolute(),
        serial_log=work / "console.log",
        qmp_socket=work / "qmp.sock",
        memory_mib=shape.memory_mib,
        vcpus=shape.vcpus,
        tb_size_mib=shape.tb_size_mib,
        overlay=disk,
        data_disk=slot,
        ssh_port=pick_loopback_port(),
        control_socket=work / "control.sock",
    )
    process = spawn_qemu(qemu_argv(config), cgroup, work / "qemu.log")
    try:
        alive = lambda: process.poll() is None  # noqa: E731
        await wait_waiting(work / "control.sock", deadline_s, alive)
        memory = work / MEMORY_NAME
        await qmp_execute(config.qmp_socket, "stop", {}, 10.0)
        uri = f"exec:cat > {memory}"
        await qmp_execute(config.qmp_socket, "migrate", {"uri": uri}, 10.0)
        end = time.monotonic() + SAVE_DEADLINE_S
        while True:
            status = await qmp_execute(config.qmp_socket, "query-migrate", {}, 10.0)
            state = status.get("status") if isinstance(status, dict) else None
            if state == "completed":
                break
            if state == "failed" or time.monotonic() > end:
                raise VmError("qemu_start_failed")
            await asyncio.sleep(0.05)
        if not await qmp_quit(config.qmp_socket, 5.0) or await wait_exit(process, 30) is None:
            raise VmError("qemu_start_failed")
    finally:
        if process.poll() is None:
            process.kill()
            await wait_exit(process, 30)
    slot.unlink()
    mode = stat.S_IMODE(disk.stat().st_mode)
    if mode & 0o077:
        raise VmError("qemu_start_failed")
