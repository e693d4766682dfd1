"""Which record versions each harness version writes: a receipt's format, by its version.

The trial record names the harness version that wrote it, and each record names its own
schema version. Read apart, a receipt of a newer format can be relabelled as an older
one the audit still reads, record by record, dropping what the newer one requires (the
`trial_scratch` cleanup receipt that `trial/3` promised). Read together, they cannot:
a harness version in `FORMATS` wrote exactly the versions its row lists, so a receipt
that claims it and carries any other version of any record is refused
(`version_mismatch`, rule `format`).

0.1.0 is `LEGACY`: every receipt before this table claimed it while its records moved
version by version from commit to commit, so no row can say what it wrote. Those receipts
keep the audit's pairwise rules (`versions`) and nothing more; a reviewer who wants no
part of that passes `--require-current`, which refuses any record that is not of the
version this harness writes. A signed receipt names its harness version in the signed
predicate, so relabelling it as 0.1.0 breaks the signature.

Rule for developers: a row never changes once a receipt may carry it. A record version
bump is a harness version bump (pyproject.toml) and a new row; tests/receipts/
test_formats.py fails while the current version's row is not what the harness writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

LEGACY: Final = frozenset({"0.1.0"})
"""Harness versions that wrote receipts before formats were pinned per version."""

FORMATS: Final[Mapping[str, Mapping[str, str]]] = {
    "0.2.0": {
        "trial": "harness.receipt.trial/4",
        "preflight": "harness.receipt.preflight/1",
        "source": "harness.receipt.source/1",
        "dispatch": "harness.receipt.dispatch/2",
        "model": "harness.receipt.model/1",
        "image": "harness.receipt.image/1",
        "vm": "harness.receipt.vm/2",
        "verifier_vm": "harness.receipt.verifier_vm/3",
        "gate": "harness.receipt.gate/1",
        "worker": "harness.receipt.worker/1",
        "agent": "harness.receipt.agent/3",
        "verification": "harness.receipt.verification/4",
        "hoststate": "harness.receipt.hoststate/3",
        "memory": "harness.receipt.memory/2",
        "worker_requests": "harness.receipt.worker_request/2",
        "agent_turns": "harness.receipt.agent_turn/1",
        "tool_calls": "harness.receipt.tool_call/4",
        "cleanup": "harness.receipt.cleanup/1",
    },
    "0.3.0": {
        "trial": "harness.receipt.trial/4",
        "preflight": "harness.receipt.preflight/1",
        "source": "harness.receipt.source/1",
        "dispatch": "harness.receipt.dispatch/2",
        "model": "harness.receipt.model/2",
        "image": "harness.receipt.image/1",
        "vm": "harness.receipt.vm/3",
        "verifier_vm": "harness.receipt.verifier_vm/4",
        "gate": "harness.receipt.gate/1",
        "worker": "harness.receipt.worker/2",
        "agent": "harness.receipt.agent/3",
        "verification": "harness.receipt.verification/4",
        "hoststate": "harness.receipt.hoststate/3",
        "memory": "harness.receipt.memory/2",
        "worker_requests": "harness.receipt.worker_request/3",
        "agent_turns": "harness.receipt.agent_turn/1",
        "tool_calls": "harness.receipt.tool_call/4",
        "cleanup": "harness.receipt.cleanup/1",
    },
}
"""Harness version → record kind → the one schema id that version writes for it."""
