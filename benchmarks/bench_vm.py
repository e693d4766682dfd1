"""VM start to first SSH command, side by side with a bare boot of the same kernel.

Run: .venv/bin/python -m benchmarks.bench_vm [--repeat 5] [--tb-size 64]
         [--backends qemu,libvirt,control,restore]

The floor is QEMU booting the same vmlinux + initramfs with no disk, no network and
no keys, until the initramfs prints its first userspace line. The measured path is
the qemu backend's whole start: scratch dir, keys, overlay, QEMU in a cgroup, guest
init, sshd, banner wait, pinned-key login and a first `true`; with `libvirt` in
`--backends`, the same through the libvirt backend (transient domain, paused memory
limit, resume), side by side. `control` is the qemu backend booting cold for the
control port (the trial's keys given over virtio-serial after boot, host/vm/control.py);
`restore` is the same guest restored from a snapshot (host/vm/snapshot.py), made
once before the runs (its making time is printed, not counted). Also: teardown time
(QMP quit or libvirt destroy to every resource confirmed released) and QEMU's peak RSS
(VmHWM). Medians of `--repeat` runs, one VM at a time, the paths alternated; ratios,
not absolute goals (machines and their load differ: say the load when quoting).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from host.cgroups import Cgroup, detect
from host.image import GuestImage, ensure_image
from host.image.contract import CONSOLE_FIRST_LINE
from host.vm import QemuBackend, VmBackend, VmSpec
from host.vm.cmdline import QemuConfig, qemu_argv
from host.vm.process import peak_rss_bytes, spawn_qemu, wait_exit
from host.vm.scratch import create_scratch
from host.vm.snapshot import Snapshot, SnapshotShape, SnapshotStore, qemu_build


async def bare_boot_s(image: GuestImage, cgroup: Cgroup, root: Path, tb_size: int) -> float:
    """Seconds from spawning QEMU to the initramfs's first line on the serial console."""
    tag = uuid.uuid4().hex[:16]
    scratch = create_scratch(root, tag)
    serial = scratch / "console.log"
    config = QemuConfig(
        tag=tag,
        accelerator="tcg",
        vmlinux=image.vmlinux,
        initramfs=image.initramfs,
        serial_log=serial,
        qmp_socket=scratch / "qmp.sock",
        tb_size_mib=tb_size,
        probe=True,
    )
    needle = CONSOLE_FIRST_LINE.encode()
    started = time.monotonic()
    process = spawn_qemu(qemu_argv(config), cgroup, scratch / "qemu.log")
    try:
        while True:
            if serial.exists() and needle in serial.read_bytes():
                return time.monotonic() - started
            if process.poll() is not None:
                raise RuntimeError("bare boot exited before its first line")
            await asyncio.sleep(0.01)
    finally:
        process.kill()
        await wait_exit(process, 10)
        shutil.rmtree(scratch)


def make_backend(name: str) -> VmBackend:
    """`control` and `restore` are the qemu backend on the control port."""
    if name == "libvirt":
        from host.vm.libvirt_backend import LibvirtBackend

        return LibvirtBackend()
    return QemuBackend()


async def full_start(
    backend: str,
    image: GuestImage,
    cgroup: Cgroup,
    root: Path,
    tb_size: int,
    *,
    snapshot: Snapshot | None = None,
) -> tuple[float, float, int]:
    """(start → first SSH command s, teardown s, peak RSS bytes) of one VM."""
    vm = make_backend(backend).create(
        VmSpec(
            tag=uuid.uuid4().hex[:16],
            image=image,
            cgroup=cgroup,
            scratch_root=root,
            accelerator="tcg",
            accelerator_reason="forced_by_flag",
            tb_size_mib=tb_size,
            control=backend in ("control", "restore"),
            snapshot=snapshot if backend == "restore" else None,
        )
    )
    started = time.monotonic()
    try:
        await vm.start()
        await vm.wait_ready(180)
        ready = time.monotonic() - started
        pid = vm.qemu_pid()
        rss = (peak_rss_bytes(pid) if pid is not None else None) or 0
    finally:
        torn = time.monotonic()
        results = await vm.cleanup()
        teardown = time.monotonic() - torn
    if not all(r.confirmed for r in results) or rss == 0:
        raise RuntimeError("teardown not confirmed")
    return ready, teardown, rss


async def run(repeat: int, tb_size: int, backends: list[str]) -> None:
    image = ensure_image()
    hierarchy = detect()
    cgroup = hierarchy.create(f"hbench-{uuid.uuid4().hex[:8]}")
    root = Path(tempfile.mkdtemp(prefix="hvb-", dir="/tmp"))
    try:
        cgroup.set_memory_limit(3 << 30)
        snapshot = None
        if "restore" in backends:
            made = time.monotonic()
            shape = SnapshotShape(image.key, "tcg", 1024, 2, tb_size, qemu_build())
            store = SnapshotStore(root / "snapshots")
            snapshot = await store.make(shape, image, cgroup, 180, tag=uuid.uuid4().hex[:16])
            print(f"snapshot made in {time.monotonic() - made:.2f}s (not counted below)")
        floors = [await bare_boot_s(image, cgroup, root, tb_size) for _ in range(repeat)]
        runs: dict[str, list[tuple[float, float, int]]] = {name: [] for name in backends}
        for _ in range(repeat):  # alternated, so load drifts hit every path alike
            for name in backends:
                run = await full_start(name, image, cgroup, root, tb_size, snapshot=snapshot)
                runs[name].append(run)
    finally:
        cgroup.kill_members()
        cgroup.remove()
        shutil.rmtree(root, ignore_errors=True)
    floor = statistics.median(floors)
    print(
        f"image {image.key[:12]} ({image.provenance}), TCG, tb-size={tb_size} MiB, "
        f"1 GiB guest, 2 vCPUs, median of {repeat}"
    )
    print(f"{'measure':52} {'median':>10} {'min':>9} {'max':>9}  ratio")
    print(
        f"{'bare boot to first userspace line (floor)':52} {floor:9.2f}s "
        f"{min(floors):8.2f}s {max(floors):8.2f}s  1.00x"
    )
    for name, fulls in runs.items():
        _report(name, fulls, floor)


def _report(name: str, fulls: list[tuple[float, float, int]], floor: float) -> None:
    ready = statistics.median(f[0] for f in fulls)
    teardown = statistics.median(f[1] for f in fulls)
    rss = statistics.median(f[2] for f in fulls)
    print(
        f"{name + ': start to first SSH command':52} {ready:9.2f}s "
        f"{min(f[0] for f in fulls):8.2f}s {max(f[0] for f in fulls):8.2f}s  "
        f"{ready / floor:.2f}x floor"
    )
    print(
        f"{name + ': teardown (to all confirmed)':52} {teardown:9.2f}s "
        f"{min(f[1] for f in fulls):8.2f}s {max(f[1] for f in fulls):8.2f}s  "
        f"{teardown / ready:.2f}x start"
    )
    print(
        f"{name + ': peak QEMU RSS (VmHWM)':52} {rss / 2**20:8.0f}MiB "
        f"{min(f[2] for f in fulls) / 2**20:7.0f}MiB {max(f[2] for f in fulls) / 2**20:7.0f}MiB"
        f"  {rss / 2**30:.2f}x guest RAM"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tb-size", type=int, default=64)
    parser.add_argument("--backends", default="qemu,libvirt", help="comma-separated")
    args = parser.parse_args()
    backends = args.backends.split(",")
    if not set(backends) <= {"qemu", "libvirt", "control", "restore"}:
        parser.error("--backends: qemu, libvirt, control, restore")
    asyncio.run(run(args.repeat, args.tb_size, backends))


if __name__ == "__main__":
    main()
