"""What each part of a trial owns on the host: the one declaration of its resources.

A trial owns its scratch directory; each guest owns what one guest of its VM backend
takes; the worker owns what its placement takes. Both sides read this table. The
trial registers a release only for a resource its owner declares here
(harness/trial/owned.py refuses any other registration), and the audit requires one
cleanup receipt for each resource a recorded owner declares (receipts/cleanupset.py).
A resource added in one place and not the other is then a failing test, not a receipt
that audits valid with a resource nobody released.

Each entry lists the cleanup receipts the owner's releases give, not only what it
registers: one guest registers its cgroup, its data disk and its VM, and the VM's
release gives the receipts of its process, port, overlay, keys and scratch directory
(and, under libvirt, its domain).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from receipts.records.cleanup import Resource
from receipts.vocabulary import Backend, WorkerPlacement

TRIAL_OWNS: Final[tuple[Resource, ...]] = ("trial_scratch",)
"""The trial itself: its scratch directory on the host, made first and released last."""

_GUEST: Final[tuple[Resource, ...]] = (
    "cgroup",
    "data_disk",
    "qemu_process",
    "forwarded_port",
    "overlay_disk",
    "ssh_keys",
    "scratch_dir",
)
GUEST_OWNS: Final[Mapping[Backend, tuple[Resource, ...]]] = {
    "qemu": _GUEST,
    "libvirt": (*_GUEST, "libvirt_domain"),
}
"""One guest (the agent's or the verification guest), by the backend that runs it."""

WORKER_OWNS: Final[Mapping[WorkerPlacement, tuple[Resource, ...]]] = {
    "host": ("cgroup", "worker_process", "worker_socket"),
    "guest": ("worker_process",),
}
"""The inference worker, by where it runs: on the host it has its own cgroup and the
socket the guest's channel reaches; in the guest, its process only (its cgroup and
files go with the guest)."""
