"""Real QEMU guests under TCG: boot, SSH, files, isolation, teardown with evidence.

One VM at a time (never more than two on this 2-core host). Each test boots its own
guest from the session's cached image; the base image must be byte-identical after.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import socket
import stat
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from host.cgroups import Cgroup
from host.image import GuestImage, build_data_disk
from host.image.digest import sha256_file
from host.ssh import SshError, connect, generate_trial_keys
from host.vm import QemuBackend, QemuVm, VmError, VmSpec
from host.vm.ports import probe_port
from tests.host.vm.conftest import tag_processes

pytestmark = pytest.mark.integration

READY_DEADLINE_S = 120.0
EXPECTED_RELEASE = [
    ("qemu_process", "process_reaped"),
    ("forwarded_port", "port_refusing"),
    ("overlay_disk", "file_absent"),
    ("ssh_keys", "file_absent"),
    ("scratch_dir", "directory_absent"),
]


def spec(image: object, cgroup: Cgroup, scratch_root: Path, **changes: object) -> VmSpec:
    base = VmSpec(
        tag=uuid.uuid4().hex[:16],
        image=image,  # type: ignore[arg-type]
        cgroup=cgroup,
        scratch_root=scratch_root,
        accelerator="tcg",
        accelerator_reason="forced_by_flag",
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def started(vm_spec: VmSpec) -> AsyncIterator[QemuVm]:
    """Start a VM; release everything even if the test fails first."""
    vm = QemuBackend().create(vm_spec)
    try:
        await vm.start()
        yield vm
    finally:
        await vm.cleanup()


def assert_torn_down(vm: QemuVm, results: tuple[object, ...]) -> None:
    got = [(r.resource, r.evidence, r.status) for r in results]  # type: ignore[attr-defined]
    assert got == [(res, ev, "confirmed") for res, ev in EXPECTED_RELEASE]
    for index, result in enumerate(results):
        result.to_record(index)  # type: ignore[attr-defined]
    assert tag_processes(vm.spec.tag) == []
    assert vm.port is not None and probe_port(vm.port) == "refusing"
    assert vm.scratch is not None and not vm.scratch.exists()


async def test_boot_run_copy_teardown(
    guest_image: GuestImage, vm_cgroup: Cgroup, scratch_root: Path, tmp_path: Path
) -> None:
    base_before = sha256_file(guest_image.base)
    base_mtime = guest_image.base.stat().st_mtime_ns
    data = tmp_path / "data"
    data.mkdir()
    (data / "hello.txt").write_text("read-only hello\n")
    disk = build_data_disk(data, tmp_path / "data.img")

    vm = QemuBackend().create(spec(guest_image, vm_cgroup, scratch_root, data_disk=disk.path))
    try:
        await vm.start()
        assert vm.process is not None and vm.scratch is not None
        assert vm.process.pid in vm_cgroup.member_pids()
        assert stat.S_IMODE(vm.scratch.stat().st_mode) == 0o700
        assert tag_processes(vm.spec.tag) == [vm.process.pid]
        boot_ms = await vm.wait_ready(READY_DEADLINE_S)
        assert boot_ms > 0

        result = await vm.exec("python3 -c 'print(1)'", deadline_s=60)
        assert (result.exit_status, result.stdout) == (0, b"1\n")
        runners = await vm.exec(
            "node -e 'console.log(2)' && python3 -m pytest --version >/dev/null"
            " && ldconfig -p | grep -q libgomp.so.1 && ! ls /etc/ssh/ssh_host_* 2>/dev/null",
            deadline_s=60,
        )
        assert (runners.exit_status, runners.stdout) == (0, b"2\n")
        failing = await vm.exec("exit 7", deadline_s=30)
        assert failing.exit_status == 7

        upload = tmp_path / "up.bin"
        upload.write_bytes(os.urandom(100_000))
        assert await vm.put(upload, "/root/up.bin", deadline_s=60) == 100_000
        digest = await vm.exec("sha256sum /root/up.bin", deadline_s=30)
        assert digest.stdout.split()[0].decode() == sha256_file(upload)
        await vm.exec("head -c 50000 /dev/urandom > /root/down.bin", deadline_s=30)
        download = tmp_path / "down.bin"
        assert await vm.get("/root/down.bin", download, deadline_s=60) == 50_000
        remote = await vm.exec("sha256sum /root/down.bin", deadline_s=30)
        assert remote.stdout.split()[0].decode() == sha256_file(download)

        ro = await vm.exec(
            "cat /sys/block/vdb/ro /opt/harness-ro/hello.txt"
            " && ! touch /opt/harness-ro/x 2>/dev/null",
            deadline_s=30,
        )
        assert (ro.exit_status, ro.stdout) == (0, b"1\nread-only hello\n")

        # The pinned host key is the only one accepted: a different pin is refused.
        assert vm.port is not None and vm.keys is not None
        wrong = dataclasses.replace(vm.keys, host_key=generate_trial_keys().host_key)
        with pytest.raises(SshError) as err:
            await connect("127.0.0.1", vm.port, wrong, deadline_s=30)
        assert err.value.category == "host_key_mismatch"
        facts = vm.facts()
        assert facts.host_key_sha256 == vm.keys.host_key_sha256
        facts.to_record("ok")
    finally:
        results = await vm.cleanup()
    assert vm.stop_method == "qmp_quit"
    assert_torn_down(vm, results)
    assert vm_cgroup.member_pids() == ()
    assert sha256_file(guest_image.base) == base_before
    assert guest_image.base.stat().st_mtime_ns == base_mtime


async def test_guest_cannot_reach_the_host_or_anything_else(
    guest_image: GuestImage, vm_cgroup: Cgroup, scratch_root: Path
) -> None:
    accepted: list[object] = []

    async def on_connect(_r: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer.get_extra_info("peername"))
        writer.close()

    listener = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    probe = f"""
import json, socket, concurrent.futures as cf
def attempt(target):
    s = socket.socket(); s.settimeout(4)
    try:
        s.connect(target); return "connected"
    except OSError as e:
        return type(e).__name__
    finally:
        s.close()
targets = [("10.0.2.2", {port}), ("10.0.2.2", 22), ("127.0.0.1", {port}),
           ("10.0.2.3", 53), ("10.0.2.4", 445), ("1.1.1.1", 80)]
with cf.ThreadPoolExecutor(len(targets)) as pool:
    print(json.dumps(dict(zip([f"{{h}}:{{p}}" for h, p in targets], pool.map(attempt, targets)))))
"""
    try:
        async with started(spec(guest_image, vm_cgroup, scratch_root)) as vm:
            await vm.wait_ready(READY_DEADLINE_S)
            result = await vm.exec(f"python3 -c '{probe}'", deadline_s=60)
            assert result.exit_status == 0, result.stderr
            outcome = json.loads(result.stdout)
    finally:
        listener.close()
        await listener.wait_closed()
    assert len(outcome) == 6
    assert all(value != "connected" for value in outcome.values()), outcome
    assert accepted == []


async def test_teardown_confirms_after_qemu_is_killed(
    guest_image: GuestImage, vm_cgroup: Cgroup, scratch_root: Path
) -> None:
    vm = QemuBackend().create(spec(guest_image, vm_cgroup, scratch_root))
    try:
        await vm.start()
        await vm.wait_ready(READY_DEADLINE_S)
        assert vm.process is not None
        os.kill(vm.process.pid, signal.SIGKILL)
        with pytest.raises(SshError):
            await vm.exec("true", deadline_s=10)
    finally:
        results = await vm.cleanup()
    assert vm.stop_method in ("already_exited", "sigkill")
    assert vm.process is not None and vm.process.returncode == -signal.SIGKILL
    assert_torn_down(vm, results)


async def test_guest_that_cannot_boot_is_qemu_exited(
    guest_image: GuestImage, vm_cgroup: Cgroup, scratch_root: Path, tmp_path: Path
) -> None:
    # A blank base: stage 1 cannot mount the root, powers off, and QEMU exits.
    blank = tmp_path / "blank.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(blank), "64M"], check=True)

    @dataclasses.dataclass(frozen=True)
    class Blank:
        vmlinux: Path
        initramfs: Path
        base: Path

    image = Blank(guest_image.vmlinux, guest_image.initramfs, blank)
    vm = QemuBackend().create(spec(image, vm_cgroup, scratch_root))
    try:
        await vm.start()
        started = time.monotonic()
        with pytest.raises(VmError) as err:
            await vm.wait_ready(READY_DEADLINE_S)
        assert err.value.category == "qemu_exited"
        # noticed when QEMU exits, not when the SSH deadline runs out
        assert time.monotonic() - started < READY_DEADLINE_S / 2
        assert vm.serial_log is not None
        assert b"harness-init: failed: root mount" in vm.serial_log.read_bytes()
    finally:
        results = await vm.cleanup()
    assert vm.stop_method == "already_exited"
    assert_torn_down(vm, results)


def test_nothing_listens_on_a_released_port() -> None:
    # The port probe itself: a port we hold open is seen, so `refusing` is evidence.
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        assert probe_port(holder.getsockname()[1]) == "accepting"
