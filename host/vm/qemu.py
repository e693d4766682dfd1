"""The `qemu` VM backend: QEMU + QMP, one per trial, torn down with evidence.

Acquisition order (release is the reverse, each with a `CleanupResult`):
  scratch_dir → ssh_keys → overlay_disk → forwarded_port → qemu_process
Teardown of the process: QMP `quit`, wait with a deadline, then SIGKILL, then reap;
the evidence is our own `waitpid` result (`process_reaped`), whose status is how QEMU
ended (`qemu_end`: its exit status or signal, and whether it had ended before we stopped
it, after QMP `quit`, or after SIGKILL). The port is proven
closed by a refused connection, the files and the directory by their absence. A
QEMU killed from outside (kill -9) still tears down cleanly: QMP fails, the process
is reaped, and the rest is released as usual.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import subprocess
import time
from pathlib import Path
from typing import Literal

from host.cgroups import CgroupError
from host.release import CleanupResult, Stopwatch, not_acquired
from host.vm.backend import VmSpec
from host.vm.cmdline import QemuConfig, qemu_argv
from host.vm.control import TrialFields, configure
from host.vm.errors import VmError
from host.vm.guest import GuestVm
from host.vm.process import peak_rss_bytes, spawn_qemu, wait_exit
from host.vm.qmp import qmp_execute, qmp_quit
from host.vm.snapshot import data_slot
from receipts.ownership import GUEST_OWNS
from receipts.records.cleanup import Resource
from receipts.records.vm import QemuEnd, QemuStop

QUIT_DEADLINE_S = 10.0
KILL_DEADLINE_S = 10.0


log = logging.getLogger(__name__)
CONSOLE_TAIL_BYTES = 240


def console_last_line(console: Path) -> str:
    """The guest console's last non-empty line, printable ASCII only, at most
    CONSOLE_TAIL_BYTES: what the operator's log says when a guest fails closed on its
    control port (the init prints why before it powers off). Empty when unread."""
    try:
        with console.open("rb") as handle:
            handle.seek(max(0, console.stat().st_size - CONSOLE_TAIL_BYTES))
            tail = handle.read(CONSOLE_TAIL_BYTES)
    except OSError:
        return ""
    text = "".join(c if " " <= c <= "~" else "\n" for c in tail.decode("ascii", "replace"))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


class QemuVm(GuestVm):
    """One QEMU guest; see the module docstring for its resources."""

    backend_name = "qemu"

    def __init__(self, spec: VmSpec) -> None:
        super().__init__(spec)
        self.process: subprocess.Popen[bytes] | None = None
        self._process_result: CleanupResult | None = None
        self._qemu_end: QemuEnd | None = None
        self._peak_rss: int | None = None
        self.data_slot: Path | None = None
        """On the control port: the data disk slot (host/vm/snapshot.py)."""

    @property
    def qmp_socket(self) -> Path | None:
        return None if self.scratch is None else self.scratch / "qmp.sock"

    def config(self) -> QemuConfig:
        if self.scratch is None or self.key_files is None or self.overlay is None:
            raise VmError("qemu_start_failed")
        image, spec = self.spec.image, self.spec
        data_disk = None if spec.data_disk is None else spec.data_disk.absolute()
        if spec.control:
            if self.data_slot is None:
                raise VmError("qemu_start_failed")
            data_disk = self.data_slot
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
            data_disk=data_disk,
            worker_socket=self.spec.worker_socket,
            ssh_port=self.port,
            host_key_file=None if spec.control else self.key_files.host_key,
            authorized_keys_file=None if spec.control else self.key_files.authorized_keys,
            control_socket=self.control_socket if spec.control else None,
            incoming=None if spec.snapshot is None else spec.snapshot.memory,
        )

    @property
    def control_socket(self) -> Path | None:
        return None if self.scratch is None else self.scratch / "control.sock"

    # ---- life --------------------------------------------------------------------
    async def start(self) -> None:
        try:
            self.acquire_files()
            if self.spec.control and self.scratch is not None:
                self.data_slot = data_slot(self.scratch, self.spec.data_disk)
            config = self.config()
            self._started_at = time.monotonic()
            self.process = spawn_qemu(
                qemu_argv(config), self.spec.cgroup, config.serial_log.with_name("qemu.log")
            )
        except VmError:
            raise
        except (CgroupError, OSError, ValueError, subprocess.SubprocessError):
            raise VmError("qemu_start_failed") from None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    async def before_ssh(self, deadline_s: float) -> None:
        """On the control port: resume a restored guest, then give it its trial. Cold
        booted or restored, the guest waits on its port until this is done."""
        if not self.spec.control:
            return
        socket, qmp = self.control_socket, self.qmp_socket
        if socket is None or qmp is None or self.keys is None:
            raise VmError("qemu_start_failed")
        resume = None
        if self.spec.snapshot is not None:
            await self._loaded(qmp, deadline_s)

            async def resume() -> None:
                await qmp_execute(qmp, "cont", {}, 5.0)

        fields = TrialFields.fresh(self.keys, data_disk=self.spec.data_disk is not None)
        try:
            await configure(socket, fields, deadline_s, self.alive, resume)
        except VmError as exc:
            # for the operator (never a record): which of the init's checks failed closed
            log.warning(
                "guest control failed (%s); console's last line: %r",
                exc.category,
                console_last_line(self.scratch / "console.log") if self.scratch else "",
            )
            raise

    async def _loaded(self, qmp: Path, deadline_s: float) -> None:
        """Wait until the stream is read: QEMU then stays paused until `cont`."""
        end = time.monotonic() + deadline_s
        while True:
            if not self.alive():
                raise VmError("qemu_exited")
            if time.monotonic() > end:
                raise VmError("boot_timeout")
            if not qmp.exists():  # QEMU has not made its monitor yet: nothing to ask
                await asyncio.sleep(0.01)
                continue
            try:
                status = await qmp_execute(qmp, "query-status", {}, 5.0)
            except VmError:
                await asyncio.sleep(0.01)  # made, not listening yet
                continue
            state = status.get("status") if isinstance(status, dict) else None
            if state == "paused":
                break
            if state != "inmigrate":
                raise VmError("qemu_start_failed")
            await asyncio.sleep(0.01)

    def launched(self) -> bool:
        return self.process is not None

    def qemu_pid(self) -> int | None:
        return None if self.process is None else self.process.pid

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
        await self.close_session()
        process = self.process
        if process is None:
            self._process_result = not_acquired("qemu_process")
            return self._process_result
        watch = Stopwatch()
        self.peak_rss_bytes()
        stop: QemuStop
        if process.poll() is not None:
            stop = "already_exited"
        else:
            socket_path = self.qmp_socket
            quit_sent = socket_path is not None and await qmp_quit(socket_path, 3.0)
            code = await wait_exit(process, deadline_s) if quit_sent else None
            if code is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGKILL)
                stop = "sigkill"
            else:
                stop = "qmp_quit"
        self.stop_method = stop
        code = await wait_exit(process, KILL_DEADLINE_S)
        if code is None:
            self._process_result = CleanupResult(
                "qemu_process", "failed", "still_present", watch.ms()
            )
        else:
            # poll()/wait() returned a code: our own waitpid reaped the child, and its
            # status is how QEMU ended (a negative code: the signal that ended it).
            self._qemu_end = QemuEnd.of_returncode(stop, code)
            self._process_result = CleanupResult(
                "qemu_process", "confirmed", "process_reaped", watch.ms()
            )
        return self._process_result

    def qemu_end(self) -> QemuEnd | None:
        """How QEMU ended, read by our own `waitpid` in `stop`; None until it reaped QEMU,
        and for good when QEMU never started or outlived the kill deadline."""
        return self._qemu_end

    async def cleanup(self) -> tuple[CleanupResult, ...]:
        return (await self.stop(), *self.release_files())


class QemuBackend:
    """`VmBackend` for QEMU."""

    @property
    def name(self) -> Literal["qemu"]:
        return "qemu"

    @property
    def owns(self) -> tuple[Resource, ...]:
        return GUEST_OWNS["qemu"]

    def create(self, spec: VmSpec) -> QemuVm:
        return QemuVm(spec)
