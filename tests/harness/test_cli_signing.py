"""`harness keygen`, `harness audit --key` and `harness trial --sign-key` through the real
console script: files and modes, exit codes, what is printed."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from harness.receiptsign import sign_trial_receipt
from receipts.bundle import write_bundle
from receipts.signing import envelope_path, read_signer
from tests.receipts.builders import accepted_model_trial, accepted_scripted_trial

REPO = Path(__file__).resolve().parents[2]
HARNESS = [sys.executable, "-m", "harness.cli"]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*HARNESS, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env=env,
    )


def _fields(stdout: str) -> dict[str, str]:
    return {line[:12].strip(): line[12:].strip() for line in stdout.splitlines() if line}


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path, str]:
    done = run("keygen", "--out", str(tmp_path / "ci"))
    assert done.returncode == 0, done.stderr
    fingerprint = _fields(done.stdout)["fingerprint"]
    return tmp_path / "ci.key", tmp_path / "ci.pub", fingerprint


@pytest.fixture
def signed(tmp_path: Path, keys: tuple[Path, Path, str]) -> Path:
    receipt = tmp_path / "trial-0123456789abcdef.zip"
    write_bundle(accepted_model_trial(), receipt)
    assert sign_trial_receipt(receipt, read_signer(keys[0])) == envelope_path(receipt)
    return receipt


def test_keygen_writes_a_private_key_only_its_owner_reads(keys: tuple[Path, Path, str]) -> None:
    private, public, fingerprint = keys
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert public.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    assert len(fingerprint) == 64 and int(fingerprint, 16) >= 0
    again = run("keygen", "--out", str(private.with_suffix("")))
    assert again.returncode == 2 and "exists" in again.stderr
    assert not list(private.parent.glob(".*partial"))


def test_keygen_force_replaces_the_pair(keys: tuple[Path, Path, str]) -> None:
    private, _public, fingerprint = keys
    done = run("keygen", "--out", str(private.with_suffix("")), "--force")
    assert done.returncode == 0
    assert _fields(done.stdout)["fingerprint"] != fingerprint


def test_audit_with_the_key_names_the_signer(signed: Path, keys: tuple[Path, Path, str]) -> None:
    _private, public, fingerprint = keys
    human = run("audit", "--key", str(public), str(signed))
    assert human.returncode == 0, human.stdout
    assert _fields(human.stdout)["signature"] == f"signed by {fingerprint}"
    machine = run("audit", "--json", "--key", str(public), str(signed))
    result = json.loads(machine.stdout)
    assert (result["valid"], result["signature"], result["signed_by"]) == (
        True,
        "signed",
        fingerprint,
    )


def test_audit_without_a_key_says_unsigned(signed: Path) -> None:
    done = run("audit", str(signed))
    assert done.returncode == 0
    assert _fields(done.stdout)["signature"].startswith("unsigned")


def test_another_keys_audit_is_invalid(tmp_path: Path, signed: Path) -> None:
    run("keygen", "--out", str(tmp_path / "other"))
    done = run("audit", "--json", "--key", str(tmp_path / "other.pub"), str(signed))
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["signature"] == "refused"
    assert [f["category"] for f in result["findings"]] == ["signature_invalid"]


def test_an_envelope_of_another_receipt_is_refused(
    tmp_path: Path, signed: Path, keys: tuple[Path, Path, str]
) -> None:
    other = tmp_path / "other" / signed.name
    other.parent.mkdir()
    write_bundle(accepted_scripted_trial(), other)
    sign_trial_receipt(other, read_signer(keys[0]))
    done = run(
        "audit",
        "--json",
        "--key",
        str(keys[1]),
        "--signature",
        str(envelope_path(other)),
        str(signed),
    )
    assert done.returncode == 1
    assert json.loads(done.stdout)["findings"][0]["category"] == "subject_mismatch"


def test_a_missing_envelope_with_a_key_is_invalid(
    signed: Path, keys: tuple[Path, Path, str]
) -> None:
    envelope_path(signed).unlink()
    done = run("audit", "--key", str(keys[1]), str(signed))
    assert done.returncode == 1
    assert "signature_missing" in done.stdout


def test_usage_errors_exit_two(tmp_path: Path, signed: Path) -> None:
    assert run("audit", "--signature", "x.json", str(signed)).returncode == 2
    bad = tmp_path / "bad.pub"
    bad.write_text("not a key\n")
    done = run("audit", "--key", str(bad), str(signed))
    assert done.returncode == 2 and "key_unreadable" in done.stderr


def test_trial_refuses_a_key_others_can_read_before_anything_runs(
    tmp_path: Path, keys: tuple[Path, Path, str]
) -> None:
    keys[0].chmod(0o644)
    out = tmp_path / "out"
    done = run("trial", "--profile", "tiny", "--sign-key", str(keys[0]), "--out", str(out))
    assert done.returncode == 2 and "key_unsafe_permissions" in done.stderr
    assert not out.exists()
    env = {**os.environ, "HARNESS_SIGN_KEY": str(keys[0])}
    done = run("trial", "--profile", "tiny", "--out", str(out), env=env)
    assert done.returncode == 2 and "key_unsafe_permissions" in done.stderr


@pytest.mark.integration
def test_a_real_trial_signs_its_receipt_and_the_key_alone_checks_it(
    tmp_path: Path, keys: tuple[Path, Path, str]
) -> None:
    """A real (tiny, scripted) trial in a TCG guest with $HARNESS_SIGN_KEY: the envelope
    beside the receipt, and an audit with only the public key names the signer."""
    private, public, fingerprint = keys
    out = tmp_path / "out"
    script = REPO / "profiles" / "tasks" / "py-one-line-fix" / "scripts" / "solution.json"
    env = {**os.environ, "HARNESS_SIGN_KEY": str(private)}
    done = subprocess.run(
        [
            *(*HARNESS, "trial", "--profile", "tiny", "--agent", f"scripted:{script}"),
            *("--accel", "tcg", "--out", str(out), "--json"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    line = json.loads(done.stdout)
    receipt = Path(line["receipt"])
    assert line["signature"] == str(envelope_path(receipt))
    assert line["signed_by"] == fingerprint
    audited = run("audit", "--json", "--key", str(public), str(receipt))
    result = json.loads(audited.stdout)
    assert (audited.returncode, result["signature"], result["signed_by"]) == (
        0,
        "signed",
        fingerprint,
    )
    assert result["receipt_id"] == line["receipt_id"]
