"""Which cleanup receipts a trial's records say it must have.

Why: the verdict needs every owned resource released (docs/engineering.md §10), but a
receipt that simply lacks a resource's cleanup receipt says nothing false in the ones it
keeps: without this rule, dropping the `qemu_process` receipt, or keeping 1 of 10, would
audit valid with the same verdict. The stage records say which owners acquired their
resources, and receipts/ownership.py what each owner owns, so the receipts that must
exist follow from them:

- a guest (`vm.json`, `verifier_vm.json`) whose host key is recorded got that far in
  its start: everything its backend declares was taken (a QEMU, or a libvirt domain,
  was created); each is released with a receipt (`not_acquired` when creation failed
  after all);
- a worker that ended `ok` was started: everything its placement declares;
- a `trial/3` or later trial made its own scratch directory (its first act) and its writer
  releases it with a `trial_scratch` receipt. A `trial/2` receipt may predate that
  receipt, so nothing is required of it (receipts/records/trial.py). The resource has
  a name of its own so that it can never stand in for a guest's `scratch_dir`.

Counts, not just kinds: two guests mean two of each. A receipt for a resource kind
may appear more often than required (a release reports what it found); one may never
appear less often.
"""

from __future__ import annotations

from collections import Counter
from typing import get_args

from receipts.ownership import GUEST_OWNS, TRIAL_OWNS, WORKER_OWNS
from receipts.records.cleanup import Resource
from receipts.records.legacy import promises_scratch_receipt
from receipts.recordset import RecordSet


def required_cleanup(records: RecordSet) -> Counter[Resource]:
    """How many cleanup receipts of each resource kind the records require."""
    need: Counter[Resource] = Counter()
    if records.trial is not None and promises_scratch_receipt(records.trial):
        need.update(TRIAL_OWNS)
    for guest in (records.vm, records.verifier_vm):
        if guest is None or guest.host_key_sha256 is None:
            continue
        need.update(GUEST_OWNS[guest.backend])
    worker = records.worker
    if worker is not None and worker.category == "ok":
        need.update(WORKER_OWNS["host" if worker.placement == "host" else "guest"])
    return need


def missing_cleanup(records: RecordSet) -> tuple[Resource, ...]:
    """The resource kinds with fewer cleanup receipts than the records require, in the
    closed vocabulary's order."""
    have = Counter(receipt.resource for receipt in records.cleanup)
    need = required_cleanup(records)
    return tuple(kind for kind in get_args(Resource) if have[kind] < need[kind])
