"""The libvirt domain XML: the same guest, isolation and keys as the QEMU command line."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from host.vm.cmdline import (
    SANDBOX,
    SANDBOX_WITH_CHANNEL,
    guestfwd,
    qemu_argv,
    sandbox_in_force,
)
from host.vm.domain import HARNESS_NS, NET_DEVICE, QEMU_NS, domain_xml
from tests.host.vm.test_cmdline import TAG, S, config


def parsed(**changes: object) -> ET.Element:
    return ET.fromstring(domain_xml(config(**changes)))


LIBVIRT_DEFAULT = "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"
"""What libvirt 9.0 passes when qemu.conf does not say seccomp_sandbox = 0 (measured)."""


def qemu_args(domain: ET.Element) -> list[str]:
    return [arg.attrib["value"] for arg in domain.iter(f"{{{QEMU_NS}}}arg")]


def test_named_and_tagged_for_gc() -> None:
    domain = parsed()
    assert domain.findtext("name") == f"harness-vm-{TAG}"
    trial = domain.find(f"metadata/{{{HARNESS_NS}}}trial")
    assert trial is not None and trial.attrib == {"tag": TAG}
    assert f"harness.tag={TAG}" in (domain.findtext("os/cmdline") or "")


def test_user_network_is_restricted_with_one_loopback_forward() -> None:
    domain = parsed()
    assert qemu_args(domain) == [
        "-netdev",
        "user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:40022-:22",
        "-device",
        NET_DEVICE,
        "-sandbox",
        SANDBOX,
    ]
    assert "addr=0x10" in NET_DEVICE and "bus=pcie.0" in NET_DEVICE
    assert domain.find("devices/interface") is None  # no libvirt-managed network at all


def test_direct_kernel_boot_and_tcg_settings() -> None:
    domain = parsed()
    assert domain.attrib["type"] == "qemu"
    assert domain.findtext("os/kernel") == "/img/vmlinux"
    assert domain.findtext("os/initrd") == "/img/initramfs.cpio"
    assert domain.findtext("features/tcg/tb-cache") == "64"
    assert domain.find("features/acpi") is not None  # fw_cfg is found through ACPI
    cpu = domain.find("cpu")
    assert cpu is not None and cpu.attrib["mode"] == "maximum"
    assert [domain.findtext(e) for e in ("on_poweroff", "on_reboot", "on_crash")] == ["destroy"] * 3
    kvm = parsed(accelerator="kvm")
    assert kvm.attrib["type"] == "kvm" and kvm.find("features/tcg") is None
    kvm_cpu = kvm.find("cpu")
    assert kvm_cpu is not None and kvm_cpu.attrib["mode"] == "host-passthrough"


def test_keys_by_fw_cfg_and_disks() -> None:
    domain = parsed(data_disk=Path("/data/data.img"))
    entries = {e.attrib["name"]: e.attrib["file"] for e in domain.iter("entry")}
    assert entries == {
        "opt/harness/host_key": str(S / "guest_host_key"),
        "opt/harness/authorized_keys": str(S / "guest_authorized_keys"),
    }
    sysinfo = domain.find("sysinfo")
    assert sysinfo is not None and sysinfo.attrib["type"] == "fwcfg"
    disks = domain.findall("devices/disk")
    assert [d.find("source").attrib["file"] for d in disks] == [  # type: ignore[union-attr]
        str(S / "overlay.qcow2"),
        "/data/data.img",
    ]
    assert disks[0].find("readonly") is None and disks[1].find("readonly") is not None
    assert len(parsed().findall("devices/disk")) == 1


def test_refuses_a_probe() -> None:
    with pytest.raises(ValueError, match="full boot"):
        domain_xml(config(probe=True))


def test_worker_channel_and_sandbox_are_the_qemu_backends() -> None:
    """Placement host: the same guestfwd as the QEMU command line, and the same filter
    (the one that lets the channel's helper spawn); without a channel, the strict one."""
    with_channel = config(worker_socket=Path("/tmp/api.sock"))
    args = qemu_args(ET.fromstring(domain_xml(with_channel)))
    netdev = args[args.index("-netdev") + 1]
    assert netdev.endswith(guestfwd(Path("/tmp/api.sock")))
    assert "guestfwd=tcp:10.0.2.100:8080-cmd:" in netdev
    qemu = qemu_argv(with_channel)
    assert args[args.index("-sandbox") + 1] == qemu[qemu.index("-sandbox") + 1]
    assert args.count("-sandbox") == 1 and args[args.index("-sandbox") + 1] == SANDBOX_WITH_CHANNEL
    plain = qemu_args(parsed())
    assert plain[plain.index("-sandbox") + 1] == SANDBOX
    assert "guestfwd" not in plain[plain.index("-netdev") + 1]


@pytest.mark.parametrize(
    ("options", "mode", "in_force"),
    [
        ([SANDBOX], 2, True),
        ([SANDBOX, "off"], 2, True),  # libvirt told to add none says `off`
        (["off", SANDBOX], 2, True),
        ([SANDBOX], 0, False),  # on the argv but no filter in the kernel
        ([SANDBOX], None, False),  # unread
        ([SANDBOX, LIBVIRT_DEFAULT], 2, False),  # libvirt's own would add spawn=deny
        ([LIBVIRT_DEFAULT], 2, False),
        (["off"], 0, False),
        ([], 2, False),
    ],
)
def test_sandbox_in_force(options: list[str], mode: int | None, in_force: bool) -> None:
    assert sandbox_in_force(options, mode, SANDBOX) is in_force
