"""One guest image per test process, shared by tests/host/image and tests/host/vm.

The first call resolves the recipe and builds (or adopts) the image in the default
cache; later calls in the same process return the same objects, so the integration
run builds at most once and then adopts from cache across sessions.
"""

from __future__ import annotations

import functools
from pathlib import Path

from host.image import GuestImage, Recipe, default_image_root, ensure_image, resolve_recipe
from host.image.apt import PrivateApt, bookworm_sources


@functools.cache
def session_recipe() -> Recipe:
    root = default_image_root()
    root.mkdir(parents=True, exist_ok=True)
    return resolve_recipe(PrivateApt(root / ".apt", bookworm_sources()))


@functools.cache
def session_image() -> GuestImage:
    return ensure_image(default_image_root(), session_recipe())


def image_root() -> Path:
    return default_image_root()
