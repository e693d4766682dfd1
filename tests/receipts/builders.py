"""A complete, consistent set of records for one trial, and ways to bend it.

Tests start from `accepted_model_trial()` (every stage, host placement, two turns) or
`accepted_scripted_trial()` and change one thing, so each test sees exactly one defect.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from harness.version import HARNESS_VERSION
from receipts.modelkey import converted_key
from receipts.records import (
    AgentRecord,
    AgentTurnRecord,
    CleanupRecord,
    FacetComparison,
    GateRecord,
    HostStateRecord,
    ImageRecord,
    ModelRecord,
    PreflightRecord,
    SourceRecord,
    TensorCounts,
    ToolCallRecord,
    TrialRecord,
    VerificationRecord,
    VerifierVmRecord,
    VmRecord,
    WorkerRecord,
    WorkerRequestRecord,
)
from receipts.records.base import Record
from receipts.records.vm import ColdBootReason, GuestStart, QemuEnd, SnapshotShapeRecord
from receipts.records.worker import ConnectionRefusals
from receipts.recordset import RecordSet
from receipts.snapshotkey import snapshot_key

GGUF = "a" * 64
D1, D2, D3 = "1" * 64, "2" * 64, "3" * 64


def replace(record: Record, **changes: Any) -> Any:
    """A copy of a frozen record with fields changed, validated again."""
    data = record.model_dump(by_alias=True)
    data.update(changes)
    return type(record).model_validate(data)


def _unchanged() -> FacetComparison:
    return FacetComparison(
        before_sha256=D1,
        after_sha256=D1,
        result="unchanged",
        raw_bytes="same",
        excluded_before=0,
        excluded_after=0,
        unrelated_before=0,
        unrelated_after=0,
    )


def hoststate(**facets: FacetComparison) -> HostStateRecord:
    base = {
        name: _unchanged()
        for name in ("routes", "resolver", "listening_sockets", "cgroups", "firewall")
    }
    base.update(facets)
    return HostStateRecord(**base, excluded_trials=())


def _requests() -> tuple[WorkerRequestRecord, ...]:
    return tuple(
        WorkerRequestRecord(
            index=i,
            admission="admitted",
            headroom_bytes=8 << 30,
            need_bytes=64 << 20,
            floor_bytes=512 << 20,
            guard_bytes=256 << 20,
            deciding_scope="self",
            outcome="tool_calls",
            error_code=None,
            http_status=200,
            tools_rendering="template",
            stream=False,
            constraint_backend="llguidance",
            prompt_tokens=100 + i,
            cached_prompt_tokens=0,
            completion_tokens=20 + i,
            time_to_first_token_ms=40,
            decode_ms=200,
            min_headroom_bytes=7 << 30,
            duration_ms=250,
            cut=None,
        )
        for i in range(2)
    )


def _turns(scripted: bool) -> tuple[AgentTurnRecord, ...]:
    return tuple(
        AgentTurnRecord(
            index=i,
            request_index=None if scripted else i,
            kind="tool_call",
            invalid_category=None,
            prompt_tokens=0 if scripted else 100 + i,
            completion_tokens=0 if scripted else 20 + i,
            duration_ms=300,
        )
        for i in range(2)
    )


def _tool_calls() -> tuple[ToolCallRecord, ...]:
    return tuple(
        ToolCallRecord(
            index=i,
            turn=i,
            tool=tool,
            decision="allow",
            decided_by="rule",
            rule_index=0,
            outcome="ok",
            edit_match="exact" if tool == "edit" else None,
            run_exit=None,
            net_isolation=None,
            cgroup_end=None,
            output_bytes=120,
            truncated=False,
            duration_ms=5,
        )
        for i, tool in enumerate(("edit", "finish"))
    )


GUEST_CLEANUP = (
    ("qemu_process", "process_reaped"),
    ("forwarded_port", "port_refusing"),
    ("overlay_disk", "file_absent"),
    ("ssh_keys", "file_absent"),
    ("scratch_dir", "directory_absent"),
)
"""What one guest's release reports, in the order a real trial writes it."""


def _cleanup(*, host_worker: bool = True) -> tuple[CleanupRecord, ...]:
    """The receipts of a real trial with the host worker (placement host): the worker,
    the agent's guest (released before verification), the verification guest, then the
    disks and cgroups of both guests in reverse order of acquisition."""
    worker = (
        (("worker_process", "process_reaped"), ("worker_socket", "file_absent"))
        if host_worker
        else ()
    )
    disks_and_cgroups = (
        ("data_disk", "file_absent"),
        ("cgroup", "cgroup_empty_and_removed"),
        ("data_disk", "file_absent"),
        ("cgroup", "cgroup_empty_and_removed"),
    )
    worker_cgroup = (("cgroup", "cgroup_empty_and_removed"),) if host_worker else ()
    resources = (
        *worker,
        *GUEST_CLEANUP,
        *GUEST_CLEANUP,
        *worker_cgroup,
        *disks_and_cgroups,
        ("trial_scratch", "directory_absent"),  # made first, released last
    )
    return tuple(
        CleanupRecord(
            index=i, resource=r, status="confirmed", evidence=e, released_by="trial", duration_ms=3
        )
        for i, (r, e) in enumerate(resources)
    )


QEMU_BUILD = "QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)"


def restored_start(image_key: str = D1, *, memory_mib: int = 1024, vcpus: int = 2) -> GuestStart:
    """A guest restored from a snapshot of `image_key` the cache already held."""
    shape = SnapshotShapeRecord(
        image_key=image_key,
        accelerator="tcg",
        memory_mib=memory_mib,
        vcpus=vcpus,
        tb_size_mib=64,
        qemu=QEMU_BUILD,
    )
    return GuestStart(
        how="snapshot",
        snapshot_key=snapshot_key(**shape.model_dump()),
        shape=shape,
        found="present",
        make_ms=None,
        cold_boot_reason=None,
    )


def cold_start(reason: ColdBootReason) -> GuestStart:
    return GuestStart(
        how="cold_boot",
        snapshot_key=None,
        shape=None,
        found=None,
        make_ms=None,
        cold_boot_reason=reason,
    )


def _guest(**changes: Any) -> VmRecord:
    """One guest's record as a real TCG trial writes it (`changes` for the second guest)."""
    fields: dict[str, Any] = {
        "category": "ok",
        "backend": "qemu",
        "accelerator": "tcg",
        "accelerator_reason": "probe_failed",
        "guest_memory_bytes": 1 << 30,
        "vcpus": 2,
        "memory_limit_bytes": 2 << 30,
        "swap_limit_bytes": 0,
        "cpu_quota_millicores": 2000,
        "pids_limit": 256,
        "peak_memory_bytes": 900 << 20,
        "oom_kills": 0,
        "host_key_sha256": D3,
        "boot_to_ssh_ms": 6100,
        "duration_ms": 30_000,
        "start": cold_start("worker_channel"),  # the host worker's channel: booted
        "qemu_end": QemuEnd(stop="qmp_quit", exit_code=0, signal=None),  # quit, reaped
    }
    return VmRecord(**{**fields, **changes})


def accepted_model_trial() -> RecordSet:
    requests = _requests()
    turns = _turns(scripted=False)
    return RecordSet(
        trial=TrialRecord(
            trial_id="0123456789abcdef0123456789abcdef",
            harness_version=HARNESS_VERSION,
            profile="tiny",
            task="py-off-by-one",
            policy="model",
            backend="qemu",
            accel_requested="auto",
            placement="host",
            channel="guestfwd_unix",
            dispatched=False,
            started_unix_ms=1_790_000_000_000,
            ended_unix_ms=1_790_000_060_000,
            failed_stage=None,
            internal_error_stage=None,
            cancelled_stage=None,
            cancel_signal=None,
            verdict="accepted",
        ),
        preflight=PreflightRecord(
            category="ok",
            mem_available_bytes=20 << 30,
            memory_floor_bytes=2 << 30,
            disk_free_bytes=50 << 30,
            disk_floor_bytes=5 << 30,
            kvm_device="present",
            accelerator="tcg",
            accelerator_reason="probe_failed",
            cgroup_version="v1",
            duration_ms=900,
        ),
        source=SourceRecord(
            category="ok",
            kind="git",
            commit="c" * 40,
            tree="d" * 40,
            tree_state="clean",
            installed_record_sha256=None,
            duration_ms=20,
        ),
        model=ModelRecord(
            category="ok",
            source_kind="synth",
            pins_from="profile",
            pin_sha256=D2,
            conversion="converted",
            converter_version="1.0.0",
            file_type="bf16",
            tensors=TensorCounts(f32=5, f16=0, bf16=18, q8_0=0, q4_1=0, other=0),
            gguf_size_bytes=1_234_567,
            gguf_sha256=GGUF,
            cache_key=converted_key(D2, "1.0.0", "bf16"),  # audited: follows from the above
            provenance="adopted_from_cache",
            verify_source_ms=4,
            convert_ms=0,
            verify_gguf_ms=12,
        ),
        image=ImageRecord(
            category="ok",
            image_key=D1,
            provenance="adopted_from_cache",
            kernel_package="linux-image-6.1.0-41-amd64",
            kernel_sha256=D2,
            initramfs_sha256=D3,
            base_sha256=D1,
            base_size_bytes=347_000_000,
            build_ms=15,
        ),
        vm=_guest(),
        verifier_vm=VerifierVmRecord.of(
            _guest(
                host_key_sha256=D2,
                peak_memory_bytes=600 << 20,
                boot_to_ssh_ms=1250,
                duration_ms=12_000,
                start=restored_start(),
            ),
            "beside_agent",
        ),
        gate=GateRecord(category="ok", pin_table_sha256=D1, files_verified=57, duration_ms=80),
        worker=WorkerRecord(
            category="ok",
            placement="host",
            channel="guestfwd_unix",
            model_sha256=GGUF,
            constraint_backend="llguidance",
            requests=2,
            admitted=2,
            refused=0,
            prompt_tokens_total=sum(r.prompt_tokens for r in requests),
            completion_tokens_total=sum(r.completion_tokens for r in requests),
            oom_kills=0,
            peak_rss_bytes=300 << 20,
            load_ms=20,
            duration_ms=1000,
            connections_refused=ConnectionRefusals(
                over_limit=0, header_timeout=0, body_timeout=0, unframed=0
            ),
        ),
        agent=AgentRecord(
            category="finished",
            policy="model",
            agent="harness_loop",
            agent_version=HARNESS_VERSION,
            agent_sha256=None,
            turns=2,
            tool_calls=2,
            invalid_tool_calls=0,
            prompt_tokens_total=sum(t.prompt_tokens for t in turns),
            completion_tokens_total=sum(t.completion_tokens for t in turns),
            processes_left=0,
            agent_cgroup="emptied",
            duration_ms=900,
        ),
        verification=VerificationRecord(
            category="ok",
            result="passed",
            task_sha256=D1,
            tests_expected=3,
            report_ids="match",
            tests_passed=3,
            tests_failed=0,
            tests_errored=0,
            fixture_changed=False,
            files_changed=1,
            final_diff_sha256=D2,
            workspace_sha256=D1,
            suspicious_changes=(),
            net_isolation="applied",
            judge="split",
            duration_ms=700,
        ),
        hoststate=hoststate(),
        worker_requests=requests,
        agent_turns=turns,
        tool_calls=_tool_calls(),
        cleanup=_cleanup(),
    )


def accepted_scripted_trial() -> RecordSet:
    base = accepted_model_trial()
    assert base.trial is not None and base.agent is not None
    return dataclasses.replace(
        base,
        trial=replace(base.trial, policy="scripted", placement="none", channel="none"),
        model=None,
        worker=None,
        worker_requests=(),
        agent=replace(
            base.agent, policy="scripted", prompt_tokens_total=0, completion_tokens_total=0
        ),
        agent_turns=_turns(scripted=True),
        cleanup=_cleanup(host_worker=False),
    )


def with_changes(records: RecordSet, **changes: Any) -> RecordSet:
    return dataclasses.replace(records, **changes)


LEGACY_VERSION = "0.1.0"
"""The harness version of receipts from before formats were pinned (receipts/formats.py):
a receipt of older record versions is one of those."""


def legacy(records: RecordSet) -> RecordSet:
    """The same records as a 0.1.0 harness would have claimed them (its loop at 0.1.0 too):
    what a receipt mixing record versions must be to be read at all."""
    assert records.trial is not None
    changes: dict[str, Any] = {"trial": replace(records.trial, harness_version=LEGACY_VERSION)}
    if records.agent is not None and getattr(records.agent, "agent", None) == "harness_loop":
        changes["agent"] = replace(records.agent, agent_version=LEGACY_VERSION)
    return with_changes(records, **changes)
