"""Audit rules that cosmic-ray showed no unit test held (docs/mutation.md): each test
names the mutant of receipts/audit or receipts/cleanupset that it fails on."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.trial.guestrecords import unread_verification_record
from receipts.audit import audit_bytes, audit_file
from receipts.audit.findings import AuditResult
from receipts.bundle import bundle_bytes, zip_info
from receipts.cleanupset import missing_cleanup
from receipts.records import DispatchRecord
from receipts.recordset import RecordSet
from tests.receipts import tamper
from tests.receipts.builders import (
    accepted_model_trial,
    accepted_scripted_trial,
    replace,
    with_changes,
)


def _categories(data: bytes) -> set[str]:
    return {finding.category for finding in audit_bytes(data).findings}


def _findings(records: RecordSet) -> set[tuple[str, str | None]]:
    return {(f.category, f.entry) for f in audit_bytes(bundle_bytes(records)).findings}


def test_a_pass_with_no_tests_is_inconsistent() -> None:
    """A verification/2 that expected 0 tests and passed all 0 is schema-valid; the rule
    `tests_passed > 0` refuses it. Mutation control: `> 0` as `>= 0` accepts it."""
    records = accepted_model_trial()
    assert records.verification is not None
    empty = replace(records.verification, tests_passed=0, tests_expected=0)
    assert ("verification_inconsistent", "verification.json") in _findings(
        with_changes(records, verification=empty)
    )


def test_an_oom_killed_worker_or_verifier_guest_needs_its_kill_count() -> None:
    """Each guest and the worker: `oom_killed` with 0 kills counted is inconsistent.
    Mutation control: the worker's `not worker.oom_kills` as `worker.oom_kills`."""
    records = accepted_model_trial()
    assert records.worker is not None and records.verifier_vm is not None
    worker = with_changes(records, worker=replace(records.worker, category="oom_killed"))
    assert ("oom_inconsistent", "worker.json") in _findings(worker)
    guest = replace(records.verifier_vm, category="oom_killed", oom_kills=0)
    assert ("oom_inconsistent", "verifier_vm.json") in _findings(
        with_changes(records, verifier_vm=guest)
    )


def test_a_turn_naming_the_request_one_past_the_last_is_a_reference_mismatch() -> None:
    """Mutation control: `request_index < len(requests)` as `<=` indexes past the list."""
    records = accepted_model_trial()
    turns = list(records.agent_turns)
    turns[-1] = replace(turns[-1], request_index=len(records.worker_requests))
    found = _findings(with_changes(records, agent_turns=tuple(turns)))
    assert any(category == "reference_mismatch" for category, _entry in found)


def test_a_model_turn_without_its_request_is_a_policy_mismatch() -> None:
    """A model trial's turn with no worker request is a scripted turn in disguise, even
    when the agent record's policy agrees with the trial. Mutation control: `or
    turn_sources_wrong` as `and` lets it through."""
    records = accepted_model_trial()
    turns = list(records.agent_turns)
    turns[0] = replace(turns[0], request_index=None)
    assert ("policy_mismatch", "trial.json") in _findings(
        with_changes(records, agent_turns=tuple(turns))
    )


def test_an_invalid_receipt_names_no_failed_stage() -> None:
    """failed_stage, failed_category and remedy come only from a valid receipt. A true
    OOM story names the VM; the same story with a timing contradiction names nothing.
    Mutation control: `if derivable` as `if not derivable` names the VM."""
    records = accepted_model_trial()
    assert records.trial is not None and records.vm is not None
    oom = with_changes(
        records,
        vm=replace(records.vm, category="oom_killed", oom_kills=1),
        trial=replace(records.trial, failed_stage="vm", verdict="failed_oom"),
        gate=None,
        worker=None,
        agent=None,
        verification=None,
        verifier_vm=None,
        worker_requests=(),
        agent_turns=(),
        tool_calls=(),
    )
    assert audit_bytes(bundle_bytes(oom)).failed_stage == "vm"
    assert oom.trial is not None
    late = replace(oom.trial, ended_unix_ms=oom.trial.started_unix_ms - 1)
    result = audit_bytes(bundle_bytes(with_changes(oom, trial=late)))
    assert not result.valid
    assert (result.failed_stage, result.failed_category, result.remedy) == (None, None, None)
    assert result.derived_verdict is None  # `derivable and ...` as `or` derives one


def test_audit_file_returns_the_audit_result(tmp_path: Path) -> None:
    """Mutation control: `audit_and_read_file(path)[0]` as `[1]` returns the records."""
    path = tmp_path / "receipt.zip"
    path.write_bytes(bundle_bytes(accepted_model_trial()))
    result = audit_file(path)
    assert result.valid
    assert result.derived_verdict == "accepted"


def test_a_libvirt_guest_needs_its_domain_receipt() -> None:
    """Mutation control: `need["libvirt_domain"] += 1` as `+= 0`."""
    records = accepted_model_trial()
    assert records.vm is not None and records.vm.host_key_sha256 is not None
    libvirt = with_changes(records, vm=replace(records.vm, backend="libvirt"))
    assert "libvirt_domain" in missing_cleanup(libvirt)
    assert "libvirt_domain" not in missing_cleanup(records)


def test_a_non_ascii_entry_name_is_unsafe() -> None:
    """Printable but not ASCII: refused as a name, not reported as merely unknown.
    Mutation control: `or not raw.isascii()` as `and` lets it through to known_entry."""
    items = tamper.entries_with_infos(tamper.good_entries())
    items.append((zip_info("vm\u00e9.json"), b"{}"))
    assert "unsafe_entry_name" in _categories(tamper.custom_zip(items))


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_entries_after_a_duplicate_are_still_checked() -> None:
    """Every entry is judged: a damaged entry after a duplicated name is reported too.
    Mutation control: the `continue` after a duplicate as `break` stops the scan."""
    entries = tamper.good_entries()
    items = tamper.entries_with_infos(entries)
    first = items[0]
    items.insert(1, first)  # the first name twice, at the start
    data = tamper.custom_zip(items)
    last = items[-1][0].filename
    data = tamper.flip_byte(data, tamper.payload_offset(data, last))
    found = _categories(data)
    assert {"duplicate_entry", "crc_mismatch"} <= found


def test_a_pass_with_exactly_one_test_is_consistent() -> None:
    """Mutation control: `tests_passed > 0` as `> 1` refuses a true one-test pass."""
    records = accepted_model_trial()
    assert records.verification is not None
    one = replace(records.verification, tests_passed=1, tests_expected=1)
    assert _findings(with_changes(records, verification=one)) == set()


def test_a_local_header_offset_past_the_end_is_a_mismatch_not_a_crash() -> None:
    """The central directory's offset of an entry's local header is the forger's to
    write: past the end of the file it is `local_header_mismatch`. Mutation control:
    `start < 0 or start + size > len(data)` as `and` reads past the end (struct.error
    out of the audit)."""
    data = bytes(bundle_bytes(accepted_model_trial()))
    name = "vm.json"
    field = tamper.central_header_offset(data, name) + 42  # relative offset of local header
    data = data[:field] + struct.pack("<L", len(data) + 1000) + data[field + 4 :]
    assert "local_header_mismatch" in _categories(data)


def test_a_gap_in_a_sequence_is_one_finding() -> None:
    """cleanup/000003.json dropped from 17: one `sequence_gap`, naming the record found
    where 3 was expected, not one per record after it. Mutation control: the `break`
    after the first gap as `continue` reports 13."""
    entries = tamper.good_entries()
    del entries["cleanup/000003.json"]
    findings = audit_bytes(tamper.forge(entries)).findings
    gaps = [f.entry for f in findings if f.category == "sequence_gap"]
    assert gaps == ["cleanup/000004.json"]


def test_a_tool_call_naming_the_turn_one_past_the_last_is_a_reference_mismatch() -> None:
    """Mutation control: `call.turn < len(turns)` as `<=` indexes past the turns."""
    records = accepted_model_trial()
    calls = list(records.tool_calls)
    calls[-1] = replace(calls[-1], turn=len(records.agent_turns))
    found = _findings(with_changes(records, tool_calls=tuple(calls)))
    assert any(category == "reference_mismatch" for category, _entry in found)


def test_every_entry_that_is_not_canonical_json_is_reported() -> None:
    """Mutation control: the `continue` after a non-canonical entry as `break` stops at
    the first one."""
    entries = tamper.good_entries()
    for name in ("gate.json", "vm.json"):
        entries[name] = entries[name][:-1] + b" }"
    findings = audit_bytes(tamper.forge(entries)).findings
    assert [f.entry for f in findings if f.category == "json_not_canonical"] == [
        "gate.json",
        "vm.json",
    ]


def test_every_record_with_a_foreign_schema_id_is_reported() -> None:
    """Mutation control: the `continue` after a schema_mismatch as `break`."""
    entries = tamper.good_entries()
    entries = tamper.edit_json(entries, "gate.json", schema="harness.receipt.vm/1")
    entries = tamper.edit_json(entries, "vm.json", schema="harness.receipt.gate/1")
    findings = audit_bytes(tamper.forge(entries)).findings
    assert [f.entry for f in findings if f.category == "schema_mismatch"] == [
        "gate.json",
        "vm.json",
    ]


def test_a_verifier_guest_needs_its_receipts_when_the_agent_guest_never_started() -> None:
    """The agent guest has no host key (it never got that far), the verification guest
    does: its resources still need receipts. Mutation control: the `continue` for a
    guest without a host key as `break` skips the verification guest."""
    records = accepted_model_trial()
    assert records.vm is not None and records.verifier_vm is not None
    unstarted = replace(records.vm, host_key_sha256=None)
    missing = missing_cleanup(with_changes(records, vm=unstarted, cleanup=()))
    assert "qemu_process" in missing


def test_a_receipt_without_its_trial_record_is_refused() -> None:
    """Mutation control: `if ctx.enabled("required_records")` as `if not ...` for a
    missing trial.json lets the receipt through."""
    entries = tamper.good_entries()
    del entries["trial.json"]
    result = audit_bytes(tamper.forge(entries))
    assert not result.valid
    assert ("record_missing", "trial.json") in {(f.category, f.entry) for f in result.findings}


def test_two_tool_calls_on_one_turn_name_the_second() -> None:
    """Mutation control: `and call.turn not in seen` as `or` accepts the second call and
    leaves only the count finding on agent.json."""
    records = accepted_model_trial()
    calls = list(records.tool_calls)
    calls[1] = replace(calls[1], turn=calls[0].turn)
    found = _findings(with_changes(records, tool_calls=tuple(calls)))
    assert ("reference_mismatch", "tool_calls/000001.json") in found


def test_findings_stop_at_1000_and_say_so() -> None:
    """1,001 unknown entries: 1,000 findings and findings_truncated. Mutation control:
    `self.truncated = True` as False."""
    items = tamper.entries_with_infos(tamper.good_entries())
    items += [(zip_info(f"junk{index:04d}.json"), b"{}") for index in range(1001)]
    result = audit_bytes(tamper.custom_zip(items))
    assert len(result.findings) == 1000
    assert result.findings_truncated


def test_an_entry_gets_one_finding_the_first_check_it_fails() -> None:
    """An unsafe name that is also a symlink: the entry is reported once, by its name.
    Mutation control: the `break` after an entry's first failed check as `continue`
    reports it again as symlink_entry."""
    items = tamper.entries_with_infos(tamper.good_entries())
    info = zip_info("../link.json")
    info.external_attr = 0o120777 << 16
    items.append((info, b"/etc/passwd"))
    found = [f.category for f in audit_bytes(tamper.custom_zip(items)).findings]
    assert found == ["unsafe_entry_name"]


def test_the_manifest_check_goes_on_after_an_absent_entry() -> None:
    """agent.json (listed first) removed, and vm.json changed under the same manifest:
    both are reported. Mutation control: the `continue` after a listed-but-absent entry
    as `break` stops at agent.json."""
    entries = tamper.good_entries()
    del entries["agent.json"]
    entries["vm.json"] = entries["vm.json"].replace(b'"oom_kills":0', b'"oom_kills":1')
    found = {(f.category, f.entry) for f in audit_bytes(tamper.forge(entries, False)).findings}
    assert ("manifest_lists_absent_entry", "agent.json") in found
    assert ("manifest_digest_mismatch", "vm.json") in found


def test_a_trial_that_did_not_fail_needs_its_cleanup_receipts() -> None:
    """No stage failed and no cleanup receipt at all: the first one is named missing.
    Mutation control: `failed is None` as `is not None` (or negated) drops the finding."""
    found = _findings(with_changes(accepted_model_trial(), cleanup=()))
    assert ("record_missing", "cleanup/000000.json") in found


def test_a_truthful_verifier_oom_is_consistent_and_a_false_one_is_not() -> None:
    """`verifier_vm_failed` with its guest OOM-killed tells one story; the same claim over
    a guest that ended ok does not. Mutation control: `failed and not lost` as `failed and
    lost` inverts both."""
    records = accepted_model_trial()
    assert records.verifier_vm is not None
    failed = unread_verification_record("verifier_vm_failed")
    oom = replace(records.verifier_vm, category="oom_killed", oom_kills=1)
    truthful = _findings(with_changes(records, verification=failed, verifier_vm=oom))
    assert ("verifier_inconsistent", "verifier_vm.json") not in truthful
    false = _findings(with_changes(records, verification=failed))
    assert ("verifier_inconsistent", "verifier_vm.json") in false


def test_a_scripted_trial_placed_on_the_host_is_a_placement_mismatch() -> None:
    """The channel fits the placement, but a scripted trial has no worker to place.
    Mutation control: the `and` of the two conditions as `or`."""
    records = accepted_scripted_trial()
    assert records.trial is not None
    trial = replace(records.trial, placement="host", channel="guestfwd_unix")
    assert ("placement_mismatch", "trial.json") in _findings(with_changes(records, trial=trial))


def test_a_tool_call_on_a_text_turn_names_the_call() -> None:
    """Mutation control: `and turns[call.turn].kind == "tool_call"` as `or` accepts the
    call and leaves only the count finding on agent.json."""
    records = accepted_model_trial()
    turns = list(records.agent_turns)
    turns[1] = replace(turns[1], kind="text")
    found = _findings(with_changes(records, agent_turns=tuple(turns)))
    assert ("reference_mismatch", "tool_calls/000001.json") in found


def test_entries_after_an_unknown_entry_are_still_checked() -> None:
    """Mutation control: the `continue` after an unknown entry as `break`."""
    items = tamper.entries_with_infos(tamper.good_entries())
    items.insert(0, (zip_info("aaa.json"), b"{}"))
    data = tamper.custom_zip(items)
    last = items[-1][0].filename
    data = tamper.flip_byte(data, tamper.payload_offset(data, last))
    assert {"unknown_entry", "crc_mismatch"} <= _categories(data)


def test_a_remedy_comes_with_its_failed_stage_only() -> None:
    """The audit result's own rule. Mutation control: `self.failed_stage is None` as `is
    not None` refuses the one valid combination."""
    base = audit_bytes(bundle_bytes(accepted_model_trial())).model_dump(by_alias=True)
    failed = {"failed_stage": "preflight", "failed_category": "memory_below_floor"}
    whole = AuditResult.model_validate({**base, **failed, "remedy": "free_memory"})
    assert whole.remedy == "free_memory"
    with pytest.raises(ValidationError):
        AuditResult.model_validate({**base, "remedy": "free_memory"})


def test_every_record_failing_its_schema_or_index_is_reported() -> None:
    """Mutation controls: the `continue` after a schema_valid finding, and the one after
    an index_mismatch, as `break`."""
    entries = tamper.good_entries()
    for name in ("gate.json", "vm.json"):
        entries = tamper.edit_json(entries, name, unexpected=1)
    for name in ("tool_calls/000000.json", "tool_calls/000001.json"):
        entries = tamper.edit_json(entries, name, index=7)
    found = {(f.category, f.entry) for f in audit_bytes(tamper.forge(entries)).findings}
    assert {("schema_extra_field", "gate.json"), ("schema_extra_field", "vm.json")} <= found
    assert {
        ("index_mismatch", "tool_calls/000000.json"),
        ("index_mismatch", "tool_calls/000001.json"),
    } <= found


def test_a_trial_that_ended_the_millisecond_it_started_is_consistent() -> None:
    """Mutation control: `ended < started` as `<=`."""
    records = accepted_model_trial()
    assert records.trial is not None
    instant = replace(records.trial, ended_unix_ms=records.trial.started_unix_ms)
    assert _findings(with_changes(records, trial=instant)) == set()


def test_turn_references_go_on_after_a_turn_without_a_request() -> None:
    """Mutation control: the `continue` for a turn with no request index as `break`
    leaves the second turn's bad reference unreported."""
    records = accepted_model_trial()
    turns = list(records.agent_turns)
    turns[0] = replace(turns[0], request_index=None)
    turns[1] = replace(turns[1], request_index=9)
    found = _findings(with_changes(records, agent_turns=tuple(turns)))
    assert ("reference_mismatch", "agent_turns/000001.json") in found


def test_a_full_audit_is_not_truncated() -> None:
    """Mutation control: AuditContext's `truncated = False` default as True."""
    assert not audit_bytes(bundle_bytes(accepted_model_trial())).findings_truncated


def test_one_domain_receipt_is_enough_for_one_libvirt_guest() -> None:
    """Mutation control: `need["libvirt_domain"] += 1` as `+= 2`."""
    records = accepted_model_trial()
    assert records.vm is not None
    domain = replace(records.cleanup[0], resource="libvirt_domain")
    libvirt = with_changes(
        records, vm=replace(records.vm, backend="libvirt"), cleanup=(*records.cleanup, domain)
    )
    assert "libvirt_domain" not in missing_cleanup(libvirt)


def test_audit_file_sees_a_file_one_byte_over_the_limit(tmp_path: Path) -> None:
    """audit_file reads one byte past the limit to see it. Mutation control:
    `MAX_ZIP_BYTES + 1` as `+ 0` or `- 1` reads a cut file and calls it malformed."""
    path = tmp_path / "big.zip"
    with path.open("wb") as handle:
        handle.truncate(256 * 1024 * 1024 + 1)  # sparse
    assert {f.category for f in audit_file(path).findings} == {"zip_oversize"}


def test_a_local_header_offset_in_the_last_bytes_is_a_mismatch_not_a_crash() -> None:
    """Mutation control: `start + _LOCAL_HEADER.size > len(data)` as `start - ...`
    reads a header that runs past the end (struct.error out of the audit)."""
    data = bytes(bundle_bytes(accepted_model_trial()))
    field = tamper.central_header_offset(data, "vm.json") + 42
    data = data[:field] + struct.pack("<L", len(data) - 10) + data[field + 4 :]
    assert "local_header_mismatch" in _categories(data)


def test_entries_after_a_refused_entry_are_still_checked() -> None:
    """Mutation control: `if failed: continue` as `break`."""
    items = tamper.entries_with_infos(tamper.good_entries())
    items.insert(0, (zip_info("../x.json"), b"{}"))
    data = tamper.custom_zip(items)
    last = items[-1][0].filename
    data = tamper.flip_byte(data, tamper.payload_offset(data, last))
    assert {"unsafe_entry_name", "crc_mismatch"} <= _categories(data)


def test_a_dispatch_record_belongs_to_a_dispatched_trial_only() -> None:
    """Mutation control: `not trial.dispatched` with the `not` deleted flags the true
    story and passes the false one."""
    records = accepted_model_trial()
    assert records.trial is not None and not records.trial.dispatched
    dispatch = DispatchRecord(
        category="ok",
        scope="trial",
        dispatch_sha256="a" * 64,
        profile="smollm2",
        task="task",
        commit="b" * 40,
        tree="c" * 40,
        issued_unix_ms=records.trial.started_unix_ms,
        consumed_unix_ms=records.trial.started_unix_ms,
        duration_ms=1,
        suite_sha256=None,
        suite_id=None,
        member_id=None,
    )
    unexpected = ("record_unexpected", "dispatch.json")
    assert unexpected in _findings(with_changes(records, dispatch=dispatch))
    dispatched = replace(records.trial, dispatched=True)
    assert unexpected not in _findings(with_changes(records, dispatch=dispatch, trial=dispatched))


def test_a_central_directory_offset_one_past_its_place_is_refused_not_a_crash() -> None:
    """zipfile adds (where the central directory is) - (where the end record says it is)
    to every entry's header offset, so an end record naming an offset one byte too far
    gives the first entry a header offset of -1. The audit refuses it as a header
    mismatch; read there, -1 would be the last byte of the file and a struct.error would
    escape the audit. Mutation control: `start < 0` as `start < -1` crashes this test."""
    data = bytearray(bundle_bytes(accepted_model_trial()))
    end = data.rfind(b"PK\x05\x06")
    (offset,) = struct.unpack_from("<I", data, end + 16)
    struct.pack_into("<I", data, end + 16, offset + 1)
    result = audit_bytes(bytes(data))
    assert not result.valid
    assert "local_header_mismatch" in {finding.category for finding in result.findings}
