"""The one exception type of the VM stage, carrying a closed category."""

from host.vm.categories import VmFailure


class VmError(Exception):
    """Starting or reaching a VM failed with a closed category."""

    def __init__(self, category: VmFailure) -> None:
        self.category: VmFailure = category
        super().__init__(category)
