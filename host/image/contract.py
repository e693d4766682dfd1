"""What the host and the guest image agree on: names, addresses, markers.

The VM backend writes these fw_cfg entries and the image's init reads them; the
benchmark and the accelerator probe look for these console lines. Keeping them in
one module means a change on one side cannot silently miss the other.
"""

from typing import Final

FW_CFG_HOST_KEY: Final = "opt/harness/host_key"
"""The guest's ephemeral ed25519 host private key (OpenSSH format)."""

FW_CFG_AUTHORIZED_KEYS: Final = "opt/harness/authorized_keys"
"""The one client public key allowed to log in (authorized_keys format)."""

GUEST_IP_CIDR: Final = "10.0.2.15/24"
GUEST_GATEWAY: Final = "10.0.2.2"
GUEST_SSH_PORT: Final = 22
GUEST_USER: Final = "root"
READ_ONLY_MOUNT: Final = "/opt/harness-ro"
STAGE2_PATH: Final = "usr/local/sbin/harness-init"
SSHD_CONFIG_PATH: Final = "etc/ssh/sshd_config"
RUN_DIR: Final = "/run/harness"

CONSOLE_FIRST_LINE: Final = "harness-init: userspace"
"""The first line the initramfs prints: the boot floor the benchmark measures."""

CONSOLE_PROBE_DONE: Final = "harness-init: probe done"
"""Printed when booted with `harness.probe=1`, right before powering off."""

PROBE_CMDLINE_FLAG: Final = "harness.probe=1"

KERNEL_CMDLINE: Final = ("console=ttyS0", "quiet", "panic=-1", "random.trust_cpu=on")
"""`panic=-1` with QEMU's `-no-reboot` turns a failed init into a QEMU exit."""

CONTROL_CMDLINE_FLAG: Final = "harness.control=1"
"""Boot for the control port: the trial's keys, clock, seed and data disk come over it
after boot (or after a snapshot's restore), not from fw_cfg at boot."""

CONTROL_PORT_NAME: Final = "harness.control"
"""The virtio-serial port's name (/sys/class/virtio-ports/*/name)."""

CONTROL_READY: Final = "harness-control: ready"
"""The guest's line when it waits for its trial: the moment a snapshot is taken."""

CONTROL_CONFIGURED: Final = "harness-control: configured"
"""The guest's line once it has applied its trial's fields; sshd starts next."""
