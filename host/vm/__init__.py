"""VM backends: the `VmBackend`/`Vm` protocols and the QEMU implementation.

`choose_accelerator()` picks KVM only when a probe guest boots under it.
`QemuBackend().create(spec)` gives a `Vm`: `start()`, `wait_ready()`, `exec()`,
`put()`/`get()`, `stop()` and `cleanup()` (one `CleanupResult` per owned resource).
"""

from host.release import CleanupResult
from host.vm.accel import AccelChoice, choose_accelerator, kvm_device_state
from host.vm.backend import BootImage, Vm, VmBackend, VmFacts, VmSpec
from host.vm.categories import Accelerator, AccelRequest, StopMethod, VmFailure
from host.vm.errors import VmError
from host.vm.qemu import QemuBackend, QemuVm

__all__ = [
    "AccelChoice",
    "AccelRequest",
    "Accelerator",
    "BootImage",
    "CleanupResult",
    "QemuBackend",
    "QemuVm",
    "StopMethod",
    "Vm",
    "VmBackend",
    "VmError",
    "VmFacts",
    "VmFailure",
    "VmSpec",
    "choose_accelerator",
    "kvm_device_state",
]
