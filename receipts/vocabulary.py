"""The closed words a trial is described in, each defined once.

Why here: the records state these words, the audit checks them, and the harness and its
command line choose among them. Defining them beside the records means a new word is a
schema change that the audit, the CLI's choices and the pipeline all see at once, and
no copy can drift (a copy once let the audit accept a channel nothing produced).
"""

from __future__ import annotations

from typing import Literal

PlacementRequest = Literal["auto", "guest", "host"]
"""Where the worker is asked to run (profile `worker.placement`, `--placement`); `auto`
is resolved by the accelerator the VM obtained (harness/trial/placement.py)."""

WorkerPlacement = Literal["guest", "host"]
"""Where a worker ran once the request was resolved."""

Placement = Literal["guest", "host", "none"]
"""Where the trial's worker ran; `none` for scripted trials, which have no worker."""

Channel = Literal["guest_loopback", "guestfwd_unix", "none"]
"""How the agent reached the worker's API: the guest's loopback (worker in the guest),
QEMU's guestfwd to a host Unix socket (worker on the host), or no worker at all."""

_CHANNELS: dict[Placement, Channel] = {
    "guest": "guest_loopback",
    "host": "guestfwd_unix",
    "none": "none",
}


def channel_for(placement: Placement) -> Channel:
    """The one channel each placement has: the harness states it, the audit requires it."""
    return _CHANNELS[placement]


Backend = Literal["qemu", "libvirt"]
"""How the guests are run: QEMU started by the harness, or a libvirt domain
(`--backend`); the trial and each guest record state it, and the audit compares them."""

AccelRequest = Literal["auto", "kvm", "tcg"]
"""The accelerator asked for (`--accel`); `auto` takes KVM only when a probe guest boots."""

Accelerator = Literal["kvm", "tcg"]
"""The accelerator a guest ran under."""
