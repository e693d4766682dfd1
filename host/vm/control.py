"""The control port: what is one trial's own, given to a guest that waits for it.

A guest booted with the control flag (host/image/init_script.py) stops before sshd and
reads its trial's fields from a virtio-serial port: the ephemeral host key, the one
authorized client key, the wall clock, a seed mixed into its RNG, and whether a data
disk is attached. A snapshot is taken of a guest waiting there, so a restored guest is
given all of these after restore and none of them is ever in a snapshot.

Why a virtio-serial port and not fw_cfg (the cold boot's channel): fw_cfg is read at
boot, and the kernel sizes its entries once when the driver loads; a restored guest
never boots. The port's Unix socket is in the trial's 0700 scratch directory; the
secrets cross it in memory and are written only to the guest's tmpfs.

The host writes every field at once and then reads lines until the guest says it is
configured: the guest's `ready` line (written when it starts waiting) may or may not
come first, since a restored guest wrote it before its snapshot was taken.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from host.image.contract import CONTROL_CONFIGURED, CONTROL_READY
from host.ssh import TrialKeys
from host.vm.errors import VmError

SEED_BYTES = 32


@dataclass(frozen=True)
class TrialFields:
    """What a guest is told after it boots or is restored (see the module docstring)."""

    host_key: bytes
    """The ephemeral host private key (OpenSSH format)."""
    authorized_keys: bytes
    clock_s: int
    seed: bytes
    data_disk: bool

    @classmethod
    def fresh(cls, keys: TrialKeys, *, data_disk: bool) -> TrialFields:
        """This trial's fields: its keys, the host's clock now, fresh host randomness."""
        return cls(
            host_key=keys.host_private_openssh(),
            authorized_keys=keys.authorized_keys_line(),
            clock_s=int(time.time()),
            seed=os.urandom(SEED_BYTES),
            data_disk=data_disk,
        )

    def message(self) -> bytes:
        """The lines the guest's init parses: `field value`, then `end`."""
        lines = [
            f"host_key {one_line(self.host_key)}",
            f"authorized_keys {one_line(self.authorized_keys)}",
            f"clock {self.clock_s}",
            f"seed {self.seed.hex()}",
            f"data {'yes' if self.data_disk else 'no'}",
            "end",
        ]
        return ("\n".join(lines) + "\n").encode("ascii")


def one_line(text: bytes) -> str:
    """Key text as one line for the guest's `printf %b`: each newline as backslash-n.
    OpenSSH's key formats are printable ASCII without a backslash; anything else is
    refused here rather than reinterpreted by the guest's printf."""
    decoded = text.decode("ascii")
    if "\\" in decoded or not all(c == "\n" or " " <= c <= "~" for c in decoded):
        raise ValueError("key text is printable ASCII without a backslash")
    return decoded.replace("\n", "\\n")


async def _lines_until(
    reader: asyncio.StreamReader, wanted: str, deadline_s: float, alive: Callable[[], bool]
) -> None:
    """Read the guest's lines until `wanted`. VmError: `qemu_exited` if QEMU died,
    `boot_timeout` when the deadline passes, `control_failed` when the port closes or
    the guest says anything but its two lines."""
    end = time.monotonic() + deadline_s
    while True:
        remaining = end - time.monotonic()
        if remaining <= 0:
            raise VmError("boot_timeout")
        try:
            line = await asyncio.wait_for(reader.readline(), min(remaining, 0.5))
        except TimeoutError:
            if not alive():
                raise VmError("qemu_exited") from None
            continue
        except (OSError, ValueError):  # ValueError: a line past the reader's limit
            raise VmError("qemu_exited" if not alive() else "control_failed") from None
        if not line:
            raise VmError("qemu_exited" if not alive() else "control_failed")
        text = line.decode("ascii", "replace").strip()
        if text not in (CONTROL_READY, wanted):
            raise VmError("control_failed")
        if text == wanted:
            return


async def _connect(
    socket: Path, deadline_s: float, alive: Callable[[], bool]
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect to QEMU's chardev socket, which exists shortly after QEMU starts."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            return await asyncio.open_unix_connection(str(socket))
        except (FileNotFoundError, ConnectionRefusedError):
            if not alive():
                raise VmError("qemu_exited") from None
            if time.monotonic() > end:
                raise VmError("boot_timeout") from None
            await asyncio.sleep(0.02)


async def configure(
    socket: Path,
    fields: TrialFields,
    deadline_s: float,
    alive: Callable[[], bool],
    resume: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Give a waiting guest its trial and wait until it has applied it. A restored guest
    is resumed (`resume`) only once its fields wait on the port: a guest that runs
    before the host is connected reads end of file and retries later, a tenth of a
    second lost under TCG."""
    reader, writer = await _connect(socket, deadline_s, alive)
    try:
        writer.write(fields.message())
        await writer.drain()
        if resume is not None:
            await resume()
        await _lines_until(reader, CONTROL_CONFIGURED, deadline_s, alive)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def wait_waiting(socket: Path, deadline_s: float, alive: Callable[[], bool]) -> None:
    """Wait until a guest booted for a snapshot waits for its trial (its `ready` line)."""
    reader, writer = await _connect(socket, deadline_s, alive)
    try:
        await _lines_until(reader, CONTROL_READY, deadline_s, alive)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
