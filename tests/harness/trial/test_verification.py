"""The verification stage's judging of the verifier's record, without a VM: a fake guest
serves what the verifier wrote (or how its command ended), the real `judge` reads and
cross-checks it, and the real writer and audit take the result.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from guest.task import task_digest
from harness.trial.pipeline import Trial
from harness.trial.verification import judge
from receipts.audit import audit_and_read
from receipts.records import VerificationRecord
from receipts.recordset import RecordSet
from tests.harness.trial.collected import (
    RUNTIME,
    TASKS,
    VERIFIED_TREE,
    audit_exit,
    bundle,
    collect,
    in_guest,
    run_stage,
)
from tests.harness.trial.guestfakes import ENDS, GuestEnded, GuestWrote
from tests.receipts.builders import accepted_model_trial


def _judge(trial: Trial, carried_sha256: str) -> Callable[[], Coroutine[Any, Any, None]]:
    """The real judging of the verifier's record; the trial's agent guest stands in for
    the verification guest."""
    return lambda: judge(trial.context, RUNTIME, trial.guests.agent, carried_sha256, trial.evidence)


@pytest.mark.parametrize("damage", ["duplicate_key", "empty", "not_the_record"])
def test_a_verification_file_that_does_not_read_fails_verification(
    tmp_path: Path, damage: str
) -> None:
    """A failed run with a second `"result":"passed"` appended would pass under json.loads;
    the others would crash the trial. Each is `records_invalid`, no digest,
    `failed_verification`, a receipt that audits."""
    records = accepted_model_trial()
    assert records.verification is not None
    failed = records.verification.model_copy(
        update={"result": "failed", "tests_failed": 1}
    ).canonical_bytes()
    data = {
        "duplicate_key": failed[:-1] + b',"result":"passed"}',
        "empty": b"",
        "not_the_record": records.worker_requests[0].canonical_bytes(),
    }[damage]
    trial = in_guest(tmp_path, GuestWrote({"/work/verification.json": data}))
    assert run_stage(_judge(trial, VERIFIED_TREE))
    verification = trial.evidence.collected().verification
    assert verification is not None
    assert verification.category == "records_invalid" and verification.result == "failed"
    assert verification.task_sha256 is None
    collect(trial, records, verification=verification)
    result = bundle(trial, records)
    assert (result.valid, result.verdict) == (True, "failed_verification")


@pytest.mark.parametrize("end", sorted(ENDS))
def test_a_verify_command_that_ends_without_a_record_is_named(
    tmp_path: Path, end: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """As for the agent: not a missing verification record and an invalid receipt, but the
    host's reading, result failed, no digests, failed_verification, a receipt that audits.
    A passing verification.json left on the guest is not read."""
    records = accepted_model_trial()
    assert records.verification is not None
    guest = GuestEnded(
        ENDS[end], {"/work/verification.json": records.verification.canonical_bytes()}
    )
    trial = in_guest(tmp_path, guest)
    assert run_stage(_judge(trial, VERIFIED_TREE))
    verification = trial.evidence.collected().verification
    assert verification is not None
    assert (verification.category, verification.result) == (end, "failed")
    assert verification.task_sha256 is None and verification.final_diff_sha256 is None
    collect(trial, records, verification=verification)
    result = bundle(trial, records)
    assert (result.valid, result.verdict) == (True, "failed_verification")
    _, read = audit_and_read(result.receipt.read_bytes())
    assert read is not None and read.trial is not None and read.verification is not None
    assert read.trial.failed_stage == "verification" and read.verification.category == end
    assert read.cleanup and {c.status for c in read.cleanup} == {"confirmed"}
    assert audit_exit(result.receipt, capsys) == 0


def _of_this_task(records: RecordSet) -> VerificationRecord:
    """The builders' passing verification, about the task these trials run."""
    assert isinstance(records.verification, VerificationRecord)
    digest = task_digest(TASKS / "py-one-line-fix")
    return records.verification.model_copy(update={"task_sha256": digest})


def test_a_verification_of_the_carried_workspace_is_kept(tmp_path: Path) -> None:
    """Positive control for the next test: the verifier's record names the tree the host
    carried, and it is kept as written."""
    verification = _of_this_task(accepted_model_trial())
    assert verification.workspace_sha256 == VERIFIED_TREE
    written: dict[str, bytes | None] = {"/work/verification.json": verification.canonical_bytes()}
    trial = in_guest(tmp_path, GuestWrote(written))
    assert not run_stage(_judge(trial, VERIFIED_TREE))
    assert trial.evidence.collected().verification == verification


def test_a_verification_of_another_workspace_is_not_a_pass(tmp_path: Path) -> None:
    """A passing record about other bytes than the host carried (a verifier that was fed,
    or claims, another tree) is `workspace_mismatch`, failed, and the receipt audits as
    failed_verification. Mutation control: without the digest comparison in
    judge the passing record is kept."""
    records = accepted_model_trial()
    expected = _of_this_task(records)
    written: dict[str, bytes | None] = {"/work/verification.json": expected.canonical_bytes()}
    trial = in_guest(tmp_path, GuestWrote(written))
    assert run_stage(_judge(trial, "2" * 64))
    verification = trial.evidence.collected().verification
    assert verification is not None
    assert (verification.category, verification.result) == ("workspace_mismatch", "failed")
    collect(trial, records, verification=verification)
    result = bundle(trial, records)
    assert (result.valid, result.verdict) == (True, "failed_verification")
