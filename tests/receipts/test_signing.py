"""Signed receipts: the key that signed exactly these bytes, or a closed refusal.

Each refusal is built the way a forger would try it (another key, the receipt's bytes
changed, the statement edited, another receipt's envelope, a statement that says more
than the records), and each digest swap that an unsigned audit cannot see (the swapped
record re-encoded, the manifest rebuilt) is shown valid unsigned and refused signed.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from securesystemslib.dsse import Envelope
from securesystemslib.signer import CryptoSigner

from receipts.audit import audit_and_read
from receipts.audit.findings import AuditResult
from receipts.audit.signature import audit_signed
from receipts.bundle import bundle_bytes
from receipts.canonical import canonical
from receipts.signing import (
    MAX_ENVELOPE_BYTES,
    PAYLOAD_TYPE,
    KeyRefused,
    TrialPredicate,
    fingerprint,
    generate_key,
    predicate_of,
    public_key,
    read_public_key,
    read_signer,
    sign,
    statement,
)
from tests.receipts import tamper
from tests.receipts.builders import accepted_model_trial, accepted_scripted_trial

NAME = "trial-0123456789abcdef.zip"


def _signer(tmp_path: Path, name: str = "k") -> CryptoSigner:
    pair = generate_key()
    path = tmp_path / f"{name}.key"
    path.write_bytes(pair.private_pem)
    path.chmod(0o600)
    return read_signer(path)


def _predicate(data: bytes) -> TrialPredicate:
    result, records = audit_and_read(data)
    assert records is not None and result.receipt_id is not None
    return predicate_of(records, result.receipt_id)


def _signed(data: bytes, signer: CryptoSigner) -> bytes:
    return sign(NAME, data, _predicate(data), signer)


def _audit(data: bytes, envelope: bytes | None, signer: CryptoSigner) -> AuditResult:
    return audit_signed(data, envelope, signer.public_key)[0]


def _refusal(result: AuditResult) -> str:
    assert not result.valid and result.signature == "refused"
    assert result.derived_verdict is None and result.receipt_id is None
    first = result.findings[0]
    assert first.phase == "signature"
    return first.category


def _resigned_payload(envelope: bytes, signer: CryptoSigner, payload: bytes) -> bytes:
    """The same envelope with another payload, signed properly by `signer`."""
    fresh = Envelope(payload=payload, payload_type=PAYLOAD_TYPE, signatures={})
    fresh.sign(signer)
    del envelope
    return canonical(fresh.to_dict())


@pytest.fixture
def data() -> bytes:
    return bundle_bytes(accepted_model_trial())


@pytest.fixture
def signer(tmp_path: Path) -> CryptoSigner:
    return _signer(tmp_path)


def test_the_right_key_vouches_for_the_receipt(data: bytes, signer: CryptoSigner) -> None:
    plain, records = audit_and_read(data)
    result, signed_records = audit_signed(data, _signed(data, signer), signer.public_key)
    assert result.valid and result.signature == "signed"
    assert result.signed_by == fingerprint(signer.public_key)
    assert result.derived_verdict == plain.derived_verdict == "accepted"
    assert result.receipt_id == plain.receipt_id and signed_records == records


def test_without_a_key_the_audit_says_unsigned(data: bytes) -> None:
    result, _ = audit_and_read(data)
    assert result.valid and (result.signature, result.signed_by) == ("unsigned", None)


def test_another_key_does_not_vouch(tmp_path: Path, data: bytes, signer: CryptoSigner) -> None:
    other = _signer(tmp_path, "other")
    assert _refusal(_audit(data, _signed(data, other), signer)) == "signature_invalid"


def test_a_flipped_byte_in_the_zip_is_another_subject(data: bytes, signer: CryptoSigner) -> None:
    envelope = _signed(data, signer)
    flipped = tamper.flip_byte(data, tamper.payload_offset(data, "vm.json") + 10)
    result = _audit(flipped, envelope, signer)
    assert _refusal(result) == "subject_mismatch"
    assert any(f.category == "crc_mismatch" for f in result.findings)


def test_an_edited_statement_breaks_the_signature(data: bytes, signer: CryptoSigner) -> None:
    value = json.loads(_signed(data, signer))
    claim = json.loads(base64.b64decode(value["payload"]))
    claim["subject"][0]["digest"]["sha256"] = "0" * 64
    value["payload"] = base64.b64encode(canonical(claim)).decode()
    assert _refusal(_audit(data, canonical(value), signer)) == "signature_invalid"


def test_another_receipts_envelope_is_refused(data: bytes, signer: CryptoSigner) -> None:
    other = bundle_bytes(accepted_scripted_trial())
    assert _refusal(_audit(data, _signed(other, signer), signer)) == "subject_mismatch"


def test_a_statement_that_says_more_than_the_records_is_refused(
    data: bytes, signer: CryptoSigner
) -> None:
    import hashlib

    lie = _predicate(data).model_copy(update={"verdict": "task_incomplete"})
    payload = statement(NAME, hashlib.sha256(data).hexdigest(), lie)
    envelope = _resigned_payload(_signed(data, signer), signer, payload)
    assert _refusal(_audit(data, envelope, signer)) == "predicate_mismatch"


@pytest.mark.parametrize(
    "payload",
    [
        b"not json",
        canonical({"_type": "https://in-toto.io/Statement/v0.1"}),
        canonical({"_type": "https://in-toto.io/Statement/v1", "subject": [], "extra": 1}),
    ],
)
def test_a_signed_payload_that_is_not_our_statement_is_refused(
    data: bytes, signer: CryptoSigner, payload: bytes
) -> None:
    envelope = _resigned_payload(_signed(data, signer), signer, payload)
    assert _refusal(_audit(data, envelope, signer)) == "statement_invalid"


def test_another_predicate_type_is_not_our_statement(data: bytes, signer: CryptoSigner) -> None:
    value = json.loads(base64.b64decode(json.loads(_signed(data, signer))["payload"]))
    value["predicateType"] = "https://slsa.dev/provenance/v1"
    envelope = _resigned_payload(b"", signer, canonical(value))
    assert _refusal(_audit(data, envelope, signer)) == "statement_invalid"


def test_a_missing_envelope_is_a_finding(data: bytes, signer: CryptoSigner) -> None:
    assert _refusal(_audit(data, None, signer)) == "signature_missing"


def _unreadable(envelope: bytes) -> list[bytes]:
    value = json.loads(envelope)
    no_sigs = canonical({**value, "signatures": []})
    extra = canonical({**value, "extra": True})
    bad_b64 = canonical({**value, "payload": value["payload"][:-2] + "!!"})
    twice = canonical({**value, "signatures": value["signatures"] * 2})
    duplicate_key = envelope[:-1] + b',"payload":"' + value["payload"].encode() + b'"}'
    return [
        b"",
        b"[]",
        b"{",
        envelope + b" " * MAX_ENVELOPE_BYTES,
        no_sigs,
        extra,
        bad_b64,
        twice,
        duplicate_key,
    ]


def test_an_envelope_that_is_not_one_is_unreadable(data: bytes, signer: CryptoSigner) -> None:
    for bad in _unreadable(_signed(data, signer)):
        assert _refusal(_audit(data, bad, signer)) == "signature_unreadable", bad[:80]


def _swapped(entries: dict[str, bytes], name: str, field: str, value: object) -> bytes:
    """One record's digest field swapped for another well-formed value, re-encoded, the
    manifest rebuilt: what a forger without the key can do."""
    return tamper.forge(tamper.edit_json(entries, name, **{field: value}))


SWAPS = [
    ("gate.json", "pin_table_sha256", "e" * 64),
    ("image.json", "base_sha256", "e" * 64),
    ("verification.json", "final_diff_sha256", "e" * 64),
]
"""Digest swaps an unsigned audit reads as valid (each is checked below to still be)."""


@pytest.mark.parametrize(("name", "field", "value"), SWAPS)
def test_a_swap_an_unsigned_audit_cannot_see_is_refused_when_signed(
    data: bytes, signer: CryptoSigner, name: str, field: str, value: object
) -> None:
    envelope = _signed(data, signer)
    swapped = _swapped(tamper.good_entries(), name, field, value)
    assert swapped != data
    assert audit_and_read(swapped)[0].valid  # what the signature is for
    assert _refusal(_audit(swapped, envelope, signer)) == "subject_mismatch"


def test_a_key_others_can_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "k.key"
    path.write_bytes(generate_key().private_pem)
    for mode in (0o640, 0o604, 0o660):
        path.chmod(mode)
        with pytest.raises(KeyRefused) as refused:
            read_signer(path)
        assert refused.value.category == "key_unsafe_permissions"
    link = tmp_path / "link.key"
    os.symlink(path, link)
    with pytest.raises(KeyRefused) as refused:
        read_signer(link)  # the target's mode, not the link's
    assert refused.value.category == "key_unsafe_permissions"
    path.chmod(0o400)
    assert read_signer(path).public_key.keyid == read_signer(link).public_key.keyid


def test_keys_that_are_not_ed25519_or_not_keys_are_refused(tmp_path: Path) -> None:
    ecdsa = ec.generate_private_key(ec.SECP256R1())
    pem = ecdsa.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    path = tmp_path / "ec.key"
    path.write_bytes(pem)
    path.chmod(0o600)
    with pytest.raises(KeyRefused) as refused:
        read_signer(path)
    assert refused.value.category == "key_not_ed25519"
    pub = ecdsa.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    with pytest.raises(KeyRefused) as refused:
        public_key(pub)
    assert refused.value.category == "key_not_ed25519"
    garbage = tmp_path / "garbage.pub"
    garbage.write_bytes(b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
    for path in (garbage, tmp_path / "absent.pub"):
        with pytest.raises(KeyRefused) as refused:
            read_public_key(path)
        assert refused.value.category == "key_unreadable"


def test_the_fingerprint_is_the_public_keys_own(tmp_path: Path) -> None:
    pair = generate_key()
    path = tmp_path / "k.key"
    path.write_bytes(pair.private_pem)
    path.chmod(0o600)
    assert fingerprint(read_signer(path).public_key) == pair.fingerprint
    assert fingerprint(public_key(pair.public_pem)) == pair.fingerprint
    assert generate_key().fingerprint != pair.fingerprint


def test_a_payload_type_other_than_in_totos_is_refused(data: bytes, signer: CryptoSigner) -> None:
    payload = base64.b64decode(json.loads(_signed(data, signer))["payload"])
    fresh = Envelope(payload=payload, payload_type="application/json", signatures={})
    fresh.sign(signer)
    assert _refusal(_audit(data, canonical(fresh.to_dict()), signer)) == "statement_invalid"


def test_a_signed_statement_with_a_duplicate_key_is_refused(
    data: bytes, signer: CryptoSigner
) -> None:
    """Two readers of one signed payload must not read two statements."""
    payload = base64.b64decode(json.loads(_signed(data, signer))["payload"])
    doubled = payload[:-1] + b',"predicateType":"urn:harness:predicate:trial-receipt:v1"}'
    envelope = _resigned_payload(b"", signer, doubled)
    assert _refusal(_audit(data, envelope, signer)) == "statement_invalid"
