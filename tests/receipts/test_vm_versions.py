"""How a guest's QEMU ended (`QemuEnd`), and the guest records' versions around it.

The harness writes `vm/3` and `verifier_vm/4`, which say how QEMU ended (`qemu_end`);
the audit still reads `vm/2` and `verifier_vm/3`, which did not, as themselves (never
re-interpreted as the new version), and a body under the other version's id is a
schema finding.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from receipts.audit import audit_and_read, audit_bytes
from receipts.bundle import bundle_bytes
from receipts.canonical import canonical
from receipts.records import VerifierVmRecord, VmRecord
from receipts.records.legacy import VerifierVmRecordV3, VmRecordV2, qemu_end
from receipts.records.vm import QemuEnd
from tests.receipts import tamper
from tests.receipts.builders import accepted_model_trial, replace, with_changes

# ---- the Part ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exit_code", "signal"),
    [(None, None), (0, 9), (256, None), (-1, None), (None, 0), (None, 65), (None, -9)],
)
def test_an_end_is_exactly_one_exit_status_or_one_signal_in_range(
    exit_code: int | None, signal: int | None
) -> None:
    """Neither, both, or either out of range is refused. Mutation control: without
    `_one_end`, (None, None) and (0, 9) validate; without the bounds, the others do."""
    with pytest.raises(ValidationError):
        QemuEnd(stop="sigkill", exit_code=exit_code, signal=signal)


@pytest.mark.parametrize(
    ("exit_code", "signal"), [(0, None), (1, None), (255, None), (None, 1), (None, 9), (None, 64)]
)
def test_an_end_in_range_is_accepted(exit_code: int | None, signal: int | None) -> None:
    end = QemuEnd(stop="already_exited", exit_code=exit_code, signal=signal)
    assert (end.exit_code, end.signal) == (exit_code, signal)


def test_a_popen_returncode_is_an_exit_status_or_the_signal_that_ended_it() -> None:
    """Popen's negative returncode is the signal. Mutation control: `< 0` as `<= 0`
    reads a clean exit as signal 0 (refused); dropping the sign gives signal -9."""
    assert QemuEnd.of_returncode("sigkill", -9) == QemuEnd(stop="sigkill", exit_code=None, signal=9)
    assert QemuEnd.of_returncode("qmp_quit", 0) == QemuEnd(
        stop="qmp_quit", exit_code=0, signal=None
    )
    assert QemuEnd.of_returncode("already_exited", 3).exit_code == 3


def test_the_stop_is_closed() -> None:
    with pytest.raises(ValidationError):
        QemuEnd(stop="libvirt_destroy", exit_code=0, signal=None)


# ---- the records ---------------------------------------------------------------------


def _vm() -> VmRecord:
    vm = accepted_model_trial().vm
    assert isinstance(vm, VmRecord)
    return vm


def test_the_current_records_say_how_qemu_ended_and_must_say_it() -> None:
    """`qemu_end` is required (None is said, never left out)."""
    body = _vm().to_json()
    assert body["schema"] == "harness.receipt.vm/3"
    assert body["qemu_end"] == {"exit_code": 0, "signal": None, "stop": "qmp_quit"}
    del body["qemu_end"]
    with pytest.raises(ValidationError):
        VmRecord.model_validate(body)
    verifier = VerifierVmRecord.of(_vm(), "after_agent")
    assert verifier.schema_ == "harness.receipt.verifier_vm/4"
    assert verifier.qemu_end == _vm().qemu_end


def test_a_record_is_completed_with_its_end_and_validated_again() -> None:
    """`ended` sets `qemu_end` and nothing else, on both kinds."""
    unended = _vm().ended(None)
    assert unended.qemu_end is None
    killed = QemuEnd(stop="sigkill", exit_code=None, signal=9)
    ended = unended.ended(killed)
    assert isinstance(ended, VmRecord) and ended.qemu_end == killed
    assert ended.model_dump(exclude={"qemu_end"}) == _vm().model_dump(exclude={"qemu_end"})
    verifier = VerifierVmRecord.of(unended, "beside_agent").ended(killed)
    assert isinstance(verifier, VerifierVmRecord)
    assert (verifier.qemu_end, verifier.prepared) == (killed, "beside_agent")


def _old(record: VmRecord, schema: str, **extra: Any) -> dict[str, Any]:
    body = record.to_json()
    del body["qemu_end"]
    return {**body, "schema": schema, **extra}


def test_the_previous_versions_have_exactly_their_old_fields() -> None:
    assert set(VmRecordV2.model_fields) == set(VmRecord.model_fields) - {"qemu_end"}
    assert set(VerifierVmRecordV3.model_fields) == set(VerifierVmRecord.model_fields) - {"qemu_end"}
    v2 = VmRecordV2.model_validate(_old(_vm(), "harness.receipt.vm/2"))
    assert qemu_end(v2) is None
    with pytest.raises(ValidationError):  # closed: the new field is not one of vm/2's
        VmRecordV2.model_validate({**_old(_vm(), "harness.receipt.vm/2"), "qemu_end": None})


def _with(entries: dict[str, bytes], name: str, body: dict[str, Any]) -> bytes:
    entries[name] = canonical(body)
    return tamper.forge(entries)


def test_a_receipt_of_the_previous_guest_versions_is_read_as_those_versions() -> None:
    entries = tamper.legacy_entries()
    entries["vm.json"] = canonical(_old(_vm(), "harness.receipt.vm/2"))
    verifier = json.loads(entries["verifier_vm.json"])
    del verifier["qemu_end"]
    verifier["schema"] = "harness.receipt.verifier_vm/3"
    audit, read = audit_and_read(_with(entries, "verifier_vm.json", verifier))
    assert audit.valid, audit.findings
    assert read is not None
    assert isinstance(read.vm, VmRecordV2) and isinstance(read.verifier_vm, VerifierVmRecordV3)


def test_bodies_under_the_other_version_id_are_findings() -> None:
    """A vm/3 body labelled vm/2 and a vm/2 body labelled vm/3 are schema findings."""
    current = _vm().to_json()
    for body in (
        {**current, "schema": "harness.receipt.vm/2"},
        _old(_vm(), "harness.receipt.vm/3"),
    ):
        audit, _read = audit_and_read(_with(tamper.legacy_entries(), "vm.json", body))
        assert not audit.valid
        assert {f.phase for f in audit.findings} == {"schema"}


# ---- the audit rule ------------------------------------------------------------------


def _reference_findings(data: bytes) -> set[str | None]:
    return {
        f.entry
        for f in audit_bytes(data).findings
        if f.rule == "qemu_end" and f.category == "reference_mismatch"
    }


def test_an_end_needs_a_qemu_that_was_reaped() -> None:
    """One `process_reaped` receipt for two guests that both state an end: the second
    one's end has no reaping behind it. Mutation control: without `_qemu_end` in RULES,
    or with `reaped == 0` as `reaped < 0`, nothing is found."""
    records = accepted_model_trial()
    last = [c for c in records.cleanup if c.resource == "qemu_process"][-1]
    cleanup = tuple(
        replace(c, status="failed", evidence="still_present") if c is last else c
        for c in records.cleanup
    )
    forged = bundle_bytes(with_changes(records, cleanup=cleanup))
    assert _reference_findings(forged) == {"verifier_vm.json"}


def test_an_unreaped_qemu_whose_record_says_nothing_is_no_finding() -> None:
    """The truthful form: a QEMU still present after the kill deadline has no end."""
    records = accepted_model_trial()
    assert records.verifier_vm is not None
    last = [c for c in records.cleanup if c.resource == "qemu_process"][-1]
    cleanup = tuple(
        replace(c, status="failed", evidence="still_present") if c is last else c
        for c in records.cleanup
    )
    truthful = with_changes(
        records, cleanup=cleanup, verifier_vm=replace(records.verifier_vm, qemu_end=None)
    )
    assert _reference_findings(bundle_bytes(truthful)) == set()


def test_a_libvirt_guest_states_no_end() -> None:
    """libvirtd reaps a libvirt guest's QEMU (`process_gone`): an end there is made up."""
    records = accepted_model_trial()
    cleanup = tuple(
        replace(c, evidence="process_gone") if c.resource == "qemu_process" else c
        for c in records.cleanup
    )
    found = _reference_findings(bundle_bytes(with_changes(records, cleanup=cleanup)))
    assert found == {"vm.json", "verifier_vm.json"}
