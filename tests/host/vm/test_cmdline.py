"""The QEMU command line: isolation, accelerator, disks, keys and the gc tag."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from host.vm.cmdline import QemuConfig, qemu_argv

TAG = "0123456789abcdef"
S = Path("/tmp/harness-vm-0123456789abcdef-x")


def config(**changes: object) -> QemuConfig:
    base = QemuConfig(
        tag=TAG,
        accelerator="tcg",
        vmlinux=Path("/img/vmlinux"),
        initramfs=Path("/img/initramfs.cpio"),
        serial_log=S / "console.log",
        qmp_socket=S / "qmp.sock",
        overlay=S / "overlay.qcow2",
        ssh_port=40022,
        host_key_file=S / "guest_host_key",
        authorized_keys_file=S / "guest_authorized_keys",
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def option_values(argv: list[str], option: str) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == option]


def test_no_defaults_no_user_config_no_display() -> None:
    argv = qemu_argv(config())
    assert option_values(argv, "-machine") == ["q35,sata=off,smbus=off,vmport=off"]
    assert {"-nodefaults", "-no-user-config", "-nographic", "-no-reboot"} <= set(argv)
    assert option_values(argv, "-sandbox") == [
        "on,obsolete=deny,elevateprivileges=deny,resourcecontrol=deny"
    ]


def test_user_network_is_restricted_with_one_loopback_forward() -> None:
    argv = qemu_argv(config())
    assert option_values(argv, "-netdev") == [
        "user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:40022-:22"
    ]
    assert "virtio-net-pci,netdev=n0,romfile=" in option_values(argv, "-device")


def test_tcg_uses_cpu_max_and_a_bounded_translation_cache() -> None:
    argv = qemu_argv(config(tb_size_mib=64))
    assert option_values(argv, "-accel") == ["tcg,tb-size=64"]
    assert option_values(argv, "-cpu") == ["max"]
    kvm = qemu_argv(config(accelerator="kvm"))
    assert option_values(kvm, "-accel") == ["kvm"]


def test_direct_kernel_boot_with_serial_to_scratch() -> None:
    argv = qemu_argv(config())
    assert option_values(argv, "-kernel") == ["/img/vmlinux"]
    assert option_values(argv, "-initrd") == ["/img/initramfs.cpio"]
    append = option_values(argv, "-append")[0]
    assert "console=ttyS0" in append and "panic=-1" in append and f"harness.tag={TAG}" in append
    assert option_values(argv, "-chardev") == [f"file,id=serial0,path={S}/console.log"]
    assert option_values(argv, "-qmp") == [f"unix:{S}/qmp.sock,server=on,wait=off"]


def test_keys_go_through_fw_cfg() -> None:
    argv = qemu_argv(config())
    assert option_values(argv, "-fw_cfg") == [
        f"name=opt/harness/host_key,file={S}/guest_host_key",
        f"name=opt/harness/authorized_keys,file={S}/guest_authorized_keys",
    ]


def test_overlay_is_the_only_writable_disk_and_data_disk_is_read_only() -> None:
    assert option_values(qemu_argv(config()), "-drive") == [
        f"file={S}/overlay.qcow2,if=virtio,format=qcow2"
    ]
    drives = option_values(qemu_argv(config(data_disk=Path("/d/data.img"))), "-drive")
    assert drives[1] == "file=/d/data.img,if=virtio,format=raw,readonly=on"


def test_tag_is_in_the_command_line_for_gc() -> None:
    argv = qemu_argv(config())
    assert option_values(argv, "-name") == [f"guest=harness-vm-{TAG},process=harness-vm-0123"]


def test_probe_boot_has_no_disk_no_network_no_keys() -> None:
    argv = qemu_argv(
        config(
            probe=True, overlay=None, ssh_port=None, host_key_file=None, authorized_keys_file=None
        )
    )
    assert "-drive" not in argv and "-netdev" not in argv and "-fw_cfg" not in argv
    assert "harness.probe=1" in option_values(argv, "-append")[0]


def test_only_the_probe_prints_every_boot_message() -> None:
    # the probe tells a stopped guest by its silent console (host/vm/accel.py)
    probe = option_values(
        qemu_argv(
            config(
                probe=True,
                overlay=None,
                ssh_port=None,
                host_key_file=None,
                authorized_keys_file=None,
            )
        ),
        "-append",
    )[0].split()
    guest = option_values(qemu_argv(config()), "-append")[0].split()
    assert "quiet" not in probe and "earlyprintk=serial,ttyS0,115200" in probe
    assert "quiet" in guest and not any(p.startswith("earlyprintk") for p in guest)


@pytest.mark.parametrize(
    "change",
    [
        {"overlay": Path("/tmp/a,b.qcow2")},
        {"vmlinux": Path("relative/vmlinux")},
        {"tag": "NOT-HEX"},
        {"memory_mib": 64},
        {"overlay": None},
        {"tb_size_mib": 1},
    ],
)
def test_refuses_bad_configurations(change: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        qemu_argv(config(**change))


def test_worker_channel_is_one_guestfwd_to_the_socket(tmp_path: Path) -> None:
    """Host placement: 10.0.2.100:8080 in the guest reaches the worker socket and nothing
    else; the seccomp sandbox keeps every denial but the one the helper needs."""
    from host.vm.cmdline import SANDBOX, SANDBOX_WITH_CHANNEL, guestfwd

    socket = tmp_path / "api.sock"
    forward = guestfwd(socket)
    assert forward.startswith(",guestfwd=tcp:10.0.2.100:8080-cmd:/")
    assert forward.endswith(f"STDIO UNIX-CONNECT:{socket}")
    assert guestfwd(None) == ""
    with pytest.raises(ValueError):
        guestfwd(Path("/tmp/a,b/api.sock"))
    assert "elevateprivileges=deny" in SANDBOX
    dropped = set(SANDBOX.split(",")) - set(SANDBOX_WITH_CHANNEL.split(","))
    assert dropped == {"elevateprivileges=deny"}
