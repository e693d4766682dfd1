"""A signed suite receipt: one signature over the suite ZIP and every member ZIP in it."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from securesystemslib.dsse import Envelope
from securesystemslib.signer import CryptoSigner

from receipts.audit.signature import audit_suite_signed
from receipts.audit.suite import SuiteAuditResult, audit_suite_and_read
from receipts.canonical import canonical
from receipts.records.suite import SuiteRecord
from receipts.signing import PAYLOAD_TYPE, member_subjects, sign, suite_predicate_of
from tests.receipts.test_signing import _signer
from tests.receipts.test_suite_receipt import entry, receipt, suite, suite_zip

TRIALS = ("a" * 32, "b" * 32)


@pytest.fixture
def parts() -> tuple[SuiteRecord, dict[str, bytes]]:
    oracle, null = receipt(TRIALS[0], "accepted"), receipt(TRIALS[1], "task_incomplete")
    members = (entry("0000", oracle), entry("0001", null, script="null"))
    return suite(members), {"0000": oracle, "0001": null}


@pytest.fixture
def signer(tmp_path: Path) -> CryptoSigner:
    return _signer(tmp_path)


def _sign(data: bytes, signer: CryptoSigner) -> bytes:
    result, record, _ = audit_suite_and_read(data)
    assert record is not None and result.suite_receipt_id is not None
    predicate = suite_predicate_of(record, result.suite_receipt_id)
    return sign("suite-x.zip", data, predicate, signer, member_subjects(record))


def _refusal(result: SuiteAuditResult) -> str:
    assert not result.valid and result.signature == "refused"
    assert result.suite_receipt_id is None
    return result.findings[0].category


def test_a_signed_suite_names_its_signer_and_every_member(
    parts: tuple[SuiteRecord, dict[str, bytes]], signer: CryptoSigner
) -> None:
    data = suite_zip(*parts)
    envelope = _sign(data, signer)
    result, _ = audit_suite_signed(data, envelope, signer.public_key)
    assert result.valid and result.signature == "signed"
    assert result.signed_by == signer.public_key.keyid
    claim = json.loads(base64.b64decode(json.loads(envelope)["payload"]))
    names = [s["name"] for s in claim["subject"]]
    assert names == ["suite-x.zip", "members/0000.zip", "members/0001.zip"]
    assert claim["subject"][1]["digest"]["sha256"] == parts[0].members[0].zip_sha256


def test_a_suite_statement_that_drops_a_member_is_refused(
    parts: tuple[SuiteRecord, dict[str, bytes]], signer: CryptoSigner
) -> None:
    """A signer's statement that leaves a member out does not vouch for the suite."""
    data = suite_zip(*parts)
    claim = json.loads(base64.b64decode(json.loads(_sign(data, signer))["payload"]))
    claim["subject"] = claim["subject"][:2]
    fresh = Envelope(payload=canonical(claim), payload_type=PAYLOAD_TYPE, signatures={})
    fresh.sign(signer)
    result, _ = audit_suite_signed(data, canonical(fresh.to_dict()), signer.public_key)
    assert _refusal(result) == "subject_mismatch"


def test_a_trial_envelope_is_not_a_suite_one(
    parts: tuple[SuiteRecord, dict[str, bytes]], signer: CryptoSigner
) -> None:
    data = suite_zip(*parts)
    claim = json.loads(base64.b64decode(json.loads(_sign(data, signer))["payload"]))
    claim["predicateType"] = "urn:harness:predicate:trial-receipt:v1"
    fresh = Envelope(payload=canonical(claim), payload_type=PAYLOAD_TYPE, signatures={})
    fresh.sign(signer)
    result, _ = audit_suite_signed(data, canonical(fresh.to_dict()), signer.public_key)
    assert _refusal(result) == "statement_invalid"


def test_another_suites_envelope_and_another_key_are_refused(
    tmp_path: Path, parts: tuple[SuiteRecord, dict[str, bytes]], signer: CryptoSigner
) -> None:
    record, blobs = parts
    data = suite_zip(record, blobs)
    smaller = suite((entry("0000", blobs["0000"]),))
    other = suite_zip(smaller, {"0000": blobs["0000"]})
    result, _ = audit_suite_signed(data, _sign(other, signer), signer.public_key)
    assert _refusal(result) == "subject_mismatch"
    stranger = _signer(tmp_path, "stranger")
    result, _ = audit_suite_signed(data, _sign(data, stranger), signer.public_key)
    assert _refusal(result) == "signature_invalid"
    result, _ = audit_suite_signed(data, None, signer.public_key)
    assert _refusal(result) == "signature_missing"
