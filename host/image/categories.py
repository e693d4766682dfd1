"""Closed failure categories of the image stage.

They are exactly the non-`ok` values of `receipts.records.image.ImageCategory`, so a
failure maps onto the image record without translation (a unit test keeps the two in
step). Anything more detailed than a category stays in logs, never in a record.
"""

from typing import Literal

ImageFailure = Literal[
    "fetch_failed",
    "build_failed",
    "kernel_unavailable",
    "rootfs_failed",
    "cache_corrupt",
    "disk_full",
]

BuildStep = Literal[
    "resolve",
    "kernel",
    "initramfs",
    "rootfs",
    "disk",
    "manifest",
    "adopt",
    "data_disk",
]
"""Where a build failed; for logs only (the record carries the category)."""
