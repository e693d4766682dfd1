"""The `libvirt` VM backend: the same guest as a transient domain on qemu:///system.

Acquisition order (release is the reverse, each with a `CleanupResult`):
  scratch_dir → ssh_keys → overlay_disk → forwarded_port → libvirt_domain (its QEMU)
Why each step:
- The domain is created paused with `VIR_DOMAIN_START_AUTODESTROY`: libvirtd destroys
  it when our connection closes, so a SIGKILLed orchestrator does not leave a guest
  running (libvirt's counterpart of the qemu backend's PR_SET_PDEATHSIG).
- The memory budget is the trial cgroup's limit, read back from it. libvirt runs QEMU
  in its own cgroup, and `<memtune><hard_limit>` fails at start on these hosts (no
  CAP_SYS_RESOURCE for the memlock rlimit), so it is applied while paused with
  `setMemoryParameters` (hard limit and memory+swap limit equal: no swap), read back
  both from libvirt and from the cgroup QEMU really runs in, and only then resumed.
  A guest never runs a single instruction over budget.
- Teardown: `destroy()` (SIGTERM, then SIGKILL), then the proofs: libvirt says the
  domain does not exist (`domain_absent`), and no live process carries the trial's
  name any more (`process_gone`; libvirtd, not us, is QEMU's parent and reaps it).
  So QEMU's exit status is not ours to read: the VM record's `qemu_end` is None (libvirt
  tells a domain's shutoff reason, never its QEMU's exit status or signal).
  libvirt's per-domain log under /var/log/libvirt/qemu is removed with the domain,
  so nothing named after the trial outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, Literal

import libvirt

from host.cgroups import CgroupError
from host.procfs import process_running
from host.release import CleanupResult, Stopwatch, not_acquired
from host.vm.backend import VmSpec
from host.vm.budgets import BudgetUnread, cpu_limit_of, memory_limit_of, pids_limit_of
from host.vm.cmdline import QemuConfig, sandbox_in_force, sandbox_option
from host.vm.domain import domain_xml
from host.vm.errors import VmError
from host.vm.guest import GuestVm
from host.vm.leftovers import LIBVIRT_LOG_DIR, find_processes
from host.vm.process import sandbox_options, seccomp_mode
from host.vm.tags import resource_name
from host.vm.virtconn import VirtError, domain_state, open_connection
from receipts.ownership import GUEST_OWNS
from receipts.records.cleanup import Resource
from receipts.records.vm import QemuEnd

GONE_DEADLINE_S = 15.0
CPU_PERIOD_US = 100_000
"""The CFS period of the domain-wide quota (the budget is quota/period, in CPUs)."""
KIB = 1024


class LibvirtVm(GuestVm):
    """One transient libvirt domain; see the module docstring for its resources."""

    backend_name = "libvirt"

    def __init__(self, spec: VmSpec) -> None:
        super().__init__(spec)
        self.name = resource_name(spec.tag)
        self.conn: Any = None
        self.domain: Any = None
        self.pid: int | None = None
        self.memory_limit_bytes: int | None = None
        """The limit read back from the cgroup QEMU runs in (None until applied)."""
        self._stopped: tuple[CleanupResult, CleanupResult] | None = None

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
            qmp_socket=self.scratch / "qmp.sock",  # unused: libvirt owns QEMU's monitor
            memory_mib=self.spec.memory_mib,
            vcpus=self.spec.vcpus,
            tb_size_mib=self.spec.tb_size_mib,
            overlay=self.overlay,
            data_disk=None if self.spec.data_disk is None else self.spec.data_disk.absolute(),
            ssh_port=self.port,
            host_key_file=self.key_files.host_key,
            authorized_keys_file=self.key_files.authorized_keys,
            worker_socket=self.spec.worker_socket,
        )

    # ---- life --------------------------------------------------------------------
    def _budget_bytes(self) -> int:
        try:
            reading = self.spec.cgroup.memory_limit()
        except (CgroupError, OSError):
            raise VmError("qemu_start_failed") from None
        if reading.state != "present" or reading.value is None:
            raise VmError("qemu_start_failed")  # no declared budget: never run unbounded
        return reading.value

    async def start(self) -> None:
        try:
            budget = self._budget_bytes()
            self.acquire_files()
            xml = domain_xml(self.config())
            self.conn = await asyncio.to_thread(open_connection)
            self._started_at = time.monotonic()
            flags = libvirt.VIR_DOMAIN_START_PAUSED | libvirt.VIR_DOMAIN_START_AUTODESTROY
            self.domain = await asyncio.to_thread(self.conn.createXML, xml, flags)
            self.pid = self._find_pid()
            await asyncio.to_thread(self._check_sandbox)
            await asyncio.to_thread(self._apply_memory_limit, budget)
            await asyncio.to_thread(self._apply_cpu_and_pids)
            await asyncio.to_thread(self.domain.resume)
        except VmError:
            raise
        except (VirtError, libvirt.libvirtError, OSError, ValueError):
            raise VmError("qemu_start_failed") from None

    def _find_pid(self) -> int:
        pids = [p.pid for p in find_processes(qemu_only=True) if p.tag == self.spec.tag]
        if len(pids) != 1:
            raise VmError("qemu_start_failed")
        return pids[0]

    def _apply_memory_limit(self, budget: int) -> None:
        """Hard limit and memory+swap limit while paused, read back twice, or refuse."""
        kib = budget // KIB
        params = {"hard_limit": kib, "swap_hard_limit": kib}
        self.domain.setMemoryParameters(params, libvirt.VIR_DOMAIN_AFFECT_LIVE)
        applied = self.domain.memoryParameters(libvirt.VIR_DOMAIN_AFFECT_LIVE)
        if applied.get("hard_limit") != kib or applied.get("swap_hard_limit") != kib:
            raise VmError("qemu_start_failed")
        assert self.pid is not None
        try:
            in_cgroup = memory_limit_of(self.pid)
        except BudgetUnread:
            raise VmError("qemu_start_failed") from None
        if in_cgroup != kib * KIB:
            raise VmError("qemu_start_failed")
        self.memory_limit_bytes = in_cgroup

    def _check_sandbox(self) -> None:
        """QEMU's seccomp filter is ours and in force.

        libvirt adds its own ``-sandbox`` (with ``spawn=deny``, which the worker
        channel's helper cannot live with) unless qemu.conf says ``seccomp_sandbox =
        0`` (.ci/libvirtd-up writes it); then it adds ``-sandbox off``, and QEMU
        installs the filter of every enabling option (:func:`sandbox_in_force`)."""
        assert self.pid is not None
        expected = sandbox_option(self.spec.worker_socket is not None)
        if not sandbox_in_force(sandbox_options(self.pid), seccomp_mode(self.pid), expected):
            raise VmError("qemu_start_failed")

    def _apply_cpu_and_pids(self) -> None:
        """The trial's CPU and pids budgets on the paused QEMU, read back from the kernel.

        CPU through libvirt (the domain-wide ``global_quota``, on the domain's cgroup);
        pids has no libvirt tunable, so QEMU joins the trial cgroup's pids hierarchy
        (v1 only: each controller is its own hierarchy, libvirt keeps the others).
        Then both are read where QEMU runs, or the guest never starts."""
        assert self.pid is not None
        if self.spec.cpu_millicores is not None:
            quota = self.spec.cpu_millicores * CPU_PERIOD_US // 1000
            self.domain.setSchedulerParametersFlags(
                {"global_period": CPU_PERIOD_US, "global_quota": quota},
                libvirt.VIR_DOMAIN_AFFECT_LIVE,
            )
        if self.spec.pids_limit is not None:
            try:
                self.spec.cgroup.add_process_to(("pids",), self.pid)
            except (CgroupError, OSError):
                raise VmError("cgroup_apply_failed") from None
        try:
            cpu, pids = cpu_limit_of(self.pid), pids_limit_of(self.pid)
        except BudgetUnread:
            raise VmError("cgroup_apply_failed") from None
        if self.spec.cpu_millicores is not None and cpu != self.spec.cpu_millicores:
            raise VmError("cgroup_apply_failed")
        if self.spec.pids_limit is not None and pids != self.spec.pids_limit:
            raise VmError("cgroup_apply_failed")

    def alive(self) -> bool:
        return self.pid is not None and process_running(self.pid)

    def launched(self) -> bool:
        return self.domain is not None

    def qemu_pid(self) -> int | None:
        return self.pid

    def qemu_end(self) -> QemuEnd | None:
        """Never read: libvirtd reaps QEMU (see the module docstring)."""
        return None

    # ---- teardown ----------------------------------------------------------------
    async def stop(self, deadline_s: float = GONE_DEADLINE_S) -> CleanupResult:
        return (await self._stop(deadline_s))[1]

    async def _stop(self, deadline_s: float) -> tuple[CleanupResult, CleanupResult]:
        if self._stopped is not None:
            return self._stopped
        await self.close_session()
        if self.domain is None and self.conn is not None:
            # createXML failed or never ran: adopt a domain of our name if one exists.
            with contextlib.suppress(libvirt.libvirtError):
                self.domain = self.conn.lookupByName(self.name)
        if self.domain is None:
            if self.conn is not None:
                with contextlib.suppress(libvirt.libvirtError):
                    self.conn.close()
                self.conn = None
            self._stopped = (not_acquired("libvirt_domain"), not_acquired("qemu_process"))
            return self._stopped
        domain_result = await asyncio.to_thread(self._destroy_domain)
        process_result = await self._process_gone(deadline_s)
        self._stopped = (domain_result, process_result)
        return self._stopped

    def _destroy_domain(self) -> CleanupResult:
        watch = Stopwatch()
        if self.domain is not None:
            # Our own reading of QEMU, not libvirt's: libvirt learns of a QEMU that died
            # or powered off a moment later (measured: isActive() still true).
            running = self.pid is not None and process_running(self.pid)
            self.stop_method = "libvirt_destroy" if running else "already_exited"
            with contextlib.suppress(libvirt.libvirtError):  # the read below is the proof
                self.domain.destroy()
        state = domain_state(self.conn, self.name) if self.conn is not None else "unread"
        with contextlib.suppress(libvirt.libvirtError):
            self.conn.close()  # AUTODESTROY would also end the domain here
        self.conn = None
        log = LIBVIRT_LOG_DIR / f"{self.name}.log"
        with contextlib.suppress(OSError):
            log.unlink()
        if state == "absent" and not log.exists():
            return CleanupResult("libvirt_domain", "confirmed", "domain_absent", watch.ms())
        evidence: Literal["still_present", "unread"] = (
            "unread" if state == "unread" else "still_present"
        )
        return CleanupResult("libvirt_domain", "failed", evidence, watch.ms())

    async def _process_gone(self, deadline_s: float) -> CleanupResult:
        if self.pid is None:
            return not_acquired("qemu_process")
        watch = Stopwatch()
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            named = [p for p in find_processes(qemu_only=True) if p.tag == self.spec.tag]
            if not named and not process_running(self.pid):
                return CleanupResult("qemu_process", "confirmed", "process_gone", watch.ms())
            await asyncio.sleep(0.05)
        return CleanupResult("qemu_process", "failed", "still_present", watch.ms())

    async def cleanup(self) -> tuple[CleanupResult, ...]:
        return (*await self._stop(GONE_DEADLINE_S), *self.release_files())


class LibvirtBackend:
    """`VmBackend` for libvirt (qemu:///system)."""

    @property
    def name(self) -> Literal["libvirt"]:
        return "libvirt"

    @property
    def owns(self) -> tuple[Resource, ...]:
        return GUEST_OWNS["libvirt"]

    def create(self, spec: VmSpec) -> LibvirtVm:
        if spec.control:
            raise ValueError("the libvirt backend boots with fw_cfg keys only")
        return LibvirtVm(spec)
