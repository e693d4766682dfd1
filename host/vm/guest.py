"""What every backend's VM shares: the trial's files, the SSH link, and their release.

Why one base: the qemu and libvirt backends boot the same guest the same way seen from
the host (a 0700 scratch directory, ephemeral keys handed over by fw_cfg, a qcow2
overlay, one hostfwd port, SSH with the host key pinned) and differ only in who
starts and ends the QEMU process. Keeping the shared half here means both release
their files and prove their port closed with the same code, so the conformance suite
tests one implementation of it, not two that may drift.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

from host.release import CleanupResult, Stopwatch, not_acquired, remove_dir, remove_files
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
from host.vm.errors import VmError
from host.vm.ports import pick_loopback_port, probe_port
from host.vm.scratch import create_overlay, create_scratch
from host.vm.tags import validate_tag
from receipts.records.vm import QemuEnd
from receipts.vocabulary import Backend

SSH_HOST = "127.0.0.1"


class GuestVm(Vm):
    """The backend-independent half of a VM; subclasses start and stop QEMU."""

    backend_name: Backend

    def __init__(self, spec: VmSpec) -> None:
        validate_tag(spec.tag)
        self.spec = spec
        self.keys: TrialKeys | None = None
        self.scratch: Path | None = None
        self.key_files: KeyFiles | None = None
        self.overlay: Path | None = None
        self.port: int | None = None
        self._session: SshSession | None = None
        self._started_at: float | None = None
        self._created_at = time.monotonic()
        self._boot_to_ssh_ms: int | None = None
        self.stop_method: StopMethod = "not_started"

    # ---- acquisition -------------------------------------------------------------
    def acquire_files(self) -> None:
        """Scratch dir, keys, overlay and port, in that order (released in reverse)."""
        self.scratch = create_scratch(self.spec.scratch_root, self.spec.tag)
        self.keys = generate_trial_keys()
        self.key_files = write_key_files(self.keys, self.scratch)
        overlay = self.scratch / "overlay.qcow2"
        snapshot = self.spec.snapshot
        create_overlay(self.spec.image.base if snapshot is None else snapshot.disk, overlay)
        self.overlay = overlay
        self.port = pick_loopback_port()

    @property
    def serial_log(self) -> Path | None:
        return None if self.scratch is None else self.scratch / "console.log"

    async def before_ssh(self, deadline_s: float) -> None:
        """What a backend does between starting QEMU and the first SSH connection."""

    def alive(self) -> bool:
        """Whether the guest's QEMU still runs (subclasses know how to tell)."""
        raise NotImplementedError

    def launched(self) -> bool:
        """Whether a QEMU was started (whatever became of it)."""
        raise NotImplementedError

    def qemu_pid(self) -> int | None:
        """The guest's QEMU process id, once started."""
        raise NotImplementedError

    def qemu_end(self) -> QemuEnd | None:
        """How QEMU ended, when this backend reaped it itself; the base reads nothing."""
        return None

    # ---- SSH ---------------------------------------------------------------------
    async def wait_ready(self, deadline_s: float) -> int:
        started_at = self._started_at
        if not self.launched() or self.port is None or self.keys is None or started_at is None:
            raise VmError("qemu_start_failed")
        end = time.monotonic() + deadline_s
        await self.before_ssh(deadline_s)
        try:
            remaining = max(end - time.monotonic(), 1.0)  # one deadline for all of it
            sock = await open_ssh_socket(SSH_HOST, self.port, remaining, alive=self.alive)
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

    async def close_session(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def exec(self, command: str, deadline_s: float) -> CommandResult:
        return await self.session().run(command, deadline_s=deadline_s)

    async def put(self, local: Path, remote: str, deadline_s: float) -> int:
        return await self.session().put(local, remote, deadline_s=deadline_s)

    async def get(self, remote: str, local: Path, deadline_s: float) -> int:
        return await self.session().get(remote, local, deadline_s=deadline_s)

    # ---- release of the shared resources -----------------------------------------
    def facts(self) -> VmFacts:
        """What the VM record states about this guest (the backend names itself)."""
        if self.keys is None:
            raise VmError("qemu_start_failed")
        return VmFacts(
            backend=self.backend_name,
            accelerator=self.spec.accelerator,
            accelerator_reason=self.spec.accelerator_reason,
            guest_memory_bytes=self.spec.memory_mib << 20,
            vcpus=self.spec.vcpus,
            host_key_sha256=self.keys.host_key_sha256,
            boot_to_ssh_ms=self._boot_to_ssh_ms,
            duration_ms=int((time.monotonic() - self._created_at) * 1000),
        )

    def release_files(self) -> list[CleanupResult]:
        """Port, overlay, keys, scratch: call after QEMU is gone (it holds them)."""
        results = [self._release_port(), self._release_file("overlay_disk", self.overlay)]
        key_paths = (
            None
            if self.key_files is None
            else (self.key_files.host_key, self.key_files.authorized_keys)
        )
        results.append(self._release_keys(key_paths))
        results.append(self._release_scratch())
        return results

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
        return remove_files((path,), resource)

    def _release_keys(self, paths: tuple[Path, Path] | None) -> CleanupResult:
        if paths is None:
            return not_acquired("ssh_keys")
        return remove_files(paths, "ssh_keys")

    def _release_scratch(self) -> CleanupResult:
        if self.scratch is None:
            return not_acquired("scratch_dir")
        return remove_dir(self.scratch, "scratch_dir")
