"""Older versions of the record kinds: read by the audit, never written.

A receipt written by an older harness stays auditable. Each old version is its own
closed model, so a record carrying another version's fields, or missing its own, is
refused like any other malformed record. `LEGACY` lists a trial's by record kind (the
receipt's entry name; receipts/recordset.py reads it); `suite.json`'s one old version is
read by receipts/audit/suite.py. The bundle writer refuses them (and the suite writer
takes a current `SuiteRecord` only), so no new receipt carries one. The functions
beside them give an old record its meaning where a reader asks what that version did
not record: a `trial/1` was never cancelled, a `hoststate/1` left nothing out, a
`suite/1` consumed no ticket.

Where an old version's vocabulary is the part its current one extends (`VerdictV1`,
`PolicyV1`, `AgentCategoryV1`, `DispatchCategoryV1`), it stays in the live module as
that part (`VerdictV3` and `VerificationCategoryV3` likewise); `WorkerErrorCodeV1`, in
its own order, is here.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, model_validator

from receipts.records.agent import (
    AgentCategoryV1,
    AgentCategoryV2,
    AgentRecord,
    CgroupEnd,
    DispatchRefusal,
    EditMatch,
    JailRefusal,
    LoopToolName,
    LoopToolOutcome,
    NetIsolation,
    PermissionSource,
    PermissionVerdict,
    RunExit,
    ToolCallRecord,
)
from receipts.records.base import Part, Record
from receipts.records.dispatch import DispatchCategoryV1, DispatchRecord
from receipts.records.hostreading import HOST_READINGS
from receipts.records.hoststate import Comparison, FacetComparison, HostStateRecord
from receipts.records.memory import MemoryRecord
from receipts.records.model import ModelFields, ModelRecord
from receipts.records.suite import SuiteFields, SuiteMember, SuiteRecord, VerdictCount
from receipts.records.trial import (
    Policy,
    PolicyV1,
    Stage,
    TrialFields,
    TrialRecord,
    VerdictV1,
    VerdictV3,
)
from receipts.records.verification import (
    VERIFICATION_HOST_READINGS,
    JudgedFields,
    VerificationCategoryV3,
    VerificationFields,
    VerificationRecord,
)
from receipts.records.vm import (
    GuestStart,
    QemuEnd,
    VerifierPrepared,
    VerifierVmRecord,
    VmRecord,
    _GuestVm,
    _GuestVmV1,
)
from receipts.records.worker import (
    Admission,
    ConstraintBackend,
    DecidingScope,
    RequestOutcome,
    WorkerFieldsV1,
    WorkerRecord,
    WorkerRequestFieldsV2,
    WorkerRequestRecord,
)
from receipts.types import (
    ByteCount,
    Count,
    GitObjectId,
    Identifier,
    Index,
    Millis,
    Sha256Hex,
    TrialId,
    TrialTag,
    UnixMillis,
    Version,
)
from receipts.vocabulary import AccelRequest, Backend, Channel, Placement

# ---- trial ---------------------------------------------------------------------------


class TrialRecordV3(TrialFields):
    """`trial/3`, written before an unguarded pass had its own verdict (a pass judged in
    the solution's process was `accepted`); read by the audit only. It makes `/4`'s
    promise of a `trial_scratch` cleanup receipt."""

    schema_: Literal["harness.receipt.trial/3"] = Field("harness.receipt.trial/3", alias="schema")
    verdict: VerdictV3


class TrialRecordV2(TrialFields):
    """The trial record before the trial's own scratch directory had a cleanup receipt,
    read by the audit only (never written)."""

    schema_: Literal["harness.receipt.trial/2"] = Field("harness.receipt.trial/2", alias="schema")
    verdict: VerdictV3


class TrialRecordV1(Record):
    """The trial record before cancellation existed, read by the audit only (never
    written): exactly its old fields. A `/1` trial was never cancelled."""

    schema_: Literal["harness.receipt.trial/1"] = Field("harness.receipt.trial/1", alias="schema")
    trial_id: TrialId
    harness_version: Version
    profile: Identifier
    task: Identifier
    policy: PolicyV1
    backend: Backend
    accel_requested: AccelRequest
    placement: Placement
    channel: Channel
    dispatched: bool
    started_unix_ms: UnixMillis
    ended_unix_ms: UnixMillis
    failed_stage: Stage | None
    internal_error_stage: Stage | None
    """The stage in which the harness itself failed unexpectedly (a defect of ours, not a
    category of the thing under test); None when it did not. Its record and every later
    stage's are absent, and the verdict is `failed_internal`: a claim that can only make
    the verdict worse, never hide a recorded failure before it."""
    verdict: VerdictV1


AnyTrialRecord = TrialRecord | TrialRecordV3 | TrialRecordV2 | TrialRecordV1
"""A trial record of any version the audit reads."""


def cancelled_stage(record: AnyTrialRecord) -> Stage | None:
    """The stage a stop signal cancelled; never one for a `/1` record."""
    return record.cancelled_stage if not isinstance(record, TrialRecordV1) else None


def promises_scratch_receipt(record: AnyTrialRecord) -> bool:
    """`/3` and later promise a `trial_scratch` cleanup receipt; `/2` and `/1` may predate
    it."""
    return isinstance(record, TrialRecord | TrialRecordV3)


# ---- dispatch ------------------------------------------------------------------------


class DispatchRecordV1(Record):
    """dispatch/1, as written before suite tickets: still read by the audit."""

    schema_: Literal["harness.receipt.dispatch/1"] = Field(
        "harness.receipt.dispatch/1", alias="schema"
    )
    category: DispatchCategoryV1
    dispatch_sha256: Sha256Hex
    """Digest of the canonical dispatch receipt that was consumed."""
    profile: Identifier
    task: Identifier
    commit: GitObjectId
    tree: GitObjectId
    issued_unix_ms: UnixMillis
    consumed_unix_ms: UnixMillis | None
    duration_ms: Millis


AnyDispatchRecord = DispatchRecord | DispatchRecordV1


# ---- agent ---------------------------------------------------------------------------


class AgentRecordV2(Record):
    """The agent record before it named whose code the agent was (every agent was the
    harness's own loop); read by the audit only."""

    schema_: Literal["harness.receipt.agent/2"] = Field("harness.receipt.agent/2", alias="schema")
    category: AgentCategoryV2
    policy: Policy
    turns: Count
    tool_calls: Count
    invalid_tool_calls: Count
    prompt_tokens_total: Count
    completion_tokens_total: Count
    processes_left: Count | None
    agent_cgroup: CgroupEnd
    duration_ms: Millis

    @model_validator(mode="after")
    def _survivors_are_a_breach(self) -> AgentRecordV2:
        if self.category in HOST_READINGS:
            if self.processes_left is not None or self.agent_cgroup != "unread":
                raise ValueError("a host reading read nothing of the guest's confinement")
            return self
        clean = self.processes_left == 0 and self.agent_cgroup == "emptied"
        if not clean and self.category != "confinement_breached":
            raise ValueError("anything left of the agent's code is confinement_breached")
        return self


class AgentRecordV1(Record):
    """The agent record before confinement was recorded; read by the audit only."""

    schema_: Literal["harness.receipt.agent/1"] = Field("harness.receipt.agent/1", alias="schema")
    category: AgentCategoryV1
    policy: PolicyV1
    turns: Count
    tool_calls: Count
    invalid_tool_calls: Count
    prompt_tokens_total: Count
    completion_tokens_total: Count
    duration_ms: Millis


ToolRefusalV2 = Literal[
    "binary_file",
    "file_too_large",
    "content_too_large",
    "empty_old_string",
    "old_string_equals_new_string",
    "old_string_not_found",
    "multiple_matches",
    "invalid_pattern",
    "pattern_too_long",
    "spawn_failed",
    "net_isolation_unavailable",
    "deadline_exceeded",
]
"""A tool's own refusals up to tool_call/2 (an edit did not need a read first)."""

ToolOutcomeV2 = Literal["ok", JailRefusal, ToolRefusalV2, DispatchRefusal]


class ToolCallRecordV3(Record):
    """The tool call record before agent CLIs: the harness loop's tools only; read by the
    audit only."""

    schema_: Literal["harness.receipt.tool_call/3"] = Field(
        "harness.receipt.tool_call/3", alias="schema"
    )
    index: Index
    turn: Index
    tool: LoopToolName
    decision: PermissionVerdict
    decided_by: PermissionSource
    rule_index: Index | None
    outcome: LoopToolOutcome
    edit_match: EditMatch | None
    run_exit: RunExit | None
    net_isolation: NetIsolation | None
    cgroup_end: CgroupEnd | None
    output_bytes: ByteCount
    truncated: bool
    duration_ms: Millis

    @model_validator(mode="after")
    def _cgroup_end_for_runs(self) -> ToolCallRecordV3:
        ran = self.tool == "run_tests" and self.run_exit is not None
        if (self.cgroup_end is not None) != ran:
            raise ValueError("cgroup_end is present exactly for a run_tests that ran")
        return self


class ToolCallRecordV2(Record):
    """The tool call record before an edit needed a read of its file; read by the audit only."""

    schema_: Literal["harness.receipt.tool_call/2"] = Field(
        "harness.receipt.tool_call/2", alias="schema"
    )
    index: Index
    turn: Index
    tool: LoopToolName
    decision: PermissionVerdict
    decided_by: PermissionSource
    rule_index: Index | None
    outcome: ToolOutcomeV2
    edit_match: EditMatch | None
    run_exit: RunExit | None
    net_isolation: NetIsolation | None
    cgroup_end: CgroupEnd | None
    output_bytes: ByteCount
    truncated: bool
    duration_ms: Millis

    @model_validator(mode="after")
    def _cgroup_end_for_runs(self) -> ToolCallRecordV2:
        ran = self.tool == "run_tests" and self.run_exit is not None
        if (self.cgroup_end is not None) != ran:
            raise ValueError("cgroup_end is present exactly for a run_tests that ran")
        return self


class ToolCallRecordV1(Record):
    """The tool call record before confinement was recorded; read by the audit only."""

    schema_: Literal["harness.receipt.tool_call/1"] = Field(
        "harness.receipt.tool_call/1", alias="schema"
    )
    index: Index
    turn: Index
    tool: LoopToolName
    decision: PermissionVerdict
    decided_by: PermissionSource
    rule_index: Index | None
    outcome: ToolOutcomeV2
    edit_match: EditMatch | None
    run_exit: RunExit | None
    net_isolation: NetIsolation | None
    output_bytes: ByteCount
    truncated: bool
    duration_ms: Millis


AnyAgentRecord = AgentRecord | AgentRecordV2 | AgentRecordV1
AnyToolCallRecord = ToolCallRecord | ToolCallRecordV3 | ToolCallRecordV2 | ToolCallRecordV1


# ---- worker --------------------------------------------------------------------------

WorkerErrorCodeV1 = Literal[
    "body_too_large",
    "content_length_required",
    "invalid_content_length",
    "invalid_http_request",
    "invalid_json",
    "duplicate_key",
    "non_finite_number",
    "invalid_request",
    "unsupported_tool_schema",
    "model_not_found",
    "context_length_exceeded",
    "queue_full",
    "insufficient_memory_headroom",
    "headroom_unread",
    "memory_pressure",
    "deadline_exceeded",
    "client_disconnected",
    "shutting_down",
    "invalid_model_output",
    "constraint_unavailable",
    "internal_error",
]
"""The error codes of worker_request/1."""


class WorkerRequestRecordV1(Record):
    """Version 1: written before the worker recorded how tools reached the model; the
    audit still reads it (`Kind.legacy`)."""

    schema_: Literal["harness.receipt.worker_request/1"] = Field(
        "harness.receipt.worker_request/1", alias="schema"
    )
    index: Index
    admission: Admission
    headroom_bytes: ByteCount | None
    need_bytes: ByteCount
    floor_bytes: ByteCount
    guard_bytes: ByteCount
    deciding_scope: DecidingScope | None
    outcome: RequestOutcome
    error_code: WorkerErrorCodeV1 | None
    http_status: Annotated[int, Field(ge=100, le=599)]
    stream: bool
    constraint_backend: ConstraintBackend
    prompt_tokens: Count
    cached_prompt_tokens: Count
    completion_tokens: Count
    time_to_first_token_ms: Millis | None
    decode_ms: Millis
    min_headroom_bytes: ByteCount | None
    duration_ms: Millis


class WorkerRequestRecordV2(WorkerRequestFieldsV2):
    """Version 2: written before the worker recorded which cap cut an output (`cut`) and
    refused an array at its item cap; the audit still reads it."""

    schema_: Literal["harness.receipt.worker_request/2"] = Field(
        "harness.receipt.worker_request/2", alias="schema"
    )


AnyWorkerRequestRecord = WorkerRequestRecord | WorkerRequestRecordV2 | WorkerRequestRecordV1


class WorkerRecordV1(WorkerFieldsV1):
    """Version 1: written before the worker counted the connections its server refused
    (`connections_refused`); the audit still reads it."""

    schema_: Literal["harness.receipt.worker/1"] = Field("harness.receipt.worker/1", alias="schema")


AnyWorkerRecord = WorkerRecord | WorkerRecordV1


# ---- model ---------------------------------------------------------------------------


class ModelRecordV1(ModelFields):
    """Version 1: the same fields as /2, but written both before and after the model's
    preparation became one pass over the bytes, so its timings do not say what they
    covered: before it, `verify_source_ms` included hashing every weights shard and
    `verify_gguf_ms` the whole written GGUF's verification; after it, as `model/2`
    says. Read by the audit; its timings are shown, never compared with `model/2`'s."""

    schema_: Literal["harness.receipt.model/1"] = Field("harness.receipt.model/1", alias="schema")


AnyModelRecord = ModelRecord | ModelRecordV1


# ---- memory --------------------------------------------------------------------------


class HeadroomSample(Part):
    at_ms: Millis
    """Milliseconds since the trial started."""
    headroom_bytes: ByteCount
    deciding_scope: DecidingScope


class MemoryRecordV1(Record):
    schema_: Literal["harness.receipt.memory/1"] = Field("harness.receipt.memory/1", alias="schema")
    interval_ms: Annotated[int, Field(ge=1, le=60_000)]
    samples: Annotated[tuple[HeadroomSample, ...], Field(max_length=1000)]


AnyMemoryRecord = MemoryRecord | MemoryRecordV1


# ---- host state ----------------------------------------------------------------------


class FacetComparisonV2(Part):
    """One facet as `harness.receipt.hoststate/2` recorded it: no counts of items that
    belonged to no trial (that harness compared them all).

    Digests of its normalized canonical form before and after, and the result.

    `raw_bytes` reports separately whether the un-normalized bytes differed, so a
    normalization that hides a real change can be seen; `not_compared` for facets
    whose raw bytes are not kept apart (their digest is over parsed rows).

    `excluded_before` / `excluded_after`: items left out of that snapshot because they
    provably belonged to another trial that was alive then (its lease held; a cgroup
    named for it, a listening socket held only by its processes). The digests and the
    result are over what remained. Only `cgroups` and `listening_sockets` exclude.
    """

    before_sha256: Sha256Hex | None
    after_sha256: Sha256Hex | None
    result: Comparison
    raw_bytes: Literal["same", "differ", "unread", "not_compared"]
    excluded_before: Count
    excluded_after: Count


class HostStateRecordV2(Record):
    """The record of `harness.receipt.hoststate/2`, read by the audit only (never written).

    `excluded_trials`: the tags of the other live trials whose items some facet left
    out (sorted, unique); empty exactly when nothing was left out. The audit refuses
    this trial's own tag here (a trial cannot excuse what it left behind)."""

    schema_: Literal["harness.receipt.hoststate/2"] = Field(
        "harness.receipt.hoststate/2", alias="schema"
    )
    routes: FacetComparisonV2
    resolver: FacetComparisonV2
    listening_sockets: FacetComparisonV2
    cgroups: FacetComparisonV2
    firewall: FacetComparisonV2
    excluded_trials: Annotated[tuple[TrialTag, ...], Field(max_length=64)]

    def facets(self) -> tuple[FacetComparisonV2, ...]:
        return (self.routes, self.resolver, self.listening_sockets, self.cgroups, self.firewall)

    @model_validator(mode="after")
    def _exclusions_are_accounted(self) -> HostStateRecordV2:
        if self.excluded_trials != tuple(sorted(set(self.excluded_trials))):
            raise ValueError("excluded_trials is sorted and unique")
        never = (self.routes, self.resolver, self.firewall)
        if any(f.excluded_before or f.excluded_after for f in never):
            raise ValueError("only cgroups and listening sockets exclude items")
        excluded = any(f.excluded_before or f.excluded_after for f in self.facets())
        if excluded != bool(self.excluded_trials):
            raise ValueError("excluded_trials is non-empty exactly when items were excluded")
        return self


class FacetComparisonV1(Part):
    """One facet as `harness.receipt.hoststate/1` recorded it: digests, result and raw-bytes
    reading, with no exclusion counts (that harness left nothing out of a snapshot)."""

    before_sha256: Sha256Hex | None
    after_sha256: Sha256Hex | None
    result: Comparison
    raw_bytes: Literal["same", "differ", "unread", "not_compared"]


class HostStateRecordV1(Record):
    """The host-state record before exclusions existed, read by the audit only (never
    written). Exactly its old fields: a `/1` record is a comparison over everything each
    snapshot saw."""

    schema_: Literal["harness.receipt.hoststate/1"] = Field(
        "harness.receipt.hoststate/1", alias="schema"
    )
    routes: FacetComparisonV1
    resolver: FacetComparisonV1
    listening_sockets: FacetComparisonV1
    cgroups: FacetComparisonV1
    firewall: FacetComparisonV1

    def facets(self) -> tuple[FacetComparisonV1, ...]:
        return (self.routes, self.resolver, self.listening_sockets, self.cgroups, self.firewall)


AnyHostStateRecord = HostStateRecord | HostStateRecordV2 | HostStateRecordV1
"""A host-state record of any version the audit reads."""


def excluded_trials(record: AnyHostStateRecord) -> tuple[str, ...]:
    """The other live trials whose items the snapshots left out; none for `/1`, whose
    harness excluded nothing (so `/1` can never excuse anything, this trial's or another's)."""
    if isinstance(record, HostStateRecord | HostStateRecordV2):
        return record.excluded_trials
    return ()


AnyFacetComparison = FacetComparison | FacetComparisonV2 | FacetComparisonV1


def facet_exclusions(facet: AnyFacetComparison) -> tuple[int, int]:
    """How many items the before and after snapshots left out of this facet as other
    live trials'; (0, 0) for a `/1` facet, which had nothing left out."""
    if isinstance(facet, FacetComparison | FacetComparisonV2):
        return facet.excluded_before, facet.excluded_after
    return 0, 0


def facet_unrelated(facet: AnyFacetComparison) -> tuple[int, int]:
    """How many items the before and after snapshots left out of this facet as no trial's;
    (0, 0) before `/3`, whose harness compared them all."""
    if isinstance(facet, FacetComparison):
        return facet.unrelated_before, facet.unrelated_after
    return 0, 0


# ---- verification --------------------------------------------------------------------


class VerificationRecordV3(JudgedFields):
    """verification/3, before the verifier refused a task the solution could read; its
    pass judged in process made the trial `accepted`. Read by the audit only."""

    schema_: Literal["harness.receipt.verification/3"] = Field(
        "harness.receipt.verification/3", alias="schema"
    )
    category: VerificationCategoryV3


class VerificationRecordV2(VerificationFields):
    """The verification record before the judge's process was recorded (every hidden
    test command ran with the agent's code inside it); read by the audit only."""

    schema_: Literal["harness.receipt.verification/2"] = Field(
        "harness.receipt.verification/2", alias="schema"
    )
    category: VerificationCategoryV3


class VerificationRecordV1(Record):
    """The verification record before the report's test IDs, the workspace digest and the
    suspicious-change flags were recorded; read by the audit only (never written)."""

    schema_: Literal["harness.receipt.verification/1"] = Field(
        "harness.receipt.verification/1", alias="schema"
    )
    category: VerificationCategoryV3
    result: Literal["passed", "failed"]
    task_sha256: Sha256Hex | None
    """The task the guest verified; None exactly when its record was not read (a host
    reading)."""
    tests_passed: Count
    tests_failed: Count
    tests_errored: Count
    fixture_changed: bool
    """The agent modified a file the task declares as a fixture."""
    files_changed: Count
    final_diff_sha256: Sha256Hex | None
    """None exactly when the record was not read (a host reading)."""
    net_isolation: NetIsolation
    """Whether the hidden tests ran without a network, as read back in their namespace."""
    duration_ms: Millis

    @model_validator(mode="after")
    def _unread_only_when_invalid(self) -> VerificationRecordV1:
        """A digest is absent only in the host's stand-in for a record it could not read
        (any host reading), and that stand-in never passes: otherwise a record without a
        task digest could be accepted."""
        unread = self.category in VERIFICATION_HOST_READINGS
        digests_absent = (self.task_sha256 is None, self.final_diff_sha256 is None)
        if digests_absent != (unread, unread) or (unread and self.result != "failed"):
            raise ValueError("digests are absent exactly when the record was not read")
        return self


AnyVerificationRecord = (
    VerificationRecord | VerificationRecordV3 | VerificationRecordV2 | VerificationRecordV1
)


# ---- suite ---------------------------------------------------------------------------


class SuiteMemberV2(SuiteMember):
    """A member of suite/1 or /2: its verdict is one a trial/3 or older could claim."""

    verdict: VerdictV3 | None


class VerdictCountV2(VerdictCount):
    verdict: VerdictV3


class SuiteFieldsV2(SuiteFields):
    members: Annotated[tuple[SuiteMemberV2, ...], Field(min_length=1, max_length=10_000)]
    verdicts: tuple[VerdictCountV2, ...]


class SuiteRecordV2(SuiteFieldsV2):
    """suite/2, before a member could be `accepted_unguarded`: still read by the audit."""

    schema_: Literal["harness.receipt.suite/2"] = Field("harness.receipt.suite/2", alias="schema")
    dispatch_sha256: Sha256Hex | None


class SuiteRecordV1(SuiteFieldsV2):
    """suite/1, written before suites could be dispatched: still read by the audit."""

    schema_: Literal["harness.receipt.suite/1"] = Field("harness.receipt.suite/1", alias="schema")


AnySuiteRecord = SuiteRecord | SuiteRecordV2 | SuiteRecordV1


def suite_dispatch(record: AnySuiteRecord) -> str | None:
    """The ticket a suite consumed; suite/1 predates suite tickets: none."""
    return None if isinstance(record, SuiteRecordV1) else record.dispatch_sha256


# ---- guests --------------------------------------------------------------------------


class VmRecordV1(_GuestVmV1):
    """`harness.receipt.vm/1`: every guest booted cold, so no `start` was recorded."""

    schema_: Literal["harness.receipt.vm/1"] = Field("harness.receipt.vm/1", alias="schema")


class VerifierVmRecordV1(_GuestVmV1):
    """`harness.receipt.verifier_vm/1`: likewise booted cold, no `start`."""

    schema_: Literal["harness.receipt.verifier_vm/1"] = Field(
        "harness.receipt.verifier_vm/1", alias="schema"
    )


class VerifierVmRecordV2(_GuestVm):
    """`harness.receipt.verifier_vm/2`: every verification guest started after the agent's
    guest was released, so when it was prepared was not recorded."""

    schema_: Literal["harness.receipt.verifier_vm/2"] = Field(
        "harness.receipt.verifier_vm/2", alias="schema"
    )


class VmRecordV2(_GuestVm):
    """`harness.receipt.vm/2`: written before the record said how the guest's QEMU ended
    (`qemu_end`)."""

    schema_: Literal["harness.receipt.vm/2"] = Field("harness.receipt.vm/2", alias="schema")


class VerifierVmRecordV3(_GuestVm):
    """`harness.receipt.verifier_vm/3`: likewise, no `qemu_end`."""

    schema_: Literal["harness.receipt.verifier_vm/3"] = Field(
        "harness.receipt.verifier_vm/3", alias="schema"
    )
    prepared: VerifierPrepared


AnyVmRecord = VmRecord | VmRecordV2 | VmRecordV1
AnyVerifierVmRecord = (
    VerifierVmRecord | VerifierVmRecordV3 | VerifierVmRecordV2 | VerifierVmRecordV1
)


def guest_start(record: AnyVmRecord | AnyVerifierVmRecord) -> GuestStart | None:
    """How a guest started; a `/1` record's guest booted cold, but said nothing of it."""
    return None if isinstance(record, (VmRecordV1, VerifierVmRecordV1)) else record.start


def qemu_end(record: AnyVmRecord | AnyVerifierVmRecord) -> QemuEnd | None:
    """How a guest's QEMU ended; records before `vm/3` and `verifier_vm/4` did not say."""
    return record.qemu_end if isinstance(record, (VmRecord, VerifierVmRecord)) else None


# ---- every old version, by record kind -----------------------------------------------

LEGACY: Final[dict[str, tuple[type[Record], ...]]] = {
    "trial": (TrialRecordV3, TrialRecordV2, TrialRecordV1),
    "vm": (VmRecordV2, VmRecordV1),
    "verifier_vm": (VerifierVmRecordV3, VerifierVmRecordV2, VerifierVmRecordV1),
    "dispatch": (DispatchRecordV1,),
    "agent": (AgentRecordV2, AgentRecordV1),
    "verification": (VerificationRecordV3, VerificationRecordV2, VerificationRecordV1),
    "hoststate": (HostStateRecordV2, HostStateRecordV1),
    "memory": (MemoryRecordV1,),
    "worker_requests": (WorkerRequestRecordV2, WorkerRequestRecordV1),
    "worker": (WorkerRecordV1,),
    "model": (ModelRecordV1,),
    "tool_calls": (ToolCallRecordV3, ToolCallRecordV2, ToolCallRecordV1),
}
"""The older versions of each trial record kind the audit reads, newest first."""
