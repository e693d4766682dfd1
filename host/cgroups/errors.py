"""The one exception type of the cgroup mechanism.

It carries a closed category and, for logs only, the controller and the interface
file name (never a host path), so callers can record the category and nothing else.
"""

from host.cgroups.categories import CgroupFailure, Controller


class CgroupError(Exception):
    """A cgroup operation failed with a closed category."""

    def __init__(
        self,
        category: CgroupFailure,
        *,
        controller: Controller | None = None,
        interface_file: str | None = None,
    ) -> None:
        self.category: CgroupFailure = category
        self.controller: Controller | None = controller
        self.interface_file: str | None = interface_file
        where = "/".join(x for x in (controller, interface_file) if x)
        super().__init__(f"{category} ({where})" if where else category)
