"""The `qemu` VM backend: QEMU + QMP, one per trial, torn down with evidence.

Acquisition order (release is the reverse, each with a `CleanupResult`):
  scratch_dir → ssh_keys → overlay_disk → forwarded_port → qemu_process
Teardown of the process: QMP `quit`, wait with a deadline, then SIGKILL, then reap;
the evidence is our own `waitpid` result (`process_reaped`). The port is proven
closed by a refused connection, the files and the directory by their absence. A
QEMU killed from outside (kill -9) still tears down cleanly: QMP fails, the process
is reaped, and the rest is released as usual.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Literal

from host.cgroups import CgroupError
from host.ssh import (
    CommandResult,
    KeyFiles,
    SshError,
    SshSession,
    TrialKeys,
    connect,
    generate_trial_keys,
    open_ssh_socket,
    write_key_files,
)
from host.vm.backend import Vm, VmFacts, VmSpec
from host.vm.categories import StopMethod
from host.vm.cleanup import CleanupResult, Stopwatch, not_acquired
from host.vm.cmdline import QemuConfig, qemu_argv
from host.vm.errors import VmError
from host.vm.ports import pick_loopback_port, probe_port
from host.vm.process import peak_rss_bytes, spawn_qemu, wait_exit
from host.vm.qmp import qmp_quit
from host.vm.scratch import create_overlay, create_scratch
from host.vm.tags import validate_tag

QUIT_DEADLINE_S = 10.0
KILL_DEADLINE_S = 10.0
SSH_HOST = "127.0.0.1"


class QemuVm(Vm):
    """One QEMU guest; see the module docstring for its resources."""

    def __init__(self, spec: VmSpec) -> None:
        validate_tag(spec.tag)
        self.spec = spec
        self.keys: TrialKeys | None = None
        self.scratch: Path | None = None
        self.key_files: KeyFiles | None = None
        self.overlay: Path | None = None
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.stop_method: StopMethod = "not_started"
        self._process_result: CleanupResult | None = None
        self._session: SshSession | None = None
        self._started_at: float | None = None
        self._created_at = time.monotonic()
        self._boot_to_ssh_ms: int | None = None
        self._peak_rss: int | None = None

    # ---- paths -------------------------------------------------------------------
    @property
    def serial_log(self) -> Path | None:
        return None if self.scratch is None else self.scratch / "console.log"

    @property
    def qmp_socket(self) -> Path | None:
        return None if self.scratch is None else self.scratch / "qmp.sock"

    def config(self) -> QemuConfig:
        if self.scratch is None or self.key_files is None or self.overlay is None:
            raise VmError("qemu_start_failed")
        image = self.spec.image
        return QemuConfig(
            tag=self.spec.tag,
            accelerator=self.spec.accelerator,
            vmlinux=image.vmlinux.absolute(),
            initramfs=image.initramfs.absolute(),
            serial_log=self.scratch / "console.log",
            qmp_socket=self.scratch / "qmp.sock",
            memory_mib=self.spec.memory_mib,
            vcpus=self.spec.vcpus,
            tb_size_mib=self.spec.tb_size_mib,
            overlay=self.overlay,
            data_disk=None if self.spec.data_disk is None else self.spec.data_disk.absolute(),
            worker_socket=self.spec.worker_socket,
            ssh_port=self.port,
            host_key_file=self.key_files.host_key,
            authorized_keys_file=self.key_files.authorized_keys,
        )

    # ---- life --------------------------------------------------------------------
    async def start(self) -> None:
        try:
            self.scratch = create_scratch(self.spec.scratch_root, self.spec.tag)
            self.keys = generate_trial_keys()
            self.key_files = write_key_files(self.keys, self.scratch)
            overlay = self.scratch / "overlay.qcow2"
            create_overlay(self.spec.image.base, overlay)
            self.overlay = overlay
            self.port = pick_loopback_port()
            argv = qemu_argv(self.config())
            self._started_at = time.monotonic()
            self.process = spawn_qemu(argv, self.spec.cgroup, self.scratch / "qemu.log")
        except VmError:
            raise
        except (CgroupError, OSError, ValueError, subprocess.SubprocessError):
            raise VmError("qemu_start_failed") from None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    async def wait_ready(self, deadline_s: float) -> int:
        started_at = self._started_at
        if self.process is None or self.port is None or self.keys is None or started_at is None:
            raise VmError("qemu_start_failed")
        end = time.monotonic() + deadline_s
        try:
            sock = await open_ssh_socket(SSH_HOST, self.port, deadline_s, alive=self.alive)
            remaining = max(end - time.monotonic(), 1.0)
            self._session = await connect(
                SSH_HOST, self.port, self.keys, deadline_s=remaining, sock=sock
            )
            result = await self._session.run("true", deadline_s=max(end - time.monotonic(), 1.0))
        except SshError as exc:
            raise VmError(self._ready_failure(exc)) from None
        if result.exit_status != 0:
            raise VmError("ssh_dropped")
        self._boot_to_ssh_ms = int((time.monotonic() - started_at) * 1000)
        return self._boot_to_ssh_ms

    def _ready_failure(
        self, exc: SshError
    ) -> Literal["qemu_exited", "host_key_mismatch", "ssh_timeout", "ssh_dropped"]:
        if not self.alive():
            return "qemu_exited"
        if exc.category == "host_key_mismatch":
            return "host_key_mismatch"
        if exc.category in ("banner_timeout", "connect_refused", "connect_timeout"):
            return "ssh_timeout"
        return "ssh_dropped"

    def session(self) -> SshSession:
        if self._session is None:
            raise VmError("ssh_dropped")
        return self._session

    async def exec(self, command: str, deadline_s: float) -> CommandResult:
        return await self.session().run(command, deadline_s=deadline_s)

    async def put(self, local: Path, remote: str, deadline_s: float) -> int:
        return await self.session().put(local, remote, deadline_s=deadline_s)

    async def get(self, remote: str, local: Path, deadline_s: float) -> int:
        return await self.session().get(remote, local, deadline_s=deadline_s)

    def peak_rss_bytes(self) -> int | None:
        """QEMU's peak RSS (VmHWM) while it runs; the last reading after it stopped."""
        if self.process is not None and self.process.poll() is None:
            reading = peak_rss_bytes(self.process.pid)
            if reading is not None:
                self._peak_rss = reading
        return self._peak_rss

    # ---- teardown ----------------------------------------------------------------
    async def stop(self, deadline_s: float = QUIT_DEADLINE_S) -> CleanupResult:
        if self._process_result is not None:
            return self._process_result
        if self._session is not None:
            await self._session.close()
            self._session = None
        process = self.process
        if process is None:
            self._process_result = not_acquired("qemu_process")
            return self._process_result
        watch = Stopwatch()
        self.peak_rss_bytes()
        if process.poll() is not None:
            self.stop_method = "already_exited"
        else:
            socket_path = self.qmp_socket
            quit_sent = socket_path is not None and await qmp_quit(socket_path, 3.0)
            code = await wait_exit(process, deadline_s) if quit_sent else None
            if code is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGKILL)
                self.stop_method = "sigkill"
            else:
                self.stop_method = "qmp_quit"
        code = await wait_exit(process, KILL_DEADLINE_S)
        if code is None:
            self._process_result = CleanupResult(
                "qemu_process", "failed", "still_present", watch.ms()
            )
        else:
            # poll()/wait() returned a code: our own waitpid reaped the child.
            self._process_result = CleanupResult(
                "qemu_process", "confirmed", "process_reaped", watch.ms()
            )
        return self._process_result

    async def cleanup(self) -> tuple[CleanupResult, ...]:
        results = [await self.stop()]
        results.append(self._release_port())
        results.append(self._release_file("overlay_disk", self.overlay))
        key_paths = (
            None
            if self.key_files is None
            else (self.key_files.host_key, self.key_files.authorized_keys)
        )
        results.append(self._release_keys(key_paths))
        results.append(self._release_scratch())
        return tuple(results)

    def _release_port(self) -> CleanupResult:
        if self.port is None:
            return not_acquired("forwarded_port")
        watch = Stopwatch()
        state = probe_port(self.port)
        if state == "refusing":
            return CleanupResult("forwarded_port", "confirmed", "port_refusing", watch.ms())
        evidence: Literal["still_present", "unread"] = (
            "still_present" if state == "accepting" else "unread"
        )
        return CleanupResult("forwarded_port", "failed", evidence, watch.ms())

    def _release_file(self, resource: Literal["overlay_disk"], path: Path | None) -> CleanupResult:
        if path is None:
            return not_acquired(resource)
        watch = Stopwatch()
        return CleanupResult(resource, *_remove_files((path,)), watch.ms())

    def _release_keys(self, paths: tuple[Path, Path] | None) -> CleanupResult:
        if paths is None:
            return not_acquired("ssh_keys")
        watch = Stopwatch()
        return CleanupResult("ssh_keys", *_remove_files(paths), watch.ms())

    def _release_scratch(self) -> CleanupResult:
        if self.scratch is None:
            return not_acquired("scratch_dir")
        watch = Stopwatch()
        shutil.rmtree(self.scratch, ignore_errors=True)
        try:
            present = self.scratch.exists() or self.scratch.is_symlink()
        except OSError:
            return CleanupResult("scratch_dir", "failed", "unread", watch.ms())
        if present:
            return CleanupResult("scratch_dir", "failed", "still_present", watch.ms())
        return CleanupResult("scratch_dir", "confirmed", "directory_absent", watch.ms())

    def facts(self) -> VmFacts:
        if self.keys is None:
            raise VmError("qemu_start_failed")
        return VmFacts(
            backend="qemu",
            accelerator=self.spec.accelerator,
            accelerator_reason=self.spec.accelerator_reason,
            guest_memory_bytes=self.spec.memory_mib << 20,
            vcpus=self.spec.vcpus,
            host_key_sha256=self.keys.host_key_sha256,
            boot_to_ssh_ms=self._boot_to_ssh_ms,
            duration_ms=int((time.monotonic() - self._created_at) * 1000),
        )


def _remove_files(
    paths: tuple[Path, ...],
) -> tuple[Literal["confirmed", "failed"], Literal["file_absent", "still_present", "unread"]]:
    """Unlink each path, then prove each is gone; never raises (teardown goes on)."""
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink()
    try:
        if any(p.exists() or p.is_symlink() for p in paths):
            return "failed", "still_present"
    except OSError:
        return "failed", "unread"
    return "confirmed", "file_absent"


class QemuBackend:
    """`VmBackend` for QEMU."""

    @property
    def name(self) -> Literal["qemu"]:
        return "qemu"

    def create(self, spec: VmSpec) -> QemuVm:
        return QemuVm(spec)
