"""The libvirt domain XML: the same guest, isolation and keys as the QEMU command line."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from host.vm.domain import HARNESS_NS, NET_DEVICE, QEMU_NS, domain_xml
from tests.host.vm.test_cmdline import TAG, S, config


def parsed(**changes: object) -> ET.Element:
    return ET.fromstring(domain_xml(config(**changes)))


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


def test_refuses_a_worker_channel_and_a_probe() -> None:
    with pytest.raises(ValueError, match="worker channel"):
        domain_xml(config(worker_socket=Path("/tmp/api.sock")))
    with pytest.raises(ValueError, match="full boot"):
        domain_xml(config(probe=True))
