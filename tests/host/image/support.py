"""One guest image per test process, shared by tests/host/image and tests/host/vm.

The first call adopts the image for the recorded apt resolution in the default cache
(offline), or resolves, builds and records it; later calls in the same process return
the same objects, so the integration run builds at most once and then adopts from
cache across sessions, as a trial does.
"""

from __future__ import annotations

import functools
from pathlib import Path

from host.image import GuestImage, Recipe, default_image_root, ensure_image
from host.image.build import recorded_recipe


@functools.cache
def session_image() -> GuestImage:
    return ensure_image(default_image_root())


@functools.cache
def session_recipe() -> Recipe:
    session_image()
    recipe = recorded_recipe(default_image_root())
    assert recipe is not None  # ensure_image records what it resolved
    return recipe


def image_root() -> Path:
    return default_image_root()
