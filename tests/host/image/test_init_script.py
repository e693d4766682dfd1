"""The guest init scripts and sshd config say what the design says, and parse."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from host.image.contract import (
    CONSOLE_FIRST_LINE,
    CONTROL_CMDLINE_FLAG,
    CONTROL_CONFIGURED,
    CONTROL_READY,
    FW_CFG_AUTHORIZED_KEYS,
    FW_CFG_HOST_KEY,
    READ_ONLY_MOUNT,
    STAGE2_PATH,
)
from host.image.init_script import sshd_config, stage1_init, stage2_init


def test_stage1_reads_both_keys_from_fw_cfg_into_tmpfs() -> None:
    text = stage1_init()
    assert "/sys/firmware/qemu_fw_cfg/by_name" in text
    assert f'"$fw/{FW_CFG_HOST_KEY}/raw" > /newroot/run/harness/ssh_host_ed25519_key' in text
    assert f'"$fw/{FW_CFG_AUTHORIZED_KEYS}/raw" > /newroot/run/harness/authorized_keys' in text
    # the keys land in a tmpfs mounted over the root disk's /run, never on the disk
    assert text.index("tmpfs /newroot/run") < text.index("ssh_host_ed25519_key")
    assert "umask 077" in text


def test_stage1_network_and_mounts() -> None:
    text = stage1_init()
    assert "ip addr add 10.0.2.15/24 dev eth0" in text
    assert "mount -t ext4 -o rw,nosuid /dev/vda /newroot" in text
    assert f"mount -t ext4 -o ro,nosuid,nodev /dev/vdb /newroot{READ_ONLY_MOUNT}" in text
    assert f"exec switch_root /newroot /{STAGE2_PATH}" in text
    echoes = [line for line in text.splitlines() if line.startswith("echo ")]
    assert echoes[0] == f'echo "{CONSOLE_FIRST_LINE}"'


def test_stage1_powers_off_on_any_failure() -> None:
    text = stage1_init()
    lines = [line.strip() for line in text.splitlines()]
    early = ("mount -t devtmpfs", "mount -t proc", "mount -t sysfs")
    commands = [
        line
        for line in lines
        if line.startswith(("insmod", "ip ", "mount ", "cat ", "mkdir ", "wait "))
        and not line.startswith(early)
    ]
    assert len(commands) >= 15
    for line in commands:
        assert "|| fail" in line or "exit 1" in line, line
    assert 'wait "$pid" || fail "insmod"' in text
    assert "poweroff -f" in text


def test_stage2_starts_sshd_without_systemd_and_powers_off_when_it_dies() -> None:
    text = stage2_init()
    assert "systemd" not in text and "systemctl" not in text
    assert "/usr/sbin/sshd -D -e" in text
    assert text.index('wait "$sshd_pid"') < text.rindex("echo o > /proc/sysrq-trigger")


def test_control_mode_takes_the_trial_from_the_port_not_fw_cfg() -> None:
    stage1, stage2 = stage1_init(), stage2_init()
    # stage 1 reads no key and mounts no data disk when booted for the control port
    blocks = "".join(re.findall(r'if \[ "\$control" = 0 \]; then\n(.*?)\nfi', stage1, re.S))
    for needle in ("no host key in fw_cfg", "> /newroot/run/harness/ssh_host_ed25519_key"):
        assert needle in blocks and stage1.count(needle) == 1, needle
    assert 'if [ "$control" = 0 ] && [ -b /dev/vdb ]' in stage1
    # stage 2: ready, then the fields, then sshd; the keys go to the tmpfs run dir
    assert f'*" {CONTROL_CMDLINE_FLAG} "*)' in stage2
    assert stage2.index(CONTROL_READY) < stage2.index("/usr/sbin/sshd -D -e")
    # configured is said once sshd listens, so the host's first connection is answered
    assert stage2.index("/usr/sbin/sshd -D -e") < stage2.index("until listening")
    assert stage2.index("until listening") < stage2.index(CONTROL_CONFIGURED)
    assert 'run="/run/harness"' in stage2
    assert """printf '%b' "$value" > "$run/ssh_host_ed25519_key" """ in stage2
    assert """printf '%b' "$value" > "$run/authorized_keys" """ in stage2
    # a data disk swapped in under a restored guest: its cached blocks are dropped first
    assert stage2.index("blockdev --flushbufs /dev/vdb") < stage2.index("/dev/vdb /opt")
    assert '*) fail "control field" ;;' in stage2
    assert "exec 3>&-" in stage2 and "</dev/null 3>&- &" in stage2  # sshd has no port


def test_sshd_config_pins_one_key_and_refuses_passwords() -> None:
    options = dict(
        line.split(" ", 1) for line in sshd_config().splitlines() if line and line[0] != "#"
    )
    assert options["HostKey"] == "/run/harness/ssh_host_ed25519_key"
    assert options["AuthorizedKeysFile"] == "/run/harness/authorized_keys"
    assert options["PasswordAuthentication"] == "no"
    assert options["KbdInteractiveAuthentication"] == "no"
    assert options["PermitRootLogin"] == "prohibit-password"
    assert options["HostKeyAlgorithms"] == "ssh-ed25519"
    assert options["AllowTcpForwarding"] == "no"
    assert options["PermitTunnel"] == "no"
    assert "Include" not in options


@pytest.mark.parametrize(
    ("shell", "script"),
    [("busybox", stage1_init), ("dash", stage2_init)],
)
def test_scripts_parse(shell: str, script: object, tmp_path: Path) -> None:
    binary = shutil.which(shell)
    assert binary is not None, f"{shell} is needed for this test"
    path = tmp_path / "init.sh"
    assert callable(script)
    path.write_text(script(), encoding="ascii")
    argv = [binary, "sh", "-n", str(path)] if shell == "busybox" else [binary, "-n", str(path)]
    done = subprocess.run(argv, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
