"""A guest snapshot's key: the one definition the harness names entries by and the audit
recomputes from a VM record.

The key is sha256 over the canonical JSON of the snapshot's shape (the image key and
everything that shapes the guest's devices and memory) with the format name: a record
that claims a snapshot of one image while its image record names another, or whose key
is not its own shape's, is caught by recomputing it (receipts/audit/consistency.py).
"""

from __future__ import annotations

import hashlib
import json
from typing import Final

SNAPSHOT_FORMAT: Final = "harness.snapshot/1"


def snapshot_key(
    *, image_key: str, accelerator: str, memory_mib: int, vcpus: int, tb_size_mib: int, qemu: str
) -> str:
    payload = {
        "format": SNAPSHOT_FORMAT,
        "image_key": image_key,
        "accelerator": accelerator,
        "memory_mib": memory_mib,
        "vcpus": vcpus,
        "tb_size_mib": tb_size_mib,
        "qemu": qemu,
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
