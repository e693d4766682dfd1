"""A source shard hashed while it is read for conversion: one open file, one pass.

Why: hashing every shard against its pin, converting it (a second read), verifying the
GGUF against it (a third) and re-hashing it (a fourth) reads each shard four times. The
pin check needs a
SHA-256 of the whole file; the conversion reads the whole file. So each shard is opened
once, every read the converter makes (the header included) goes through that open file
descriptor, and the bytes read are hashed in file order as they arrive: the digest
compared with the pin is the digest of the very buffers that were converted, and
nothing is read twice.

The hash must run in file order. The converter reads tensors in name order, which is
file order for a shard the ``safetensors`` writer made (one dtype: name order). When it
is not (mixed dtypes), a read ahead of the hashed offset first reads and hashes the gap
(``hash_only_bytes`` counts them: read once to hash, once more to convert), and a
read behind it is served unhashed (``unhashed_bytes``): those converted bytes are not
the hashed buffers, so :attr:`HashedSource.converted_is_hashed` is False and the caller
re-verifies the shard after conversion, as every prepare did before.

Hashing runs on one thread per shard (hashlib releases the GIL), so it overlaps the
reads, the conversion and the output's own hashing. A buffer handed to
:meth:`HashedSource.read_into` must not change until the returned future is done.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from host import cancel
from host.model.categories import HeaderError

GAP_CHUNK = 16 << 20
DROP_READ = True  # drop each range from the page cache once read (see _drop)


def _pread_into(fd: int, view: memoryview, offset: int) -> None:
    """Fill *view* from *offset*; a file shorter than that is ``offsets_out_of_range``."""
    got = 0
    while got < len(view):
        n = os.preadv(fd, [view[got:]], offset + got)
        if not n:
            raise HeaderError("offsets_out_of_range")
        got += n


class HashedSource:
    """One shard's open file: every read through it is hashed, in file order."""

    def __init__(self, name: str, path: Path) -> None:
        self.name = name  # the pinned (snapshot-relative) name, for refusals
        self.fd = os.open(path, os.O_RDONLY)
        try:
            self.size = os.fstat(self.fd).st_size
        except OSError:
            os.close(self.fd)
            raise
        self.hashed = 0  # bytes [0, hashed) are in the digest
        self.hash_only_bytes = 0
        self.unhashed_bytes = 0
        self._digest = hashlib.sha256()
        self._hasher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="source-hash")

    @property
    def converted_is_hashed(self) -> bool:
        """Every byte handed to the converter was hashed from the buffer it read."""
        return self.unhashed_bytes == 0

    def _submit(self, view: memoryview) -> Future[None]:
        future = self._hasher.submit(self._digest.update, view)
        self.hashed += len(view)
        return future

    def _hash_gap(self, until: int) -> None:
        while self.hashed < until:
            cancel.check()
            data = bytearray(min(GAP_CHUNK, until - self.hashed))
            _pread_into(self.fd, memoryview(data), self.hashed)
            self._drop(self.hashed, len(data))
            self.hash_only_bytes += len(data)
            self._submit(memoryview(data)).result()

    def read_into(self, view: memoryview, offset: int) -> Future[None] | None:
        """Fill *view* from *offset*; the future is done once it is hashed (None: not
        hashed, it lies behind the hashed offset)."""
        cancel.check()  # every source read passes here: a cancelled trial stops
        if offset > self.hashed:
            self._hash_gap(offset)
        _pread_into(self.fd, view, offset)
        self._drop(offset, len(view))
        if offset == self.hashed:
            return self._submit(view)
        self.unhashed_bytes += len(view)
        return None

    def _drop(self, offset: int, nbytes: int) -> None:
        """Drop bytes just read from the page cache: they are in our buffer now, the
        pass never reads them again, and 8 GB of cached source pushed the machine into
        reclaim, which cost more CPU than the conversion (docs/model-conversion.md)."""
        if DROP_READ:
            os.posix_fadvise(self.fd, offset, nbytes, os.POSIX_FADV_DONTNEED)

    def read(self, offset: int, nbytes: int) -> bytes:
        """*nbytes* from *offset* (fewer only past the end), hashed like any read."""
        nbytes = max(0, min(nbytes, self.size - offset))
        data = bytearray(nbytes)
        future = self.read_into(memoryview(data), offset)
        if future is not None:
            future.result()
        return bytes(data)

    def finish(self) -> tuple[str, int]:
        """Hash what the conversion did not read; (SHA-256, size) of the whole file."""
        self._hash_gap(self.size)
        self._hasher.submit(_nothing).result()
        return self._digest.hexdigest(), self.hashed

    def close(self) -> None:
        """Stop the hashing thread and close the file."""
        try:
            self._hasher.shutdown(wait=True)
        finally:
            os.close(self.fd)


def _nothing() -> None:
    """A marker task: when it has run, every earlier hash update has too."""
