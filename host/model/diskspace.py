"""Disk space for a conversion: checked before it starts, and a full disk named.

Why: an 8 GB prepare that runs out of space halfway wastes minutes and, before this,
ended in a traceback (``OSError: [Errno 28]``). So the planned GGUF's size (an upper
bound, known from the plan before one tensor byte is read) is compared with the free
space where it will be staged, as the trial's preflight compares free disk with the
profile's floor (``shutil.disk_usage``); and a write that still fails for want of space
(another process filled the disk meanwhile, a quota, a file-size limit) is turned into
the closed refusal ``disk_full``. The staged partial is removed either way
(docs/engineering.md §5).
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from host.model.categories import ConvertError

# ENOSPC: no space; EDQUOT: quota; EFBIG: over RLIMIT_FSIZE or the filesystem's limit.
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
# Kept free beyond the planned bytes: the cache entry record, directory blocks, and a
# margin so the conversion does not leave the filesystem at zero for everyone else.
RESERVE_BYTES = 64 << 20


def is_disk_full(exc: BaseException) -> bool:
    """True for an OSError that means "no room to write"."""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


def require_free_space(directory: Path, needed: int) -> int:
    """Refuse (``insufficient_disk_space``) unless *needed* + the reserve fits; return free.

    *directory* must exist (the staging directory is made beside it, on the same
    filesystem).
    """
    free = shutil.disk_usage(directory).free
    if free < needed + RESERVE_BYTES:
        raise ConvertError("insufficient_disk_space")
    return free
