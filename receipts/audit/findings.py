"""What an audit can find, as closed categories, and the closed audit result."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from receipts.failure import FailureCategory, Remedy
from receipts.records.base import Part, Record
from receipts.records.trial import Policy, Stage, Verdict
from receipts.recordset import ENTRY_NAME_PATTERN
from receipts.types import Index, Sha256Hex
from receipts.vocabulary import Channel, Placement

AuditCategory = Literal[
    # container integrity
    "zip_malformed",
    "zip_truncated",
    "zip_oversize",
    "too_many_entries",
    "unsafe_entry_name",
    "directory_entry",
    "duplicate_entry",
    "symlink_entry",
    "special_entry",
    "encrypted_entry",
    "compressed_entry",
    "entry_oversize",
    "entry_size_inconsistent",
    "local_header_mismatch",
    "crc_mismatch",
    "unknown_entry",
    "manifest_missing",
    "manifest_invalid",
    "manifest_digest_mismatch",
    "manifest_lists_absent_entry",
    "entry_not_in_manifest",
    "json_invalid",
    "json_duplicate_key",
    "json_non_finite",
    "json_not_canonical",
    "container_not_canonical",
    "sequence_gap",
    # schemas
    "schema_mismatch",
    "schema_extra_field",
    "schema_missing_field",
    "schema_violation",
    "index_mismatch",
    # cross-record consistency
    "record_missing",
    "record_unexpected",
    "failed_stage_mismatch",
    "verdict_mismatch",
    "policy_mismatch",
    "placement_mismatch",
    "count_mismatch",
    "reference_mismatch",
    "verification_inconsistent",
    "confinement_inconsistent",
    "oom_inconsistent",
    "verifier_inconsistent",
    "cleanup_missing",
    "backend_mismatch",
    "exclusion_inconsistent",
    "timing_inconsistent",
    "version_mismatch",
]

Phase = Literal["integrity", "schema", "consistency"]

SafeEntryName = Annotated[str, StringConstraints(pattern=ENTRY_NAME_PATTERN)]


class Finding(Part):
    """One failed rule. `entry` is set only for names of the receipt format (an attacker's
    entry name is never echoed); `entry_index` is the position in the central directory."""

    phase: Phase
    rule: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z_]{1,40}$")]
    category: AuditCategory
    entry: SafeEntryName | None
    entry_index: Index | None


MAX_FINDINGS = 1000


class AuditResult(Record):
    """`failed_stage` / `failed_category`: the first failed required stage of a valid
    receipt and its closed category (receipts/failure.py); `remedy`: what an operator
    can do on the host about it, when anything (harness/remedies.py names the command).
    All three are null for an invalid receipt and for a verdict decided after the stages.
    It is an output, never read back, so only its current version exists: `/3` (`/2`
    had no `accepted_unguarded` verdict and no `version_mismatch` finding)."""

    schema_: Literal["harness.audit.result/5"] = Field("harness.audit.result/5", alias="schema")
    valid: bool
    zip_sha256: Sha256Hex
    receipt_id: Sha256Hex | None
    claimed_verdict: Verdict | None
    derived_verdict: Verdict | None
    policy: Policy | None
    placement: Placement | None
    channel: Channel | None
    findings: Annotated[tuple[Finding, ...], Field(max_length=MAX_FINDINGS)]
    findings_truncated: bool
    failed_stage: Stage | None
    failed_category: FailureCategory | None
    remedy: Remedy | None

    @model_validator(mode="after")
    def _failure_is_whole(self) -> AuditResult:
        if (self.failed_stage is None) != (self.failed_category is None):
            raise ValueError("a failed stage and its category come together")
        if self.remedy is not None and self.failed_stage is None:
            raise ValueError("a remedy belongs to a failed stage")
        return self
