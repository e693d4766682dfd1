"""Where the worker runs: the profile's (or the command line's) request, resolved.

`auto` puts the worker in the guest only under KVM: under TCG every guest instruction
is emulated and the model would run several times slower than beside the VM on the
host, so there the worker runs on the host behind one guestfwd channel (the design's
"Worker placement"). The choice follows the accelerator actually obtained, not the
one asked for, so a KVM request that fell back to TCG also falls back to the host.
"""

from __future__ import annotations

from harness.trial.guestworker import GuestWorker
from harness.trial.hostworker import HostWorker
from harness.trial.worker import Worker
from host.vm.categories import Accelerator
from receipts.vocabulary import PlacementRequest, WorkerPlacement


def resolve_placement(request: PlacementRequest, accelerator: Accelerator) -> WorkerPlacement:
    if request == "auto":
        return "guest" if accelerator == "kvm" else "host"
    return request


def worker_for(placement: WorkerPlacement) -> Worker:
    """The worker strategy of a resolved placement (harness/trial/worker.py)."""
    return GuestWorker() if placement == "guest" else HostWorker()
