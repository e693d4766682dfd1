"""One test per tamper class: each is refused with its own closed category.

The mutation control (docs/engineering.md §8) is mechanized in `test_rule_is_load_bearing`:
the same tampered ZIP is audited with the rule that should catch it disabled, and the
expected category must then disappear, so no test here passes without its rule.
"""

from __future__ import annotations

import dataclasses
import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from receipts.agentclis import OPENCODE_1_18_33
from receipts.audit import ALL_RULES, audit_bytes
from receipts.audit.findings import AuditCategory
from receipts.bundle import FILE_MODE, bundle_bytes, bundle_entries, zip_info
from receipts.canonical import canonical
from receipts.modelkey import converted_key
from receipts.records.base import Record
from receipts.records.vm import VerifierVmRecord, VmRecord
from receipts.recordset import MANIFEST_NAME, RecordSet
from receipts.snapshotkey import snapshot_key
from tests.receipts import tamper
from tests.receipts.builders import (
    accepted_model_trial,
    accepted_scripted_trial,
    cold_start,
    hoststate,
    legacy,
    replace,
    with_changes,
)


@dataclass(frozen=True)
class Case:
    build: Callable[[], bytes]
    category: AuditCategory
    rule: str
    require_current: bool = False
    """Audit as `harness audit --require-current` does."""


def _flipped_record_byte() -> bytes:
    data = bundle_bytes(accepted_model_trial())
    return tamper.flip_byte(data, tamper.payload_offset(data, "vm.json") + 10)


def _central_crc_changed() -> bytes:
    data = bundle_bytes(accepted_model_trial())
    return tamper.with_central_crc(data, "vm.json", 0x12345678)


def _forged_flip_keeping_manifest() -> bytes:
    entries = tamper.good_entries()
    vm = entries["vm.json"]
    entries["vm.json"] = vm.replace(b'"oom_kills":0', b'"oom_kills":1')
    assert entries["vm.json"] != vm
    return tamper.forge(entries, fix_manifest=False)


def _duplicate_entry() -> bytes:
    entries = tamper.good_entries()
    items = tamper.entries_with_infos(entries)
    items.append((zip_info("vm.json"), entries["vm.json"]))
    with pytest.warns(UserWarning, match="Duplicate name"):
        return tamper.custom_zip(items)


def _named(name: str) -> Callable[[], bytes]:
    def build() -> bytes:
        items = tamper.entries_with_infos(tamper.good_entries())
        items.append((zip_info(name), b"{}"))
        return tamper.custom_zip(items)

    return build


def _symlink_entry() -> bytes:
    items = tamper.entries_with_infos(tamper.good_entries())
    info = zip_info("memory.json")
    info.external_attr = (0o120777) << 16
    items.append((info, b"/etc/passwd"))
    return tamper.custom_zip(items)


def _fifo_entry() -> bytes:
    items = tamper.entries_with_infos(tamper.good_entries())
    info = zip_info("memory.json")
    info.external_attr = (0o010644) << 16
    items.append((info, b""))
    return tamper.custom_zip(items)


def _directory_entry() -> bytes:
    items = tamper.entries_with_infos(tamper.good_entries())
    items.append((zip_info("cleanup/"), b""))
    return tamper.custom_zip(items)


def _compressed_entry() -> bytes:
    items = tamper.entries_with_infos(tamper.good_entries())
    items[0][0].compress_type = zipfile.ZIP_DEFLATED
    return tamper.custom_zip(items)


def _encrypted_flag() -> bytes:
    return tamper.with_flag_bits(bundle_bytes(accepted_model_trial()), "vm.json", 0x1)


def _nul_in_name() -> bytes:
    data = _named("vm.json#.txt")()
    return tamper.patch_name_byte(data, b"vm.json#.txt", b"vm.json\x00.txt")


def _unknown_record() -> bytes:
    entries = tamper.good_entries()
    entries["notes.json"] = b'{"text":"trust me"}'
    return tamper.forge(entries)


def _missing_required_record() -> bytes:
    entries = tamper.good_entries()
    del entries["verification.json"]
    return tamper.forge(entries)


def _extra_field() -> bytes:
    entries = tamper.edit_json(tamper.good_entries(), "vm.json", stderr="qemu: oops")
    return tamper.forge(entries)


def _nan() -> bytes:
    entries = tamper.good_entries()
    entries["vm.json"] = entries["vm.json"].replace(b'"oom_kills":0', b'"oom_kills":NaN')
    return tamper.forge(entries)


def _duplicate_key() -> bytes:
    entries = tamper.good_entries()
    entries["vm.json"] = entries["vm.json"].replace(
        b'"oom_kills":0', b'"oom_kills":0,"oom_kills":0'
    )
    return tamper.forge(entries)


def _not_json() -> bytes:
    entries = tamper.good_entries()
    entries["vm.json"] = entries["vm.json"][:-1]
    return tamper.forge(entries)


def _non_canonical() -> bytes:
    entries = tamper.good_entries()
    entries["vm.json"] = entries["vm.json"].replace(b'"oom_kills":0', b'"oom_kills": 0')
    return tamper.forge(entries)


def _oversize_record() -> bytes:
    entries = tamper.good_entries()
    entries["vm.json"] = entries["vm.json"][:-1] + b"," + b" " * Record.CEILING_BYTES + b"}"
    return tamper.forge(entries, fix_manifest=False)  # a manifest cannot even list it


def _manifest_digest() -> bytes:
    entries = tamper.good_entries()
    entries = tamper.edit_json(entries, MANIFEST_NAME)
    manifest = json.loads(entries[MANIFEST_NAME])
    manifest["entries"][0]["sha256"] = "0" * 64
    entries[MANIFEST_NAME] = canonical(manifest)
    return tamper.forge(entries, fix_manifest=False)


def _manifest_lists_absent() -> bytes:
    entries = tamper.good_entries()
    del entries["gate.json"]
    return tamper.forge(entries, fix_manifest=False)


def _entry_not_in_manifest() -> bytes:
    entries = tamper.good_entries()
    entries["memory.json"] = b'{"interval_ms":50,"samples":[],"schema":"harness.receipt.memory/1"}'
    return tamper.forge(entries, fix_manifest=False)


def _manifest_missing() -> bytes:
    entries = tamper.good_entries()
    del entries[MANIFEST_NAME]
    return tamper.forge(entries, fix_manifest=False)


def _manifest_invalid() -> bytes:
    entries = tamper.good_entries()
    manifest = json.loads(entries[MANIFEST_NAME])
    manifest["entries"].reverse()  # the manifest must list entries sorted by name
    entries[MANIFEST_NAME] = canonical(manifest)
    return tamper.forge(entries, fix_manifest=False)


def _truncated() -> bytes:
    data = bundle_bytes(accepted_model_trial())
    return data[: len(data) // 2]


def _not_a_zip() -> bytes:
    return b"%PDF-1.7 this is not a receipt"


def _timestamp_changed() -> bytes:
    items = tamper.entries_with_infos(tamper.good_entries())
    items[3][0].date_time = (2026, 11, 29, 12, 0, 0)
    return tamper.custom_zip(items)


def _sequence_gap() -> bytes:
    entries = tamper.good_entries()
    entries["cleanup/000009.json"] = entries.pop("cleanup/000004.json")
    return tamper.forge(entries)


def _index_mismatch() -> bytes:
    entries = tamper.edit_json(tamper.good_entries(), "cleanup/000001.json", index=3)
    return tamper.forge(entries)


def _schema_id_swapped() -> bytes:
    entries = tamper.good_entries()
    entries["gate.json"] = entries["vm.json"]
    return tamper.forge(entries)


def _missing_field() -> bytes:
    entries = tamper.good_entries()
    value = json.loads(entries["vm.json"])
    del value["oom_kills"]
    entries["vm.json"] = canonical(value)
    return tamper.forge(entries)


def _wrong_type() -> bytes:
    entries = tamper.edit_json(tamper.good_entries(), "vm.json", oom_kills="0")
    return tamper.forge(entries)


def _passed_without_task_digest() -> bytes:
    """A passing verification that names no task: the digests may be absent only in the
    host's `records_invalid` stand-in, which never passes (VerificationRecord's check)."""
    entries = tamper.edit_json(tamper.good_entries(), "verification.json", task_sha256=None)
    return tamper.forge(entries)


def _counts_contradict() -> bytes:
    records = accepted_model_trial()
    assert records.agent is not None
    return tamper.forge_records(with_changes(records, agent=replace(records.agent, tool_calls=3)))


def _worker_counts() -> bytes:
    records = accepted_model_trial()
    assert records.worker is not None
    return tamper.forge_records(
        with_changes(records, worker=replace(records.worker, completion_tokens_total=1))
    )


def _verdict_claimed() -> bytes:
    records = accepted_model_trial()
    assert records.trial is not None and records.verification is not None
    failed = replace(records.verification, result="failed", tests_passed=2, tests_failed=1)
    return tamper.forge_records(with_changes(records, verification=failed))


def _failed_stage_claim() -> bytes:
    records = accepted_model_trial()
    assert records.trial is not None
    return tamper.forge_records(
        with_changes(records, trial=replace(records.trial, failed_stage="vm", verdict="failed_vm"))
    )


def _record_after_failure() -> bytes:
    records = accepted_model_trial()
    assert records.trial is not None and records.image is not None
    return tamper.forge_records(
        with_changes(
            records,
            image=replace(records.image, category="build_failed"),
            trial=replace(records.trial, failed_stage="image", verdict="failed_image"),
        )
    )


def _record_of_crashed_stage() -> bytes:
    """The harness crashed in the agent stage, yet an agent record is kept."""
    records = accepted_model_trial()
    assert records.trial is not None
    crashed = replace(
        records.trial, failed_stage="agent", internal_error_stage="agent", verdict="failed_internal"
    )
    return tamper.forge_records(
        with_changes(
            records,
            trial=crashed,
            verification=None,
            verifier_vm=None,
            agent_turns=(),
            tool_calls=(),
        )
    )


def _scripted_with_worker() -> bytes:
    scripted = accepted_scripted_trial()
    model = accepted_model_trial()
    return tamper.forge_records(with_changes(scripted, worker=model.worker))


def _placement_contradicts() -> bytes:
    records = accepted_model_trial()
    assert records.worker is not None
    return tamper.forge_records(
        with_changes(
            records, worker=replace(records.worker, placement="guest", channel="guest_loopback")
        )
    )


def _channel_not_the_placements() -> bytes:
    """Trial and worker agree with each other, but the channel is not the host placement's
    (receipts/vocabulary.py channel_for): a worker claimed on the host behind the guest's
    loopback is a story no harness writes."""
    records = accepted_model_trial()
    assert records.worker is not None and records.trial is not None
    return tamper.forge_records(
        with_changes(
            records,
            trial=replace(records.trial, channel="guest_loopback"),
            worker=replace(records.worker, channel="guest_loopback"),
        )
    )


def _turn_reference() -> bytes:
    records = accepted_model_trial()
    turns = list(records.agent_turns)
    turns[1] = replace(turns[1], request_index=0, prompt_tokens=100, completion_tokens=20)
    assert records.agent is not None
    agent = replace(records.agent, prompt_tokens_total=200, completion_tokens_total=40)
    return tamper.forge_records(with_changes(records, agent_turns=tuple(turns), agent=agent))


def _tool_call_reference() -> bytes:
    records = accepted_model_trial()
    calls = list(records.tool_calls)
    calls[1] = replace(calls[1], turn=0)
    return tamper.forge_records(with_changes(records, tool_calls=tuple(calls)))


def _model_reference() -> bytes:
    records = accepted_model_trial()
    assert records.worker is not None
    return tamper.forge_records(
        with_changes(records, worker=replace(records.worker, model_sha256="b" * 64))
    )


def _model_cache_key() -> bytes:
    """The key of another entry (here: the same pins, another output type), the rest
    of the record left as it was: the key no longer follows from what it states."""
    records = accepted_model_trial()
    assert records.model is not None and records.model.pin_sha256 is not None
    other = converted_key(records.model.pin_sha256, "1.0.0", "q8_0")
    return tamper.forge_records(
        with_changes(records, model=replace(records.model, cache_key=other))
    )


def _verification_inconsistent() -> bytes:
    records = accepted_model_trial()
    assert records.verification is not None
    return tamper.forge_records(
        with_changes(records, verification=replace(records.verification, fixture_changed=True))
    )


def _verification_relabelled() -> bytes:
    """An in-process pass of a trial/4 receipt, its verification record relabelled as
    verification/3 so that the verdict would read `accepted`, not `accepted_unguarded`."""
    records = legacy(accepted_model_trial())  # the pairwise rule: a 0.1.0 receipt's
    assert records.verification is not None
    current = with_changes(records, verification=replace(records.verification, judge="in_process"))
    entries = bundle_entries(current)
    return tamper.forge(
        tamper.edit_json(entries, "verification.json", schema="harness.receipt.verification/3")
    )


def _tool_call_relabelled(current: bool = True) -> Callable[[], bytes]:
    """One tool call relabelled as tool_call/3 (its fields fit): no pairwise rule covers
    it, only the format of the version the receipt claims (`current` False: 0.1.0's)."""

    def build() -> bytes:
        records = accepted_model_trial()
        if not current:
            records = legacy(records)
        entries = bundle_entries(records)
        return tamper.forge(
            tamper.edit_json(
                entries, "tool_calls/000000.json", schema="harness.receipt.tool_call/3"
            )
        )

    return build


def _unknown_harness_version() -> bytes:
    records = accepted_model_trial()
    assert records.trial is not None and records.agent is not None
    return tamper.forge_records(
        with_changes(
            records,
            trial=replace(records.trial, harness_version="9.9.9"),
            agent=replace(records.agent, agent_version="9.9.9"),
        )
    )


def _verifier_lost_but_passed() -> bytes:
    """A verification that passed in a verification guest the receipt says was lost."""
    records = accepted_model_trial()
    assert records.verifier_vm is not None
    return tamper.forge_records(
        with_changes(records, verifier_vm=replace(records.verifier_vm, category="qemu_exited"))
    )


def _scratch_receipt_dropped() -> bytes:
    """A trial/3 receipt without its own scratch directory's receipt (the resource a
    leaked trial leaves on the host), the rest re-indexed."""
    records = accepted_model_trial()
    kept = [c for c in records.cleanup if c.resource != "trial_scratch"]
    assert len(kept) == len(records.cleanup) - 1
    cleanup = tuple(replace(c, index=i) for i, c in enumerate(kept))
    return tamper.forge_records(with_changes(records, cleanup=cleanup))


def _cleanup_dropped() -> bytes:
    """The agent guest's QEMU receipt dropped, the rest re-indexed: a shorter list that
    says nothing false, but one receipt the records require is gone."""
    records = accepted_model_trial()
    first = next(c for c in records.cleanup if c.resource == "qemu_process")
    kept = [c for c in records.cleanup if c is not first]
    cleanup = tuple(replace(c, index=i) for i, c in enumerate(kept))
    return tamper.forge_records(with_changes(records, cleanup=cleanup))


def _qemu_end_not_reaped() -> bytes:
    """The verification guest's QEMU was still present after the kill deadline (its
    `qemu_process` receipt says so), yet its record states how that QEMU ended."""
    records = accepted_model_trial()
    last = [c for c in records.cleanup if c.resource == "qemu_process"][-1]
    cleanup = tuple(
        replace(c, status="failed", evidence="still_present") if c is last else c
        for c in records.cleanup
    )
    return tamper.forge_records(with_changes(records, cleanup=cleanup))


def _backend_contradicts() -> bytes:
    """A trial that says libvirt over a guest record that says qemu."""
    records = accepted_model_trial()
    assert records.trial is not None
    return tamper.forge_records(
        with_changes(records, trial=replace(records.trial, backend="libvirt"))
    )


def _restored_verifier(**shape_changes: object) -> RecordSet:
    """The golden trial with its verification guest's snapshot changed: the shape by
    `shape_changes`, the key recomputed from it, so only the named part is wrong."""
    records = accepted_model_trial()
    verifier = records.verifier_vm
    assert isinstance(verifier, VerifierVmRecord) and verifier.start is not None
    shape = verifier.start.shape
    assert shape is not None
    shape = shape.model_copy(update=shape_changes)
    key = snapshot_key(**shape.model_dump())
    start = verifier.start.model_copy(update={"shape": shape, "snapshot_key": key})
    return with_changes(records, verifier_vm=replace(verifier, start=start))


def _snapshot_of_another_image() -> bytes:
    """A verification guest restored from a snapshot of an image the receipt does not name."""
    return tamper.forge_records(_restored_verifier(image_key="9" * 64))


def _snapshot_of_another_shape() -> bytes:
    """A snapshot of a bigger guest than the one the record describes."""
    return tamper.forge_records(_restored_verifier(memory_mib=4096))


def _snapshot_key_not_its_shape() -> bytes:
    """A snapshot key that is not the recorded shape's."""
    records = _restored_verifier()
    verifier = records.verifier_vm
    assert isinstance(verifier, VerifierVmRecord) and verifier.start is not None
    start = verifier.start.model_copy(update={"snapshot_key": "8" * 64})
    return tamper.forge_records(with_changes(records, verifier_vm=replace(verifier, start=start)))


def _cold_reason_contradicts() -> bytes:
    """A guest that ran on qemu, booted cold "because" it ran on libvirt."""
    records = accepted_model_trial()
    assert isinstance(records.vm, VmRecord)
    vm = replace(records.vm, start=cold_start("backend_libvirt"))
    return tamper.forge_records(with_changes(records, vm=vm))


def _confinement_inconsistent() -> bytes:
    """A run_tests whose cgroup was not emptied, under an agent that claims a normal end."""
    records = accepted_model_trial()
    first = records.tool_calls[0]
    run = replace(
        first,
        tool="run_tests",
        edit_match=None,
        run_exit="passed",
        net_isolation="applied",
        cgroup_end="not_emptied",
    )
    return tamper.forge_records(with_changes(records, tool_calls=(run, *records.tool_calls[1:])))


def _agent_identity(**named: object) -> Callable[[], bytes]:
    """An agent record that names other code than ran: another harness version for the
    harness's loop, or a CLI version or executable digest no release pinned."""

    def build() -> bytes:
        records = accepted_model_trial()
        assert records.agent is not None
        return tamper.forge_records(with_changes(records, agent=replace(records.agent, **named)))

    return build


def _oom_inconsistent() -> bytes:
    records = accepted_model_trial()
    assert records.vm is not None and records.trial is not None
    return tamper.forge_records(
        with_changes(
            records,
            vm=replace(records.vm, category="oom_killed"),
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
    )


def _own_tag_excluded() -> bytes:
    """Host state that left out items as if they were another trial's, naming this
    trial's own tag: everything else about the record is well-formed."""
    records = accepted_model_trial()
    assert records.trial is not None and records.hoststate is not None
    own = records.trial.trial_id[:16]
    cgroups = records.hoststate.cgroups.model_copy(update={"excluded_after": 1})
    excused = replace(records.hoststate, cgroups=cgroups, excluded_trials=(own,))
    return tamper.forge_records(with_changes(records, hoststate=excused))


def _timing() -> bytes:
    records = accepted_model_trial()
    assert records.trial is not None
    return tamper.forge_records(
        with_changes(records, trial=replace(records.trial, ended_unix_ms=1))
    )


def _hoststate_missing() -> bytes:
    records = accepted_model_trial()
    assert records.trial is not None
    return tamper.forge_records(
        with_changes(
            records, hoststate=None, trial=replace(records.trial, verdict="evidence_incomplete")
        )
    )


def _too_many_entries() -> bytes:
    entries = tamper.good_entries()
    for index in range(20_001):
        entries[f"cleanup/{index:06d}.json"] = b"{}"
    return tamper.forge(entries, fix_manifest=False)


def _zip_oversize() -> bytes:
    return bytes(256 * 1024 * 1024 + 1)


CASES: dict[str, Case] = {
    "flipped_record_byte": Case(_flipped_record_byte, "crc_mismatch", "entry_crc"),
    "central_crc_changed": Case(_central_crc_changed, "local_header_mismatch", "local_header"),
    "forged_flip_keeping_manifest": Case(
        _forged_flip_keeping_manifest, "manifest_digest_mismatch", "manifest_digests"
    ),
    "duplicate_entry": Case(_duplicate_entry, "duplicate_entry", "duplicate_name"),
    "parent_traversal": Case(_named("../x"), "unsafe_entry_name", "entry_name"),
    "absolute_name": Case(_named("/x"), "unsafe_entry_name", "entry_name"),
    "backslash_name": Case(_named("cleanup\\000000.json"), "unsafe_entry_name", "entry_name"),
    "nul_in_name": Case(_nul_in_name, "unsafe_entry_name", "entry_name"),
    "directory_entry": Case(_directory_entry, "directory_entry", "entry_name"),
    "symlink_entry": Case(_symlink_entry, "symlink_entry", "entry_type"),
    "fifo_entry": Case(_fifo_entry, "special_entry", "entry_type"),
    "compressed_entry": Case(_compressed_entry, "compressed_entry", "entry_compression"),
    "encrypted_flag": Case(_encrypted_flag, "encrypted_entry", "entry_flags"),
    "unknown_record": Case(_unknown_record, "unknown_entry", "known_entry"),
    "missing_required_record": Case(_missing_required_record, "record_missing", "required_records"),
    "extra_field": Case(_extra_field, "schema_extra_field", "schema_valid"),
    "missing_field": Case(_missing_field, "schema_missing_field", "schema_valid"),
    "wrong_type": Case(_wrong_type, "schema_violation", "schema_valid"),
    "passed_without_task_digest": Case(
        _passed_without_task_digest, "schema_violation", "schema_valid"
    ),
    "schema_id_swapped": Case(_schema_id_swapped, "schema_mismatch", "schema_id"),
    "nan": Case(_nan, "json_non_finite", "json_canonical"),
    "duplicate_key": Case(_duplicate_key, "json_duplicate_key", "json_canonical"),
    "not_json": Case(_not_json, "json_invalid", "json_canonical"),
    "non_canonical_json": Case(_non_canonical, "json_not_canonical", "json_canonical"),
    "oversize_record": Case(_oversize_record, "entry_oversize", "entry_size"),
    "manifest_digest_mismatch": Case(
        _manifest_digest, "manifest_digest_mismatch", "manifest_digests"
    ),
    "manifest_lists_absent": Case(
        _manifest_lists_absent, "manifest_lists_absent_entry", "manifest_coverage"
    ),
    "entry_not_in_manifest": Case(
        _entry_not_in_manifest, "entry_not_in_manifest", "manifest_coverage"
    ),
    "manifest_missing": Case(_manifest_missing, "manifest_missing", "manifest_present"),
    "manifest_invalid": Case(_manifest_invalid, "manifest_invalid", "manifest_valid"),
    "truncated_zip": Case(_truncated, "zip_truncated", "zip_structure"),
    "not_a_zip": Case(_not_a_zip, "zip_malformed", "zip_structure"),
    "zip_oversize": Case(_zip_oversize, "zip_oversize", "zip_size"),
    "too_many_entries": Case(_too_many_entries, "too_many_entries", "entry_count"),
    "timestamp_changed": Case(_timestamp_changed, "container_not_canonical", "container_canonical"),
    "sequence_gap": Case(_sequence_gap, "sequence_gap", "sequence_contiguous"),
    "index_mismatch": Case(_index_mismatch, "index_mismatch", "index_matches_name"),
    "counts_contradict": Case(_counts_contradict, "count_mismatch", "agent_counts"),
    "worker_counts_contradict": Case(_worker_counts, "count_mismatch", "worker_counts"),
    "verdict_overclaimed": Case(_verdict_claimed, "verdict_mismatch", "verdict_claim"),
    "failed_stage_claim": Case(_failed_stage_claim, "failed_stage_mismatch", "failed_stage_claim"),
    "record_after_failure": Case(_record_after_failure, "record_unexpected", "required_records"),
    "record_of_crashed_stage": Case(
        _record_of_crashed_stage, "record_unexpected", "required_records"
    ),
    "hoststate_missing": Case(_hoststate_missing, "record_missing", "required_records"),
    "scripted_with_worker": Case(_scripted_with_worker, "policy_mismatch", "policy_records"),
    "placement_contradicts": Case(_placement_contradicts, "placement_mismatch", "placement"),
    "channel_not_the_placements": Case(
        _channel_not_the_placements, "placement_mismatch", "placement"
    ),
    "turn_reference": Case(_turn_reference, "reference_mismatch", "turn_references"),
    "tool_call_reference": Case(_tool_call_reference, "reference_mismatch", "tool_call_references"),
    "model_reference": Case(_model_reference, "reference_mismatch", "model_reference"),
    "model_cache_key": Case(_model_cache_key, "reference_mismatch", "model_cache_key"),
    "verification_inconsistent": Case(
        _verification_inconsistent, "verification_inconsistent", "verification_counts"
    ),
    "version_mismatch": Case(_verification_relabelled, "version_mismatch", "versions"),
    "record_relabelled": Case(_tool_call_relabelled(), "version_mismatch", "format"),
    "unknown_harness_version": Case(_unknown_harness_version, "version_mismatch", "format"),
    "legacy_under_require_current": Case(
        _tool_call_relabelled(current=False),
        "legacy_format",
        "require_current",
        require_current=True,
    ),
    "confinement_inconsistent": Case(
        _confinement_inconsistent, "confinement_inconsistent", "confinement"
    ),
    "loop_of_another_version": Case(
        _agent_identity(agent_version="0.4.0"), "version_mismatch", "agent_identity"
    ),
    "cli_not_pinned": Case(
        _agent_identity(agent="opencode", agent_version="1.18.33", agent_sha256="0" * 64),
        "reference_mismatch",
        "agent_identity",
    ),
    "cli_version_not_pinned": Case(
        _agent_identity(
            agent="opencode", agent_version="1.18.34", agent_sha256=OPENCODE_1_18_33.sha256
        ),
        "reference_mismatch",
        "agent_identity",
    ),
    "oom_inconsistent": Case(_oom_inconsistent, "oom_inconsistent", "oom"),
    "backend_contradicts": Case(_backend_contradicts, "backend_mismatch", "backend"),
    "snapshot_of_another_image": Case(
        _snapshot_of_another_image, "reference_mismatch", "guest_start"
    ),
    "snapshot_of_another_shape": Case(
        _snapshot_of_another_shape, "reference_mismatch", "guest_start"
    ),
    "snapshot_key_not_its_shape": Case(
        _snapshot_key_not_its_shape, "reference_mismatch", "guest_start"
    ),
    "cold_reason_contradicts": Case(_cold_reason_contradicts, "reference_mismatch", "guest_start"),
    "cleanup_dropped": Case(_cleanup_dropped, "cleanup_missing", "cleanup_coverage"),
    "qemu_end_not_reaped": Case(_qemu_end_not_reaped, "reference_mismatch", "qemu_end"),
    "scratch_receipt_dropped": Case(
        _scratch_receipt_dropped, "cleanup_missing", "cleanup_coverage"
    ),
    "verifier_lost_but_passed": Case(
        _verifier_lost_but_passed, "verifier_inconsistent", "verifier_vm"
    ),
    "own_tag_excluded": Case(_own_tag_excluded, "exclusion_inconsistent", "host_state_exclusions"),
    "timing": Case(_timing, "timing_inconsistent", "timing"),
}


def _categories(
    data: bytes, disabled: frozenset[str] = frozenset(), *, require_current: bool = False
) -> set[str]:
    result = audit_bytes(data, disabled, require_current=require_current)
    return {finding.category for finding in result.findings}


@pytest.fixture(scope="module")
def tampered() -> dict[str, bytes]:
    return {name: case.build() for name, case in CASES.items()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_tamper_is_refused_with_its_category(name: str, tampered: dict[str, bytes]) -> None:
    result = audit_bytes(tampered[name], require_current=CASES[name].require_current)
    assert not result.valid
    assert CASES[name].category in {f.category for f in result.findings}
    assert (
        result.derived_verdict is None
        or CASES[name].rule
        in {
            "verdict_claim",
            "failed_stage_claim",
        }
        or not result.valid
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_is_load_bearing(name: str, tampered: dict[str, bytes]) -> None:
    """Mutation control: with its rule disabled, the tamper test above would fail."""
    case = CASES[name]
    disabled = frozenset({case.rule})
    assert case.category not in _categories(
        tampered[name], disabled, require_current=case.require_current
    )


def test_every_rule_has_a_tamper_case() -> None:
    assert {case.rule for case in CASES.values()} == set(ALL_RULES)


def test_untampered_receipts_are_valid() -> None:
    for records in (accepted_model_trial(), accepted_scripted_trial()):
        result = audit_bytes(bundle_bytes(records))
        assert result.valid, result.findings
        assert result.derived_verdict == "accepted"


def test_a_receipt_of_the_current_version_is_valid_and_current() -> None:
    """The untampered form of the format cases, with and without --require-current."""
    data = bundle_bytes(accepted_model_trial())
    for require_current in (False, True):
        result = audit_bytes(data, require_current=require_current)
        assert result.valid, result.findings


def test_a_legacy_receipt_with_a_mixed_format_is_read_unless_current_is_required() -> None:
    """What the legacy version still allows, and what --require-current refuses."""
    data = _tool_call_relabelled(current=False)()
    assert audit_bytes(data).valid
    result = audit_bytes(data, require_current=True)
    assert [(f.category, f.entry) for f in result.findings] == [
        ("legacy_format", "tool_calls/000000.json")
    ]


def test_a_pinned_cli_as_the_agent_is_valid() -> None:
    """The untampered form of the identity cases: OpenCode's pinned version and digest."""
    records = accepted_model_trial()
    assert records.agent is not None
    agent = replace(
        records.agent,
        agent="opencode",
        agent_version=OPENCODE_1_18_33.version,
        agent_sha256=OPENCODE_1_18_33.sha256,
    )
    result = audit_bytes(bundle_bytes(with_changes(records, agent=agent)))
    assert result.valid, result.findings


def test_truthful_crash_and_oom_receipts_are_valid() -> None:
    """The untampered forms of the crash and OOM cases: valid receipts of failed trials."""
    records = accepted_model_trial()
    assert records.trial is not None and records.vm is not None
    crashed = with_changes(
        records,
        trial=replace(
            records.trial,
            failed_stage="agent",
            internal_error_stage="agent",
            verdict="failed_internal",
        ),
        agent=None,
        verification=None,
        verifier_vm=None,
        agent_turns=(),
        tool_calls=(),
    )
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
    for story, verdict in ((crashed, "failed_internal"), (oom, "failed_oom")):
        result = audit_bytes(bundle_bytes(story))
        assert result.valid, result.findings
        assert result.derived_verdict == verdict


def test_attacker_entry_names_are_never_echoed(tampered: dict[str, bytes]) -> None:
    findings = audit_bytes(tampered["parent_traversal"]).findings
    assert [f.entry for f in findings if f.category == "unsafe_entry_name"] == [None]
    assert all(f.entry_index is not None for f in findings if f.category == "unsafe_entry_name")


def test_symlink_mode_constant_is_not_the_file_mode() -> None:
    assert FILE_MODE >> 12 == 0o10


def test_host_state_change_is_a_valid_receipt_with_a_failing_verdict() -> None:
    from receipts.records import FacetComparison

    records = accepted_model_trial()
    assert records.trial is not None
    changed = FacetComparison(
        before_sha256="1" * 64,
        after_sha256="2" * 64,
        result="changed",
        raw_bytes="differ",
        excluded_before=0,
        excluded_after=0,
        unrelated_before=0,
        unrelated_after=0,
    )
    records = dataclasses.replace(
        records,
        hoststate=hoststate(listening_sockets=changed),
        trial=replace(records.trial, verdict="failed_host_state"),
    )
    result = audit_bytes(bundle_bytes(records))
    assert result.valid, result.findings
    assert result.derived_verdict == "failed_host_state"
