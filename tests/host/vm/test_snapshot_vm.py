"""Guests restored from one snapshot are as separate as guests booted one by one.

Real QEMU under TCG: a snapshot of an idle guest is made, then restored into two
guests side by side (two VMs, as many as the machine's cores). Each must be given its
own trial after the restore: its own host key (the SSH link pins it), RNG output, wall
clock, data disk, and a root disk no other guest writes to. A snapshot whose files do
not match its manifest is refused by name and made again, never restored.

Mutation controls (run by hand, each fails here): the clock field left out of the
control message (the restored guest's clock lags by the pause before the restore);
the trial overlay made over the image base instead of the snapshot's disk layer (the
guest's cached ext4 state would not be its disk's; a short test does not see that
corruption, so the overlay's backing file is read); `load` skipping the digest
comparison (the tampered stream is restored).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from host.cgroups import Cgroup
from host.image import GuestImage, build_data_disk
from host.image.contract import READ_ONLY_MOUNT
from host.vm import QemuBackend
from host.vm.qemu import QemuVm
from host.vm.snapshot import MEMORY_NAME, Snapshot, SnapshotShape, SnapshotStore, qemu_build
from tests.host.vm.support import READY_DEADLINE_S, assert_torn_down, spec

pytestmark = pytest.mark.integration
MAKER = "5ab0" * 4
"""The tag the snapshot's maker runs under (a trial's own, in a trial)."""
PAUSE_S = 4.0
"""Between saving and restoring: a guest whose clock was not set lags by at least this."""


def shape_of(image: GuestImage) -> SnapshotShape:
    return SnapshotShape(
        image_key=image.key,
        accelerator="tcg",
        memory_mib=1024,
        vcpus=2,
        tb_size_mib=64,
        qemu=qemu_build(),
    )


@pytest.fixture
def store(tmp_path: Path) -> SnapshotStore:
    return SnapshotStore(tmp_path / "snapshots")


@contextlib.asynccontextmanager
async def restored(
    image: GuestImage, snapshot: Snapshot, cgroup: Cgroup, root: Path, **changes: object
) -> AsyncIterator[QemuVm]:
    vm = QemuBackend().create(spec(image, cgroup, root, control=True, snapshot=snapshot, **changes))
    try:
        await vm.start()
        yield vm
    except BaseException:
        log = vm.serial_log  # what the guest's init said last (it powers off on failure)
        if log is not None and log.exists():
            print(log.read_bytes()[-2000:].decode(errors="replace"))
        raise
    finally:
        results = await vm.cleanup()
        assert_torn_down("qemu", vm, results)


def backing_of(overlay: Path) -> str | None:
    info = subprocess.run(
        ["qemu-img", "info", "--force-share", "--output=json", str(overlay)],
        capture_output=True,
        check=True,
        timeout=30,
    )
    backing = json.loads(info.stdout).get("backing-filename")
    return backing if isinstance(backing, str) else None


async def out(vm: QemuVm, command: str) -> str:
    result = await vm.exec(command, deadline_s=60)
    assert result.exit_status == 0, (command, result.stderr)
    return result.stdout.decode().strip()


async def test_two_restored_guests_share_no_key_rng_clock_or_file(
    guest_image: GuestImage,
    make_vm_cgroup: Callable[[], Cgroup],
    scratch_root: Path,
    store: SnapshotStore,
    tmp_path: Path,
) -> None:
    shape = shape_of(guest_image)
    snapshot = await store.make(shape, guest_image, make_vm_cgroup(), READY_DEADLINE_S, tag=MAKER)
    assert store.load(shape) == snapshot  # hashed again, and the same entry
    await asyncio.sleep(PAUSE_S)
    tree = tmp_path / "data"
    tree.mkdir()
    (tree / "only-a.txt").write_text("for guest a\n")
    disk = build_data_disk(tree, tmp_path / "data.img")
    async with (
        restored(guest_image, snapshot, make_vm_cgroup(), scratch_root, data_disk=disk.path) as a,
        restored(guest_image, snapshot, make_vm_cgroup(), scratch_root) as b,
    ):
        ready = await asyncio.gather(a.wait_ready(60), b.wait_ready(60))
        print(f"restore to SSH: {ready} ms")
        for vm in (a, b):  # each writes its own overlay over the snapshot's disk layer
            assert vm.overlay is not None and backing_of(vm.overlay) == str(snapshot.disk)
        # Each SSH link pinned its own guest's host key (a different key fails to connect).
        assert a.facts().host_key_sha256 != b.facts().host_key_sha256
        random = "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'"
        assert await out(a, random) != await out(b, random)
        for vm in (a, b):
            lag = time.time() - int(await out(vm, "date +%s"))
            assert -2 <= lag <= 2, lag  # the clock given after restore, not the saved one
        assert await out(a, f"cat {READ_ONLY_MOUNT}/only-a.txt") == "for guest a"
        assert await out(b, f"ls -A {READ_ONLY_MOUNT}") == ""  # b has no data disk
        await out(a, "echo mine > /root/written-by-a && sync")
        assert await out(b, "ls /root/written-by-a 2>/dev/null || echo absent") == "absent"
    # The snapshot's disk layer was only ever read.
    assert store.load(shape) == snapshot


async def test_a_guest_on_the_control_port_boots_cold_the_same_way(
    guest_image: GuestImage, vm_cgroup: Cgroup, scratch_root: Path
) -> None:
    vm = QemuBackend().create(spec(guest_image, vm_cgroup, scratch_root, control=True))
    try:
        await vm.start()
        await vm.wait_ready(READY_DEADLINE_S)
        assert (await out(vm, "cat /proc/cmdline")).endswith("harness.control=1")
        assert await out(vm, "stat -c %a /run/harness/ssh_host_ed25519_key") == "600"
    finally:
        results = await vm.cleanup()
    assert_torn_down("qemu", vm, results)


async def test_a_snapshot_that_fails_its_digest_is_refused_and_made_again(
    guest_image: GuestImage,
    make_vm_cgroup: Callable[[], Cgroup],
    scratch_root: Path,
    store: SnapshotStore,
) -> None:
    shape = shape_of(guest_image)
    stale = store.root / ".make-killed"  # what a maker killed half way leaves
    (stale / "memory.stream").parent.mkdir(parents=True)
    (stale / "memory.stream").write_bytes(b"half a guest")
    first = await store.make(shape, guest_image, make_vm_cgroup(), READY_DEADLINE_S, tag=MAKER)
    assert not stale.exists()
    memory = first.memory
    os.chmod(memory, 0o644)
    with open(memory, "r+b") as stream:  # one byte of the guest's RAM, changed
        stream.seek(memory.stat().st_size // 2)
        byte = stream.read(1)
        stream.seek(-1, os.SEEK_CUR)
        stream.write(bytes([byte[0] ^ 0xFF]))
    assert store.load(shape) == "digest_mismatch"
    assert not store.entry(shape.key).exists()  # removed, never restored
    assert store.load(shape) == "absent"
    again = await store.make(shape, guest_image, make_vm_cgroup(), READY_DEADLINE_S, tag=MAKER)
    assert again.memory.name == MEMORY_NAME and store.load(shape) == again
    async with restored(guest_image, again, make_vm_cgroup(), scratch_root) as vm:
        await vm.wait_ready(60)
        assert await out(vm, "echo restored") == "restored"
