"""The one exception type of the image stage, carrying a closed category."""

import errno

from host.image.categories import BuildStep, ImageFailure


class ImageError(Exception):
    """Building, adopting or verifying a guest image failed with a closed category."""

    def __init__(self, category: ImageFailure, step: BuildStep) -> None:
        self.category: ImageFailure = category
        self.step: BuildStep = step
        super().__init__(f"{category} ({step})")


def category_for_oserror(exc: OSError, default: ImageFailure) -> ImageFailure:
    """`disk_full` for ENOSPC/EDQUOT (a full disk is its own category), else `default`."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "disk_full"
    return default
