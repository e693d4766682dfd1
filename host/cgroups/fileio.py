"""Plain file I/O on cgroup interface files, mapped to closed categories.

Interface files are written with one `write(2)` on an unbuffered descriptor: a
buffered `open().write()` reports the kernel's EINVAL only at close, and a close in a
finaliser swallows it. Every budget write is read back (docs/engineering.md §11): the kernel
can accept a write and store something else (v1 rounds limits down to pages).
"""

import errno
import os
from pathlib import Path

from host.cgroups.categories import CgroupFailure, Controller
from host.cgroups.errors import CgroupError

_MAX_READ = 1 << 20


def read_text(path: Path, *, controller: Controller | None = None) -> str:
    """Read an interface file; `interface_file_missing` if it does not exist."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise CgroupError(
            "interface_file_missing", controller=controller, interface_file=path.name
        ) from None
    except OSError:
        raise CgroupError("read_failed", controller=controller, interface_file=path.name) from None
    try:
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > _MAX_READ:
                raise CgroupError("parse_failed", controller=controller, interface_file=path.name)
    except OSError:
        raise CgroupError("read_failed", controller=controller, interface_file=path.name) from None
    finally:
        os.close(fd)
    try:
        return b"".join(chunks).decode("ascii")
    except UnicodeDecodeError:
        raise CgroupError("parse_failed", controller=controller, interface_file=path.name) from None


def _write_category(err: OSError) -> CgroupFailure:
    if err.errno == errno.ENOENT:
        return "interface_file_missing"
    if err.errno in (errno.EACCES, errno.EPERM):
        return "permission_denied"
    if err.errno == errno.ESRCH:
        return "process_not_found"
    return "write_rejected"


def write_text(path: Path, text: str, *, controller: Controller | None = None) -> None:
    """Write `text` to an interface file in one system call."""
    data = text.encode("ascii")
    try:
        # O_TRUNC as a shell's `>` does: cgroupfs ignores it, a plain file needs it.
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    except OSError as err:
        raise CgroupError(
            _write_category(err), controller=controller, interface_file=path.name
        ) from None
    try:
        written = os.write(fd, data)
    except OSError as err:
        raise CgroupError(
            _write_category(err), controller=controller, interface_file=path.name
        ) from None
    finally:
        os.close(fd)
    if written != len(data):
        raise CgroupError("write_rejected", controller=controller, interface_file=path.name)


def write_verified(path: Path, text: str, *, controller: Controller | None = None) -> None:
    """Write `text`, read the file back, and require it to read exactly `text`.

    A value that did not take (rounded, clamped, silently ignored) is
    `readback_mismatch`; a write the kernel refused is `write_rejected`.
    """
    write_text(path, text, controller=controller)
    if read_text(path, controller=controller).strip() != text:
        raise CgroupError("readback_mismatch", controller=controller, interface_file=path.name)


def parse_int(text: str, *, controller: Controller | None = None, name: str = "") -> int:
    """Parse one decimal integer (surrounding whitespace allowed)."""
    stripped = text.strip()
    if not stripped.lstrip("-").isdigit() or not stripped.isascii():
        raise CgroupError("parse_failed", controller=controller, interface_file=name or None)
    return int(stripped)


def parse_keyed(
    text: str, *, controller: Controller | None = None, name: str = ""
) -> dict[str, int]:
    """Parse `key value` lines (memory.stat, memory.events, memory.oom_control).

    A duplicate key or a line that is not `key integer` is `parse_failed`: a reading
    that could mean two things is not a reading.
    """
    out: dict[str, int] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or parts[0] in out:
            raise CgroupError("parse_failed", controller=controller, interface_file=name or None)
        out[parts[0]] = parse_int(parts[1], controller=controller, name=name)
    return out


def read_pids(path: Path, *, controller: Controller | None = None) -> tuple[int, ...]:
    """Read a `cgroup.procs` file as a sorted tuple of process ids."""
    text = read_text(path, controller=controller)
    pids = sorted({parse_int(tok, controller=controller, name=path.name) for tok in text.split()})
    return tuple(pids)
