"""Cross-record consistency: the records must tell one story.

Runs only on a receipt whose every entry passed integrity and schema checks (a rule
over a partial set would report the damage again under another name). Each rule is a
named function so a test can disable it and watch its tamper test fail.
"""

from __future__ import annotations

from collections.abc import Callable

from receipts.agentclis import pinned
from receipts.audit.context import AuditContext
from receipts.claim import may_claim, void_from
from receipts.cleanupset import missing_cleanup
from receipts.formats import FORMATS, LEGACY
from receipts.modelkey import converted_key, wheel_member_key
from receipts.records import AgentRecord, ToolCallRecord, VerificationRecord
from receipts.records.legacy import (
    AnyTrialRecord,
    VerificationRecordV1,
    excluded_trials,
    guest_start,
    qemu_end,
)
from receipts.records.trial import TrialRecord
from receipts.recordset import KIND_BY_NAME, RecordSet, classify_entry, record_entries
from receipts.snapshotkey import snapshot_key
from receipts.totals import agent_totals, worker_totals
from receipts.verdict import derive_verdict, first_failed_stage, required_stages
from receipts.vocabulary import channel_for

Rule = Callable[[AuditContext, AnyTrialRecord, RecordSet], None]


def _required_records(ctx: AuditContext, trial: AnyTrialRecord, records: RecordSet) -> None:
    """Every required stage's record up to the first failure, and none after it: the
    rule the harness bundles by (receipts/claim.py `void_from`)."""
    if records.hoststate is None:
        ctx.add("consistency", "required_records", "record_missing", "hoststate.json")
    void = void_from(records)
    for stage in required_stages(trial):
        present = records.stage_record(stage) is not None
        name = KIND_BY_NAME[stage].entry_name()
        if present and not may_claim(stage, void):
            ctx.add("consistency", "required_records", "record_unexpected", name)
        elif may_claim(stage, void) and not present:
            ctx.add("consistency", "required_records", "record_missing", name)
    if first_failed_stage(records) is None and not records.cleanup:
        ctx.add("consistency", "required_records", "record_missing", "cleanup/000000.json")


def _failed_stage_claim(ctx: AuditContext, trial: AnyTrialRecord, records: RecordSet) -> None:
    if trial.failed_stage != first_failed_stage(records):
        ctx.add("consistency", "failed_stage_claim", "failed_stage_mismatch", "trial.json")


def _verdict_claim(ctx: AuditContext, trial: AnyTrialRecord, records: RecordSet) -> None:
    if trial.verdict != derive_verdict(records):
        ctx.add("consistency", "verdict_claim", "verdict_mismatch", "trial.json")


def _policy_records(ctx: AuditContext, trial: AnyTrialRecord, records: RecordSet) -> None:
    """A scripted trial has no model path at all, so it can never pass for a model result."""
    scripted = trial.policy == "scripted"
    model_evidence = (
        records.model is not None or records.worker is not None or bool(records.worker_requests)
    )
    agent_policy_differs = records.agent is not None and records.agent.policy != trial.policy
    turn_sources_wrong = any(
        (turn.request_index is None) != scripted
        for turn in records.agent_turns
        if turn.kind != "refused"
    )
    if (scripted and model_evidence) or agent_policy_differs or turn_sources_wrong:
        ctx.add("consistency", "policy_records", "policy_mismatch", "trial.json")
    if records.dispatch is not None and not trial.dispatched:
        ctx.add("consistency", "policy_records", "record_unexpected", "dispatch.json")


def _placement(ctx: AuditContext, trial: AnyTrialRecord, records: RecordSet) -> None:
    """The channel is the placement's one channel (receipts/vocabulary.py, the mapping the
    harness writes with), a scripted trial has no worker, and the worker record agrees."""
    consistent = trial.channel == channel_for(trial.placement) and (
        (trial.policy == "scripted") == (trial.placement == "none")
    )
    worker = records.worker
    if worker is not None:
        consistent = consistent and (worker.placement, worker.channel) == (
            trial.placement,
            trial.channel,
        )
    if not consistent:
        ctx.add("consistency", "placement", "placement_mismatch", "trial.json")


def _agent_counts(ctx: AuditContext, _trial: AnyTrialRecord, records: RecordSet) -> None:
    agent = records.agent
    if agent is None:
        return
    counted = agent_totals(records.agent_turns, records.tool_calls)
    if any(getattr(agent, name) != value for name, value in counted.items()):
        ctx.add("consistency", "agent_counts", "count_mismatch", "agent.json")


def _worker_counts(ctx: AuditContext, _trial: AnyTrialRecord, records: RecordSet) -> None:
    worker = records.worker
    if worker is None:
        return
    counted = worker_totals(records.worker_requests)
    if any(getattr(worker, name) != value for name, value in counted.items()):
        ctx.add("consistency", "worker_counts", "count_mismatch", "worker.json")


def _turn_references(ctx: AuditContext, _trial: AnyTrialRecord, records: RecordSet) -> None:
    requests = records.worker_requests
    used: set[int] = set()
    for turn in records.agent_turns:
        if turn.request_index is None:
            continue
        ok = turn.request_index < len(requests) and turn.request_index not in used
        if ok:
            request = requests[turn.request_index]
            ok = (turn.prompt_tokens, turn.completion_tokens) == (
                request.prompt_tokens,
                request.completion_tokens,
            )
        used.add(turn.request_index)
        if not ok:
            name = KIND_BY_NAME["agent_turns"].entry_name(turn.index)
            ctx.add("consistency", "turn_references", "reference_mismatch", name)


def _tool_call_references(ctx: AuditContext, _trial: AnyTrialRecord, records: RecordSet) -> None:
    """Each tool call belongs to its own turn of kind `tool_call`, and each such turn has one."""
    turns = records.agent_turns
    seen: set[int] = set()
    for call in records.tool_calls:
        ok = (
            call.turn < len(turns)
            and turns[call.turn].kind == "tool_call"
            and call.turn not in seen
        )
        seen.add(call.turn)
        if not ok:
            name = KIND_BY_NAME["tool_calls"].entry_name(call.index)
            ctx.add("consistency", "tool_call_references", "reference_mismatch", name)
    if len(seen) != sum(turn.kind == "tool_call" for turn in turns):
        ctx.add("consistency", "tool_call_references", "reference_mismatch", "agent.json")


def _model_reference(ctx: AuditContext, _trial: AnyTrialRecord, records: RecordSet) -> None:
    model, worker = records.model, records.worker
    if model is None or worker is None:
        return
    if model.gguf_sha256 != worker.model_sha256:
        ctx.add("consistency", "model_reference", "reference_mismatch", "worker.json")


def _model_cache_key(ctx: AuditContext, _trial: AnyTrialRecord, records: RecordSet) -> None:
    """The cache key is a digest of the record's own declared inputs: recompute it.

    A converted GGUF's key follows from the pins, the converter and the output type (the
    file type a conversion writes is its output type); an extracted one's from the
    wheel's pins. A key that does not follow names some other entry than the one whose
    inputs the record states.
    """
    model = records.model
    if model is None or model.category != "ok" or model.cache_key is None:
        return
    if model.pin_sha256 is None:
        expected = None
    elif model.conversion == "converted":
        if model.converter_version is None or model.file_type is None:
            expected = None
        else:
            expected = converted_key(model.pin_sha256, model.converter_version, model.file_type)
    else:
        expected = wheel_member_key(model.pin_sha256)
    if model.cache_key != expected:
        ctx.add("consistency", "model_cache_key", "reference_mismatch", "model.json")


def _verification_counts(ctx: AuditContext, _trial: AnyTrialRecord, records: RecordSet) -> None:
    verification = records.verification
    if verification is None:
        return
    clean_pass = (
        verification.category == "ok"
        and verification.tests_passed > 0
        and verification.tests_failed == 0
        and verification.tests_errored == 0
        and not verification.fixture_changed
    )
    if not isinstance(verification, VerificationRecordV1):  # /2 and later: every one of
        # the task's own tests
        clean_pass = (
            clean_pass
            and verification.report_ids == "match"
            and verification.tests_passed == verification.tests_expected
        )
    if (verification.result == "passed") != clean_pass:
        ctx.add(
            "consistency", "verification_counts", "verification_inconsistent", "verification.json"
        )


def _versions(ctx: AuditContext, trial: AnyTrialRecord, records: RecordSet) -> None:
    """A `trial/4` and a `verification/4` come together: a current verification record
    beside an older trial record (or the reverse) is a receipt relabelled in part, and
    an in-process pass would then read as `accepted` instead of `accepted_unguarded`."""
    verification = records.verification
    if verification is None:
        return
    if isinstance(trial, TrialRecord) != isinstance(verification, VerificationRecord):
        ctx.add("consistency", "versions", "version_mismatch", "verification.json")


def _format(ctx: AuditContext, trial: AnyTrialRecord, records: RecordSet) -> None:
    """Every record is of the version the harness version named in `trial.json` writes
    (receipts/formats.py): a receipt relabelled record by record as an older format is
    refused at each relabelled entry. A version no row knows is refused at `trial.json`;
    a legacy version (0.1.0) has no row and only the pairwise rules."""
    version = trial.harness_version
    if version in LEGACY:
        return
    row = FORMATS.get(version)
    if row is None:
        ctx.add("consistency", "format", "version_mismatch", "trial.json")
        return
    for name, record in record_entries(records).items():
        found = classify_entry(name)
        assert found is not None, "record_entries names only kinds"
        if record.schema_id() != row[found[0].name]:
            ctx.add("consistency", "format", "version_mismatch", name)


def _require_current(ctx: AuditContext, _trial: AnyTrialRecord, records: RecordSet) -> None:
    """Only with `--require-current`: every record is of the version this harness writes."""
    if not ctx.require_current:
        return
    for name, record in record_entries(records).items():
        found = classify_entry(name)
        assert found is not None, "record_entries names only kinds"
        if not isinstance(record, found[0].model):
            ctx.add("consistency", "require_current", "legacy_format", name)


def _confinement(ctx: AuditContext, _trial: AnyTrialRecord, records: RecordSet) -> None:
    """A run_tests call whose cgroup was not shown empty means agent code may have
    outlived it: the agent record must then name the breach (agent/2 and tool_call/2;
    older versions recorded nothing of this)."""
    agent = records.agent
    if not isinstance(agent, AgentRecord) or agent.category == "confinement_breached":
        return
    for call in records.tool_calls:
        if isinstance(call, ToolCallRecord) and call.cgroup_end not in (None, "emptied"):
            ctx.add("consistency", "confinement", "confinement_inconsistent", "agent.json")
            return


def _agent_identity(ctx: AuditContext, trial: AnyTrialRecord, records: RecordSet) -> None:
    """Whose code was the agent (agent/3): the harness's own loop is the harness version
    the trial record names (the runtime gate's pin table covers its code); an agent CLI
    is a version and executable digest some harness release pinned (receipts/agentclis.py),
    never a name with whatever digest the writer chose."""
    agent = records.agent
    if not isinstance(agent, AgentRecord):
        return
    if agent.agent == "harness_loop":
        if agent.agent_version != trial.harness_version:
            ctx.add("consistency", "agent_identity", "version_mismatch", "agent.json")
    elif not pinned(agent.agent, agent.agent_version, agent.agent_sha256):
        ctx.add("consistency", "agent_identity", "reference_mismatch", "agent.json")


def _oom(ctx: AuditContext, _trial: AnyTrialRecord, records: RecordSet) -> None:
    vm, worker, verifier = records.vm, records.worker, records.verifier_vm
    if vm is not None and (vm.category == "oom_killed") and not vm.oom_kills:
        ctx.add("consistency", "oom", "oom_inconsistent", "vm.json")
    if verifier is not None and (verifier.category == "oom_killed") and not verifier.oom_kills:
        ctx.add("consistency", "oom", "oom_inconsistent", "verifier_vm.json")
    if worker is not None and (worker.category == "oom_killed") and not worker.oom_kills:
        ctx.add("consistency", "oom", "oom_inconsistent", "worker.json")


def _verifier_vm(ctx: AuditContext, _trial: AnyTrialRecord, records: RecordSet) -> None:
    """The verification guest and the verification record tell one story: a verifier that
    failed (`verifier_vm_failed`) names a verification guest that did not end `ok`; a
    verification guest that did not end `ok` never ran a passing verification; and a
    verification guest exists only where verification ran."""
    guest, verification = records.verifier_vm, records.verification
    lost = guest is not None and guest.category != "ok"
    failed = verification is not None and verification.category == "verifier_vm_failed"
    passed = verification is not None and verification.result == "passed"
    if (failed and not lost) or (lost and passed) or (guest is not None and verification is None):
        ctx.add("consistency", "verifier_vm", "verifier_inconsistent", "verifier_vm.json")


def _backend(ctx: AuditContext, trial: AnyTrialRecord, records: RecordSet) -> None:
    """Each guest ran on the backend the trial names (`--backend`)."""
    for name, guest in (("vm.json", records.vm), ("verifier_vm.json", records.verifier_vm)):
        if guest is not None and guest.backend != trial.backend:
            ctx.add("consistency", "backend", "backend_mismatch", name)


def _guest_start(ctx: AuditContext, _trial: AnyTrialRecord, records: RecordSet) -> None:
    """A restored guest's snapshot is of the image the receipt names and of this guest's
    shape: its key is recomputed from the recorded shape (receipts/snapshotkey.py), the
    shape's image key must be `image.json`'s and its accelerator, memory and vCPUs the
    guest record's own. A cold boot's reason must fit the guest (a `backend_libvirt`
    guest ran on libvirt, an `accelerator_kvm` guest under KVM)."""
    image_key = records.image.image_key if records.image is not None else None
    for name, guest in (("vm.json", records.vm), ("verifier_vm.json", records.verifier_vm)):
        start = guest_start(guest) if guest is not None else None
        if guest is None or start is None:
            continue
        shape = start.shape
        if start.how == "snapshot" and shape is not None:
            fits = (
                shape.image_key == image_key
                and shape.accelerator == guest.accelerator
                and shape.memory_mib << 20 == guest.guest_memory_bytes
                and shape.vcpus == guest.vcpus
                and snapshot_key(**shape.model_dump()) == start.snapshot_key
            )
        else:
            reason = start.cold_boot_reason
            fits = not (
                (reason == "backend_libvirt" and guest.backend != "libvirt")
                or (reason == "accelerator_kvm" and guest.accelerator != "kvm")
            )
        if not fits:
            ctx.add("consistency", "guest_start", "reference_mismatch", name)


def _cleanup_coverage(ctx: AuditContext, _trial: AnyTrialRecord, records: RecordSet) -> None:
    """Every resource the stage records say was owned has its cleanup receipt
    (receipts/cleanupset.py): dropping one is not a shorter story, it is a missing one."""
    if missing_cleanup(records):
        entry = f"cleanup/{len(records.cleanup):06d}.json"
        ctx.add("consistency", "cleanup_coverage", "cleanup_missing", entry)


def _qemu_end(ctx: AuditContext, _trial: AnyTrialRecord, records: RecordSet) -> None:
    """A guest record says how its QEMU ended (`qemu_end`) only where the harness's own
    `waitpid` reaped that QEMU, and that one reaping is also what its `qemu_process`
    cleanup receipt says (`confirmed`, `process_reaped`: host/vm/qemu.py sets both
    together). So every guest that states an end needs such a receipt; counted, as
    cleanup receipts name no guest. A QEMU still present after the kill deadline, or a
    libvirt guest's (libvirtd reaps it: `process_gone`), has no end to state."""
    reaped = sum(
        1
        for receipt in records.cleanup
        if receipt.resource == "qemu_process"
        and receipt.status == "confirmed"
        and receipt.evidence == "process_reaped"
    )
    for name, guest in (("vm.json", records.vm), ("verifier_vm.json", records.verifier_vm)):
        if guest is None or qemu_end(guest) is None:
            continue
        if reaped == 0:
            ctx.add("consistency", "qemu_end", "reference_mismatch", name)
        reaped = max(reaped - 1, 0)


def _host_state_exclusions(ctx: AuditContext, trial: AnyTrialRecord, records: RecordSet) -> None:
    """Host state may leave out another live trial's resources, never this trial's own:
    its tag (the first 16 hex digits of its id) among the excluded would excuse exactly
    what this trial left behind. A `/1` record excluded nothing, so it always passes."""
    hoststate = records.hoststate
    if hoststate is not None and trial.trial_id[:16] in excluded_trials(hoststate):
        ctx.add("consistency", "host_state_exclusions", "exclusion_inconsistent", "hoststate.json")


def _timing(ctx: AuditContext, trial: AnyTrialRecord, _records: RecordSet) -> None:
    if trial.ended_unix_ms < trial.started_unix_ms:
        ctx.add("consistency", "timing", "timing_inconsistent", "trial.json")


RULES: tuple[tuple[str, Rule], ...] = (
    ("required_records", _required_records),
    ("failed_stage_claim", _failed_stage_claim),
    ("verdict_claim", _verdict_claim),
    ("policy_records", _policy_records),
    ("placement", _placement),
    ("agent_counts", _agent_counts),
    ("worker_counts", _worker_counts),
    ("turn_references", _turn_references),
    ("tool_call_references", _tool_call_references),
    ("model_reference", _model_reference),
    ("model_cache_key", _model_cache_key),
    ("verification_counts", _verification_counts),
    ("versions", _versions),
    ("format", _format),
    ("require_current", _require_current),
    ("confinement", _confinement),
    ("agent_identity", _agent_identity),
    ("oom", _oom),
    ("verifier_vm", _verifier_vm),
    ("cleanup_coverage", _cleanup_coverage),
    ("backend", _backend),
    ("guest_start", _guest_start),
    ("qemu_end", _qemu_end),
    ("host_state_exclusions", _host_state_exclusions),
    ("timing", _timing),
)


def check_consistency(ctx: AuditContext, records: RecordSet) -> None:
    trial = records.trial
    if trial is None:
        if ctx.enabled("required_records"):
            ctx.add("consistency", "required_records", "record_missing", "trial.json")
        return
    for name, rule in RULES:
        if ctx.enabled(name):
            rule(ctx, trial, records)
