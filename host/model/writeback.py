"""Start writing dirty pages to disk early, so the final ``fsync`` has little left.

Why: the converted GGUF must be durable before it is renamed into place
(docs/engineering.md §5), and for a 256 MB file the ``fsync`` alone took about as long
as copying the bytes (0.45 s here), because the disk only started writing when it was
called. Linux's ``sync_file_range(SYNC_FILE_RANGE_WRITE)`` starts writeback of a range
without waiting for it, so the disk writes while we go on reading, hashing and writing
the next chunks.

It is a hint, never the durability step: it does not flush metadata or the disk's
cache, and its result is ignored. The ``fsync`` before the rename stays, and reports
any writeback error (the kernel records it against the file). Where the call is not
available (not Linux, no libc symbol) :func:`start_writeback` does nothing.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable

SYNC_FILE_RANGE_WAIT_BEFORE = 1  # <linux/fs.h>: wait for writeback already under way
SYNC_FILE_RANGE_WRITE = 2  # <linux/fs.h>: start writeback of dirty pages, do not wait
SYNC_FILE_RANGE_WAIT_AFTER = 4  # <linux/fs.h>: wait for the writeback just started


def _load() -> Callable[[int, int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_SYNC_FILE_RANGE = _load()


def start_writeback(fd: int, offset: int, nbytes: int) -> bool:
    """Ask the kernel to start writing ``[offset, offset + nbytes)`` of *fd* to disk.

    True when the kernel accepted the request; False when it refused or the call is
    unavailable. Either way the caller must still ``fsync`` before relying on the data.
    """
    if _SYNC_FILE_RANGE is None or nbytes <= 0:
        return False
    return _SYNC_FILE_RANGE(fd, offset, nbytes, SYNC_FILE_RANGE_WRITE) == 0


def drop_written(fd: int, offset: int, nbytes: int) -> bool:
    """Wait until ``[offset, offset + nbytes)`` of *fd* is written, then drop it from
    the page cache.

    Why: a prepare writes 8 GB it will not read again in this process. Left in the page
    cache, those pages push the machine into reclaim while the pass runs, and reclaim
    was most of the pass's CPU time (system time 34-38 s of a prepare, 16 s with the
    pages dropped as they are done with; docs/model-conversion.md). Call it on a range
    handed to the disk a step earlier (:func:`start_writeback`), so the wait is short.
    A hint like :func:`start_writeback`: the ``fsync`` before the rename stays the
    durability step. True when both calls were made.
    """
    if _SYNC_FILE_RANGE is None or nbytes <= 0:
        return False
    flags = SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER
    if _SYNC_FILE_RANGE(fd, offset, nbytes, flags) != 0:
        return False
    os.posix_fadvise(fd, offset, nbytes, os.POSIX_FADV_DONTNEED)
    return True
