"""The QEMU command line, built from a typed configuration (pure; unit-tested).

Why each part:
- `-machine q35` without the SATA, SMBus and vmport devices nobody uses.
- `-nodefaults -no-user-config -nographic`: no device, config file or display we did
  not ask for; the only console is a serial line into a file in the scratch
  directory (diagnostics; never copied into a receipt).
- `-sandbox on,...`: QEMU's seccomp filter; spawning stays allowed for a later
  `guestfwd` helper.
- `-accel tcg,tb-size=N -cpu max`: TCG's translation cache dominates QEMU's RSS
  (~650 MB default, ~377 MB at 64); the default CPU model lacks SSE4/POPCNT and numpy
  dies with SIGILL. Under KVM the host CPU is passed through.
- Direct kernel boot of the uncompressed vmlinux (PVH) and the initramfs; `panic=-1`
  with `-no-reboot` turns any guest failure into a QEMU exit we can see.
- The per-trial qcow2 overlay is the only writable disk; an optional data disk is
  attached `readonly=on`.
- `-netdev user,restrict=on` with one hostfwd on 127.0.0.1: the guest reaches nothing
  (not 10.0.2.2, not the host's loopback, not the outside); the host reaches its sshd.
- Keys through `-fw_cfg name=opt/harness/...`: nothing secret is written to a disk.
- `-name guest=harness-vm-<tag>` puts the trial tag in the command line for gc.
- With a control socket (host/vm/control.py) the guest takes its trial over a
  virtio-serial port instead of fw_cfg, always has a data disk slot (an empty one when
  the trial has none: a restored guest's devices must be the snapshot's), and has a
  `vmgenid` device: QEMU gives it a new generation ID at every start, restores
  included, and the guest kernel reseeds its RNG when the ID changes, so two guests
  restored from one snapshot do not share RNG output.
- `-incoming exec:cat FILE` restores a snapshot's memory stream (QEMU 7.2 has no `file:`
  URI); QEMU comes up paused and runs on `cont`.
"""

from __future__ import annotations

import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from host.image.contract import (
    CONTROL_CMDLINE_FLAG,
    CONTROL_PORT_NAME,
    FW_CFG_AUTHORIZED_KEYS,
    FW_CFG_HOST_KEY,
    GUEST_SSH_PORT,
    KERNEL_CMDLINE,
    PROBE_CMDLINE_FLAG,
)
from host.vm.categories import Accelerator
from host.vm.tags import resource_name

QEMU_BINARY = "qemu-system-x86_64"
SANDBOX = "on,obsolete=deny,elevateprivileges=deny,resourcecontrol=deny"
SANDBOX_WITH_CHANNEL = "on,obsolete=deny,resourcecontrol=deny"
"""With host placement QEMU spawns socat per guest connection, and seccomp filters are
inherited across exec: under `elevateprivileges=deny` the helper dies before it
connects (measured: the guest's connection closes empty). Only that one denial is
dropped, and only when the worker channel exists."""
SECCOMP_FILTER = 2  # /proc/PID/status `Seccomp:` of a process under a BPF filter
MACHINE = "q35,sata=off,smbus=off,vmport=off"
"""q35, not i440fx: under TCG, probing the virtio PCI devices took ~2.1 s on `pc` and
~0.25 s on q35 (measured with per-insmod timestamps in the initramfs)."""


@dataclass(frozen=True)
class QemuConfig:
    """Everything the command line depends on."""

    tag: str
    accelerator: Accelerator
    vmlinux: Path
    initramfs: Path
    serial_log: Path
    qmp_socket: Path
    memory_mib: int = 1024
    vcpus: int = 2
    tb_size_mib: int = 64
    overlay: Path | None = None
    data_disk: Path | None = None
    ssh_port: int | None = None
    host_key_file: Path | None = None
    authorized_keys_file: Path | None = None
    probe: bool = False
    """Boot kernel + initramfs only, print the probe line and power off (no disks)."""
    worker_socket: Path | None = None
    """With host placement: the worker's Unix socket, the guest's one channel to it."""
    control_socket: Path | None = None
    """The control port's socket: the guest takes its trial there (no fw_cfg keys)."""
    incoming: Path | None = None
    """A snapshot's memory stream to restore instead of booting."""

    def __post_init__(self) -> None:
        if not 128 <= self.memory_mib <= 1 << 20 or not 1 <= self.vcpus <= 64:
            raise ValueError("memory or vcpus out of range")
        if not 16 <= self.tb_size_mib <= 4096:
            raise ValueError("tb-size out of range")
        keys = (
            ()
            if self.control_socket is not None
            else (
                self.host_key_file,
                self.authorized_keys_file,
            )
        )
        if not self.probe and None in (self.overlay, self.ssh_port, *keys):
            raise ValueError("a full boot needs an overlay, a port and both key files")
        if self.control_socket is not None and self.data_disk is None:
            raise ValueError("a guest on the control port has a data disk slot")
        if self.incoming is not None and self.control_socket is None:
            raise ValueError("only a guest on the control port is restored")
        for path in self._paths():
            if "," in str(path) or not path.is_absolute():
                raise ValueError("QEMU paths are absolute and contain no comma")

    def _paths(self) -> list[Path]:
        candidates = [
            self.vmlinux,
            self.initramfs,
            self.serial_log,
            self.qmp_socket,
            self.overlay,
            self.data_disk,
            self.host_key_file,
            self.authorized_keys_file,
            self.control_socket,
            self.incoming,
        ]
        return [p for p in candidates if p is not None]


def accel_args(config: QemuConfig) -> list[str]:
    if config.accelerator == "kvm":
        return ["-accel", "kvm", "-cpu", "host"]
    return ["-accel", f"tcg,tb-size={config.tb_size_mib}", "-cpu", "max"]


PROBE_CONSOLE: Final = ("earlyprintk=serial,ttyS0,115200", "ignore_loglevel")
"""What the probe's kernel adds: every boot message on the serial console, from the start."""


def kernel_append(config: QemuConfig) -> str:
    parts = [*KERNEL_CMDLINE, f"harness.tag={config.tag}"]
    if config.probe:
        # the probe's console speaks from the kernel's first instructions on, so a guest
        # that stopped is told from a slow one by its silence (host/vm/accel.py)
        parts = [p for p in parts if p != "quiet"] + [*PROBE_CONSOLE, PROBE_CMDLINE_FLAG]
    if config.control_socket is not None:
        parts.append(CONTROL_CMDLINE_FLAG)
    return " ".join(parts)


def sandbox_option(worker_channel: bool) -> str:
    """The `-sandbox` value: the channel's helper needs fork/exec and setuid-free spawn."""
    return SANDBOX_WITH_CHANNEL if worker_channel else SANDBOX


def sandbox_in_force(options: list[str], mode: int | None, expected: str) -> bool:
    """Whether QEMU's filter is exactly *expected*: the only enabling ``-sandbox`` on
    its argv (libvirt adds ``-sandbox off`` when told to add none; QEMU installs the
    filter of every enabling option, so a second one would add its denials), and the
    kernel reporting a seccomp filter (mode 2) on the process."""
    enabling = [o for o in options if o != "off"]
    return enabling == [expected] and mode == SECCOMP_FILTER


WORKER_GUEST_ADDRESS = "10.0.2.100"
WORKER_GUEST_PORT = 8080
_SAFE_SOCKET = re.compile(r"^/[A-Za-z0-9_./-]{1,100}$")


def guestfwd(worker_socket: Path | None) -> str:
    """`,guestfwd=...` connecting 10.0.2.100:8080 in the guest to the worker's socket.

    libslirp runs the `cmd:` helper per connection, without a shell, splitting on
    spaces; a comma would end QEMU's option. So the path must be absolute and plain
    (FIELD-NOTES: one socat per connection; it stays in QEMU's cgroup). With
    restrict=on this is the only address the guest can reach.
    """
    if worker_socket is None:
        return ""
    path = str(worker_socket)
    socat = shutil.which("socat") or "/usr/bin/socat"  # QEMU's environment has no PATH
    if _SAFE_SOCKET.fullmatch(path) is None or _SAFE_SOCKET.fullmatch(socat) is None:
        raise ValueError("the worker socket and socat paths must be absolute and plain")
    return (
        f",guestfwd=tcp:{WORKER_GUEST_ADDRESS}:{WORKER_GUEST_PORT}-cmd:"
        f"{socat} STDIO UNIX-CONNECT:{path}"
    )


def qemu_argv(config: QemuConfig) -> list[str]:
    """The full argv for `config`."""
    name = resource_name(config.tag)
    argv = [
        QEMU_BINARY,
        "-name",
        f"guest={name},process={name[:15]}",
        "-nodefaults",
        "-no-user-config",
        "-nographic",
        "-sandbox",
        sandbox_option(config.worker_socket is not None),
        "-machine",
        MACHINE,
        *accel_args(config),
        "-m",
        str(config.memory_mib),
        "-smp",
        str(config.vcpus),
        "-kernel",
        str(config.vmlinux),
        "-initrd",
        str(config.initramfs),
        "-append",
        kernel_append(config),
        "-no-reboot",
        "-chardev",
        f"file,id=serial0,path={config.serial_log}",
        "-serial",
        "chardev:serial0",
        "-qmp",
        f"unix:{config.qmp_socket},server=on,wait=off",
    ]
    if config.probe:
        return argv
    overlay, port = config.overlay, config.ssh_port
    if overlay is None or port is None:
        raise ValueError("a full boot needs an overlay, a port and both key files")
    argv += ["-drive", f"file={overlay},if=virtio,format=qcow2"]
    if config.data_disk is not None:
        # the control port's slot is a qcow2 of a fixed size over the trial's raw disk
        data_format = "qcow2" if config.control_socket is not None else "raw"
        argv += [
            "-drive",
            f"file={config.data_disk},if=virtio,format={data_format},readonly=on",
        ]
    argv += [
        "-netdev",
        f"user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:{port}-:{GUEST_SSH_PORT}"
        + guestfwd(config.worker_socket),
        "-device",
        "virtio-net-pci,netdev=n0,romfile=",
        "-device",
        "virtio-rng-pci",
    ]
    if config.control_socket is not None:
        return argv + control_args(config.control_socket, config.incoming)
    host_key, authorized = config.host_key_file, config.authorized_keys_file
    if host_key is None or authorized is None:
        raise ValueError("a full boot needs an overlay, a port and both key files")
    return [
        *argv,
        "-fw_cfg",
        f"name={FW_CFG_HOST_KEY},file={host_key}",
        "-fw_cfg",
        f"name={FW_CFG_AUTHORIZED_KEYS},file={authorized}",
    ]


def control_args(socket: Path, incoming: Path | None) -> list[str]:
    """The control port, the generation ID device, and a snapshot to restore."""
    args = [
        "-device",
        "virtio-serial-pci,id=control0",
        "-chardev",
        f"socket,id=control,path={socket},server=on,wait=off",
        "-device",
        f"virtserialport,chardev=control,name={CONTROL_PORT_NAME}",
        "-device",
        "vmgenid,guid=auto",
    ]
    if incoming is not None:
        args += ["-incoming", f"exec:cat {shlex.quote(str(incoming))}"]
    return args
