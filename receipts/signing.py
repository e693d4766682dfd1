"""Signed receipts: an in-toto Statement about a receipt ZIP, in a DSSE envelope.

A receipt alone binds only through its id carried by another channel (docs/receipts.md).
A signature is that channel in the file system: the operator's Ed25519 key signs a
Statement (in-toto Attestation Framework v1) whose one subject is the ZIP's SHA-256 and
whose predicate (ours: `PREDICATE_TYPE`) repeats what a reviewer compares first: the
receipt id, the verdict, the harness source, the model and image keys, the agent. The
envelope is DSSE (`application/vnd.in-toto+json`), the shape SLSA provenance and
Sigstore bundles carry, so other tools can read it.

securesystemslib (the Secure Systems Lab's library under in-toto and TUF) does the DSSE
pre-authentication encoding, the signing and the verification, and `cryptography` the
Ed25519 keys: nothing cryptographic is written here. What is ours is the statement and
the checks around the envelope, which is hostile input: bounded, strictly parsed, each
refusal a closed category. Keyless (Sigstore's Fulcio and Rekor) needs a network the
harness does not have; a key the operator holds is what is offline.

Not imported by guest code: the guest runtime does not carry securesystemslib.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import Field, ValidationError
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import FormatError, VerificationError
from securesystemslib.signer import CryptoSigner, SSlibKey

from receipts.audit.findings import SignatureRefusal
from receipts.canonical import canonical
from receipts.records.base import Part
from receipts.records.legacy import AnySuiteRecord
from receipts.records.trial import Verdict
from receipts.recordset import RecordSet
from receipts.strictjson import StrictJsonError, loads_strict
from receipts.suitebundle import member_entry
from receipts.types import Count, GitObjectId, Identifier, Sha256Hex, Version

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "urn:harness:predicate:trial-receipt:v1"
SUITE_PREDICATE_TYPE = "urn:harness:predicate:suite-receipt:v1"
ENVELOPE_SUFFIX = ".dsse.json"
"""The envelope's file is the ZIP's name with this appended, beside it."""
MAX_ENVELOPE_BYTES = 64 << 10
"""An envelope of one statement and a few signatures is about 1.5 KB."""
MAX_SIGNATURES = 8
MAX_KEY_BYTES = 16 << 10
"""A PEM Ed25519 private key is 119 bytes; anything much larger is not one."""

KeyFailure = Literal["key_unreadable", "key_not_ed25519", "key_unsafe_permissions"]


class KeyRefused(Exception):
    """A key file that cannot be used; `category` says why (a usage error, exit 2)."""

    def __init__(self, category: KeyFailure) -> None:
        super().__init__(category)
        self.category: KeyFailure = category


class TrialPredicate(Part):
    """What the signer vouches for beside the ZIP's digest: the fields a reviewer reads
    first, each equal to the receipt's own records (the audit checks they are)."""

    receipt_id: Sha256Hex
    verdict: Verdict
    harness_version: Version
    profile: Identifier
    task: Identifier
    source_commit: GitObjectId | None
    source_tree: GitObjectId | None
    model_cache_key: Sha256Hex | None
    model_gguf_sha256: Sha256Hex | None
    image_key: Sha256Hex | None
    agent: Identifier | None
    agent_version: Version | None
    agent_sha256: Sha256Hex | None


class SubjectDigest(Part):
    sha256: Sha256Hex


class Subject(Part):
    name: str = Field(min_length=1, max_length=255)
    digest: SubjectDigest


class VerdictTally(Part):
    verdict: Verdict
    count: Count


class SuitePredicate(Part):
    """A suite's: its receipt id, what ran (the suite file, the harness source) and its
    aggregate. Each member receipt is a subject of its own beside the suite ZIP, so one
    signature vouches for every member's bytes too."""

    suite_receipt_id: Sha256Hex
    name: Identifier
    suite_sha256: Sha256Hex
    harness_version: Version
    source_commit: GitObjectId | None
    source_tree: GitObjectId | None
    members: Count
    verdicts: tuple[VerdictTally, ...]


class Statement(Part):
    """A trial receipt's Statement (`predicateType` is in-toto's spelling): one subject,
    the ZIP."""

    type_: Literal["https://in-toto.io/Statement/v1"] = Field(alias="_type")
    subject: tuple[Subject] = Field(min_length=1, max_length=1)
    predicateType: Literal["urn:harness:predicate:trial-receipt:v1"]
    predicate: TrialPredicate


class SuiteStatement(Part):
    """A suite receipt's: the suite ZIP first, then every member ZIP it holds, in order."""

    type_: Literal["https://in-toto.io/Statement/v1"] = Field(alias="_type")
    subject: tuple[Subject, ...] = Field(min_length=1, max_length=10_001)
    predicateType: Literal["urn:harness:predicate:suite-receipt:v1"]
    predicate: SuitePredicate


# ---- keys -----------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyPair:
    private_pem: bytes
    public_pem: bytes
    fingerprint: str


def generate_key() -> KeyPair:
    """A new Ed25519 key pair: PKCS#8 PEM (unencrypted; the file's mode protects it) and
    SubjectPublicKeyInfo PEM; the fingerprint is the public key's keyid."""
    private = Ed25519PrivateKey.generate()
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    private_pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return KeyPair(private_pem, public_pem, fingerprint(public_key(public_pem)))


def fingerprint(key: SSlibKey) -> str:
    """The key's keyid: SHA-256 over securesystemslib's canonical form of the key, the
    id its envelopes name the signer by."""
    return key.keyid


def public_key(pem: bytes) -> SSlibKey:
    try:
        loaded = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError):
        raise KeyRefused("key_unreadable") from None
    if not isinstance(loaded, Ed25519PublicKey):
        raise KeyRefused("key_not_ed25519")
    return SSlibKey.from_crypto(loaded)


def read_public_key(path: Path) -> SSlibKey:
    try:
        data = path.read_bytes()
    except OSError:
        raise KeyRefused("key_unreadable") from None
    return public_key(data)


def read_signer(path: Path) -> CryptoSigner:
    """The private key at `path`, refused when anyone but its owner may read it (as ssh
    refuses such a key): a signing key others can read vouches for nothing. The mode is
    the opened file's, so a symlink (a mounted CI secret) is judged by its target."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        raise KeyRefused("key_unreadable") from None
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise KeyRefused("key_unreadable")
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise KeyRefused("key_unsafe_permissions")
        data = handle.read(MAX_KEY_BYTES)
    try:
        private = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise KeyRefused("key_unreadable") from None
    if not isinstance(private, Ed25519PrivateKey):
        raise KeyRefused("key_not_ed25519")
    return CryptoSigner(private, SSlibKey.from_crypto(private.public_key()))


# ---- statements -----------------------------------------------------------------------


def predicate_of(records: RecordSet, receipt_id: str) -> TrialPredicate:
    """The predicate a valid receipt's records imply (the audit's derived verdict is the
    trial record's, which a valid receipt's claim equals)."""
    trial, source, model, image, agent = (
        records.trial,
        records.source,
        records.model,
        records.image,
        records.agent,
    )
    assert trial is not None, "a valid receipt has a trial record"
    return TrialPredicate(
        receipt_id=receipt_id,
        verdict=trial.verdict,
        harness_version=trial.harness_version,
        profile=trial.profile,
        task=trial.task,
        source_commit=source.commit if source is not None else None,
        source_tree=source.tree if source is not None else None,
        model_cache_key=model.cache_key if model is not None else None,
        model_gguf_sha256=model.gguf_sha256 if model is not None else None,
        image_key=image.image_key if image is not None else None,
        agent=getattr(agent, "agent", None),
        agent_version=getattr(agent, "agent_version", None),
        agent_sha256=getattr(agent, "agent_sha256", None),
    )


def suite_predicate_of(record: AnySuiteRecord, suite_receipt_id: str) -> SuitePredicate:
    return SuitePredicate(
        suite_receipt_id=suite_receipt_id,
        name=record.name,
        suite_sha256=record.suite_sha256,
        harness_version=record.harness_version,
        source_commit=record.source.commit,
        source_tree=record.source.tree,
        members=len(record.members),
        verdicts=tuple(VerdictTally(verdict=v.verdict, count=v.count) for v in record.verdicts),
    )


def member_subjects(record: AnySuiteRecord) -> tuple[tuple[str, str], ...]:
    """(name, sha256) of every member ZIP the suite receipt holds, in member order."""
    return tuple((member_entry(m.member_id), m.zip_sha256) for m in record.members if m.zip_sha256)


def statement(
    zip_name: str,
    zip_sha256: str,
    predicate: TrialPredicate | SuitePredicate,
    members: tuple[tuple[str, str], ...] = (),
) -> bytes:
    subjects = [(zip_name, zip_sha256), *members]
    is_suite = isinstance(predicate, SuitePredicate)
    return canonical(
        {
            "_type": STATEMENT_TYPE,
            "subject": [{"name": n, "digest": {"sha256": d}} for n, d in subjects],
            "predicateType": SUITE_PREDICATE_TYPE if is_suite else PREDICATE_TYPE,
            "predicate": predicate.model_dump(mode="json"),
        }
    )


def sign(
    zip_name: str,
    data: bytes,
    predicate: TrialPredicate | SuitePredicate,
    signer: CryptoSigner,
    members: tuple[tuple[str, str], ...] = (),
) -> bytes:
    """The envelope's bytes (canonical JSON) for the ZIP `data`, signed by `signer`;
    `members` (a suite's): the member ZIPs' names and digests, subjects after it."""
    payload = statement(zip_name, hashlib.sha256(data).hexdigest(), predicate, members)
    envelope = Envelope(payload=payload, payload_type=PAYLOAD_TYPE, signatures={})
    envelope.sign(signer)
    return canonical(envelope.to_dict())


def envelope_path(receipt: Path) -> Path:
    return receipt.with_name(receipt.name + ENVELOPE_SUFFIX)


# ---- checks ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SignatureCheck:
    """`refusal` None: the key signed a Statement about exactly these bytes whose
    predicate the records bear out (or could not be compared: `records` None)."""

    refusal: SignatureRefusal | None
    signed_by: str | None


def _envelope(raw: bytes) -> Envelope:
    if len(raw) > MAX_ENVELOPE_BYTES:
        raise ValueError("oversize")
    value = loads_strict(raw)
    if not isinstance(value, dict) or set(value) != {"payload", "payloadType", "signatures"}:
        raise ValueError("not an envelope")
    signatures = value["signatures"]
    if not isinstance(signatures, list) or not 1 <= len(signatures) <= MAX_SIGNATURES:
        raise ValueError("signatures")
    payload = value["payload"]
    if not isinstance(payload, str):
        raise TypeError("payload")
    base64.b64decode(payload, validate=True)
    return Envelope.from_dict(value)


def check_signature(
    envelope: bytes | None,
    data: bytes,
    key: SSlibKey,
    expected: TrialPredicate | SuitePredicate | None,
    *,
    suite: bool = False,
    members: tuple[tuple[str, str], ...] = (),
) -> SignatureCheck:
    """Whether `key` vouches for the ZIP `data` through `envelope`. `expected`: the
    predicate the receipt's records imply, None when the receipt is not valid (then only
    the signature and the subject are checked; the receipt is refused anyway). A suite's
    (`suite`) subjects after its own must be exactly `members`, its member ZIPs."""
    if envelope is None:
        return SignatureCheck("signature_missing", None)
    try:
        parsed = _envelope(envelope)
    except (ValueError, KeyError, TypeError, binascii.Error, StrictJsonError, FormatError):
        return SignatureCheck("signature_unreadable", None)
    try:
        parsed.verify([key], 1)
    except VerificationError:
        return SignatureCheck("signature_invalid", None)
    signed_by = fingerprint(key)
    if parsed.payload_type != PAYLOAD_TYPE:
        return SignatureCheck("statement_invalid", signed_by)
    model: type[Statement | SuiteStatement] = SuiteStatement if suite else Statement
    try:
        loads_strict(parsed.payload)  # duplicate keys and non-finite numbers refused first
        claim = model.model_validate_json(parsed.payload)
    except (ValidationError, StrictJsonError, UnicodeDecodeError):
        return SignatureCheck("statement_invalid", signed_by)
    if claim.subject[0].digest.sha256 != hashlib.sha256(data).hexdigest():
        return SignatureCheck("subject_mismatch", signed_by)
    named = tuple((s.name, s.digest.sha256) for s in claim.subject[1:])
    if expected is not None and named != members:
        return SignatureCheck("subject_mismatch", signed_by)
    if expected is not None and claim.predicate != expected:
        return SignatureCheck("predicate_mismatch", signed_by)
    return SignatureCheck(None, signed_by)
