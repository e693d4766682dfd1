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

SignatureRefusal = Literal[
    "signature_missing",
    "signature_unreadable",
    "signature_invalid",
    "statement_invalid",
    "subject_mismatch",
    "predicate_mismatch",
]
"""Why a receipt checked against a key is not vouched for by it: no envelope beside it;
an envelope that is not one (size, JSON, DSSE shape); no signature in it that the key
verifies; a signed payload that is not our Statement; a Statement about other bytes; a
predicate that says something the receipt's records do not."""

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
    "legacy_format",
    # the signature (only with a key to check it against: receipts/signing.py)
    SignatureRefusal,
]

SignatureState = Literal["unsigned", "signed", "refused"]
"""`unsigned`: no key was given, so nothing was checked and nothing says who wrote the
receipt; `signed`: the key given signed a Statement about exactly these bytes, which the
records bear out (`signed_by` is the key's fingerprint); `refused`: a key was given and
the finding says why it does not vouch for the receipt."""

Phase = Literal["integrity", "schema", "consistency", "signature"]

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

    schema_: Literal["harness.audit.result/6"] = Field("harness.audit.result/6", alias="schema")
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
    signature: SignatureState
    signed_by: Sha256Hex | None

    @model_validator(mode="after")
    def _failure_is_whole(self) -> AuditResult:
        if (self.failed_stage is None) != (self.failed_category is None):
            raise ValueError("a failed stage and its category come together")
        if self.remedy is not None and self.failed_stage is None:
            raise ValueError("a remedy belongs to a failed stage")
        if self.signature == "signed" and self.signed_by is None:
            raise ValueError("a signed receipt names its signer")
        if self.signature == "unsigned" and self.signed_by is not None:
            raise ValueError("an unsigned receipt names no signer")
        return self
