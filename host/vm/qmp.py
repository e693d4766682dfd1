"""Asking QEMU to quit through QMP (the `qemu.qmp` package).

Why QMP and not a signal: `quit` is QEMU's own orderly exit (it closes its disks and
sockets itself); a signal is the fallback when QMP does not answer in time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from qemu.qmp import ExecInterruptedError, QMPClient, QMPError

from host.vm.errors import VmError

log = logging.getLogger(__name__)


async def qmp_quit(socket_path: Path, timeout_s: float) -> bool:
    """Send `quit`; True if QEMU accepted it (or hung up while executing it)."""
    client = QMPClient("harness")
    try:
        async with asyncio.timeout(timeout_s):
            await client.connect(str(socket_path))
            try:
                await client.execute("quit")
            except ExecInterruptedError:
                # QEMU may close the socket before the reply arrives: that is a quit.
                return True
            return True
    except (TimeoutError, QMPError, OSError, EOFError) as exc:
        log.info("qmp quit not delivered: %s", type(exc).__name__)
        return False
    finally:
        # disconnect() re-raises what ended the reader (EOFError once QEMU has quit).
        with contextlib.suppress(QMPError, OSError, TimeoutError, EOFError):
            await asyncio.wait_for(client.disconnect(), 2.0)


async def qmp_execute(
    socket_path: Path, command: str, arguments: dict[str, object], timeout_s: float
) -> object:
    """Run one QMP command and return its answer; VmError if QEMU does not give one."""
    client = QMPClient("harness")
    try:
        async with asyncio.timeout(timeout_s):
            await client.connect(str(socket_path))
            return await client.execute(command, arguments or None)
    except (TimeoutError, QMPError, OSError, EOFError) as exc:
        log.info("qmp %s failed: %s", command, type(exc).__name__)
        raise VmError("qemu_start_failed") from None
    finally:
        with contextlib.suppress(QMPError, OSError, TimeoutError, EOFError):
            await asyncio.wait_for(client.disconnect(), 2.0)
