"""Categories that are the host's reading of a guest command, never the guest's own word.

The agent and the verifier run in the guest and write their own record file. When that
file cannot be trusted or was never written, the host still names what it saw, with one
of these, in a stand-in record whose counts are all 0 because nothing was read (not
because nothing happened). A guest record that claims one of them is refused: only the
host reads a command's end this way.
"""

from __future__ import annotations

from typing import Literal, get_args

GuestCommandFailure = Literal[
    "gate_refused", "killed_by_signal", "deadline_exceeded", "exited_nonzero"
]
"""How a gated guest command (`guest.agent`, `guest.verify`) ended without a record:
- `gate_refused`: the runtime gate's line on stdout named a refusal, so the module never ran;
- `killed_by_signal`: SSH reported the command ended by a signal (which one is not kept);
- `deadline_exceeded`: the host's deadline for the command passed before it exited (the
  stage's own budget plus a grace: the command did not stop within its budget);
- `exited_nonzero`: it exited with a non-zero status, and the gate did not refuse."""

HostReading = Literal["records_invalid", GuestCommandFailure]
"""Every host reading: the record file was refused (`records_invalid`), or the command
that should have written it ended without success."""

HOST_READINGS: frozenset[str] = frozenset(("records_invalid", *get_args(GuestCommandFailure)))

VerifierHostReading = Literal["workspace_not_carried", "verifier_vm_failed"]
"""How verification ended before the verifier ran, as the host saw it:
- `workspace_not_carried`: the final workspace could not be brought out of the agent's
  guest as a safe archive of regular files (harness/trial/carry.py), or into the
  verification guest (its unpacking failed), so nothing was verified;
- `verifier_vm_failed`: the pristine verification guest did not boot, or was lost while
  the hidden tests ran (its own record, `verifier_vm.json`, names how)."""
