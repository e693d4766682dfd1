"""Reading small procfs/config text files for the snapshot.

`None` means the file could not be read, for any reason: the caller reports the
facet `unread` (an instrument that broke is not evidence of absence). Only the
resolver facet, whose subject is the file itself, distinguishes a missing file.
"""

from pathlib import Path

MAX_BYTES = 8 << 20


def read_proc_bytes(path: Path) -> bytes | None:
    """The file's bytes, or None if it could not be read or exceeds the ceiling."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError:
        return None
    return None if len(data) > MAX_BYTES else data


def read_proc_lines(path: Path) -> list[str] | None:
    """The file as ASCII lines, or None if unreadable or not ASCII."""
    data = read_proc_bytes(path)
    if data is None:
        return None
    try:
        return data.decode("ascii").splitlines()
    except UnicodeDecodeError:
        return None
