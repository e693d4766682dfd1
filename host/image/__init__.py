"""The content-keyed guest image: kernel, initramfs, rootfs qcow2 base; data disks.

`ensure_image()` takes the recipe from the recorded apt resolution (offline) or
resolves it through a private apt, then adopts the cached image for its key
(re-hashed against the manifest) or builds and stages it.
`build_data_disk()` makes a read-only ext4 disk from a directory. Failures are
`ImageError` with a closed `ImageFailure` category.
"""

from host.image.build import (
    GuestImage,
    default_image_root,
    ensure_image,
    failure_record,
    sweep_stale,
)
from host.image.categories import ImageFailure
from host.image.disk import DataDisk, build_data_disk
from host.image.errors import ImageError
from host.image.recipe import Recipe
from host.image.resolution import resolve_recipe
from host.image.show import CacheEntry, list_entries

__all__ = [
    "CacheEntry",
    "DataDisk",
    "GuestImage",
    "ImageError",
    "ImageFailure",
    "Recipe",
    "build_data_disk",
    "default_image_root",
    "ensure_image",
    "failure_record",
    "list_entries",
    "resolve_recipe",
    "sweep_stale",
]
