"""The libvirt domain XML for the trial guest (pure; unit-tested).

Why it mirrors host/vm/cmdline.py: both backends must boot the same guest, so the XML
is built from the same `QemuConfig` (its validation included: absolute paths, no
commas). What libvirt 9.0 on these hosts cannot express natively goes through
`<qemu:commandline>` (FIELD-NOTES, libvirt section):
- the network: passt and `<portForward>` are unavailable, so the user-mode netdev with
  `restrict=on` and the one hostfwd on 127.0.0.1 is passed as is, with an explicit
  virtio-net address on pcie.0 (libvirt does not know the device and would otherwise
  collide with the slots it assigns), and for worker placement `host` the same
  `guestfwd` to the worker's socket as the qemu backend's;
- QEMU's seccomp filter (`-sandbox`), the qemu backend's exactly: libvirt's own adds
  `spawn=deny`, which the guestfwd helper cannot live with, so qemu.conf must say
  `seccomp_sandbox = 0` (.ci/libvirtd-up) and the backend checks QEMU's argv;
- nothing else: direct kernel boot, the qcow2 overlay, the read-only data disk, the
  keys (`<sysinfo type='fwcfg'>`), vCPUs, the TCG translation cache and `-cpu max`
  (`<cpu mode='maximum'>`) are all native.
The domain is named `harness-vm-<tag>` and carries the tag in its metadata, so gc
finds a leftover domain by name and can check the tag it claims.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from host.image.contract import FW_CFG_AUTHORIZED_KEYS, FW_CFG_HOST_KEY, GUEST_SSH_PORT
from host.vm.cmdline import QEMU_BINARY, QemuConfig, guestfwd, kernel_append, sandbox_option
from host.vm.tags import resource_name

QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
HARNESS_NS = "https://harness.invalid/libvirt/trial/1"
"""Our metadata namespace (a URI is only an identifier; nothing is fetched)."""
NET_DEVICE = "virtio-net-pci,netdev=n0,bus=pcie.0,addr=0x10,romfile="
EMULATOR = f"/usr/bin/{QEMU_BINARY}"


def _sub(
    parent: ET.Element, element_name: str, text: str | None = None, **attrs: str
) -> ET.Element:
    element = ET.SubElement(parent, element_name, attrs)
    if text is not None:
        element.text = text
    return element


def domain_xml(config: QemuConfig) -> str:
    """The transient domain for `config` (a full boot; probes stay on the qemu backend)."""
    overlay, port = config.overlay, config.ssh_port
    host_key, authorized = config.host_key_file, config.authorized_keys_file
    if config.probe or overlay is None or port is None or host_key is None or authorized is None:
        raise ValueError("a libvirt domain is a full boot: overlay, port and both key files")
    ET.register_namespace("qemu", QEMU_NS)
    ET.register_namespace("harness", HARNESS_NS)
    kvm = config.accelerator == "kvm"
    domain = ET.Element("domain", {"type": "kvm" if kvm else "qemu"})
    _sub(domain, "name", resource_name(config.tag))
    metadata = _sub(domain, "metadata")
    _sub(metadata, f"{{{HARNESS_NS}}}trial", tag=config.tag)
    _sub(domain, "memory", str(config.memory_mib), unit="MiB")
    _sub(domain, "vcpu", str(config.vcpus))
    sysinfo = _sub(domain, "sysinfo", type="fwcfg")
    _sub(sysinfo, "entry", name=FW_CFG_HOST_KEY, file=str(host_key))
    _sub(sysinfo, "entry", name=FW_CFG_AUTHORIZED_KEYS, file=str(authorized))
    os_el = _sub(domain, "os")
    _sub(os_el, "type", "hvm", arch="x86_64", machine="q35")
    _sub(os_el, "kernel", str(config.vmlinux))
    _sub(os_el, "initrd", str(config.initramfs))
    _sub(os_el, "cmdline", kernel_append(config))
    features = _sub(domain, "features")
    _sub(features, "acpi")  # the guest finds fw_cfg (and so its keys) through ACPI
    if not kvm:
        tcg = _sub(features, "tcg")
        _sub(tcg, "tb-cache", str(config.tb_size_mib), unit="MiB")
    _sub(domain, "cpu", mode="host-passthrough" if kvm else "maximum", check="none")
    for event in ("on_poweroff", "on_reboot", "on_crash"):
        _sub(domain, event, "destroy")  # like -no-reboot: a failed guest ends the domain
    _add_devices(domain, config, overlay)
    commandline = _sub(domain, f"{{{QEMU_NS}}}commandline")
    netdev = f"user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:{port}-:{GUEST_SSH_PORT}" + guestfwd(
        config.worker_socket
    )
    sandbox = sandbox_option(config.worker_socket is not None)
    for value in ("-netdev", netdev, "-device", NET_DEVICE, "-sandbox", sandbox):
        _sub(commandline, f"{{{QEMU_NS}}}arg", value=value)
    return ET.tostring(domain, encoding="unicode")


def _add_devices(domain: ET.Element, config: QemuConfig, overlay: Path) -> None:
    """Disks (overlay, optional read-only data disk), serial file, rng; no USB, no balloon."""
    devices = _sub(domain, "devices")
    _sub(devices, "emulator", EMULATOR)
    disk = _sub(devices, "disk", type="file", device="disk")
    _sub(disk, "driver", name="qemu", type="qcow2")
    _sub(disk, "source", file=str(overlay))
    _sub(disk, "target", dev="vda", bus="virtio")
    if config.data_disk is not None:
        data = _sub(devices, "disk", type="file", device="disk")
        _sub(data, "driver", name="qemu", type="raw")
        _sub(data, "source", file=str(config.data_disk))
        _sub(data, "target", dev="vdb", bus="virtio")
        _sub(data, "readonly")
    _sub(devices, "controller", type="usb", model="none")
    serial = _sub(devices, "serial", type="file")
    _sub(serial, "source", path=str(config.serial_log))
    _sub(serial, "target", port="0")
    rng = _sub(devices, "rng", model="virtio")
    _sub(rng, "backend", "/dev/urandom", model="random")
    _sub(devices, "memballoon", model="none")
