"""`make trial` (.ci/trial): exit 0 for any valid receipt, whatever the verdict; non-zero
only when no valid receipt was produced; it says where the receipt is and how to view it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from receipts.bundle import bundle_bytes
from tests.receipts import tamper
from tests.receipts.builders import accepted_model_trial

REPO = Path(__file__).parents[2]


def _make_trial(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(REPO / ".ci" / "trial"), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={**os.environ, "HOME": str(home), **env},
    )


def test_a_failure_verdict_with_a_valid_receipt_exits_zero(tmp_path: Path) -> None:
    """A real trial whose verdict is a failure (qwen4b, nothing pinned under a fresh
    HOME: failed_model, or failed_preflight on a host short of memory): `harness trial`
    exits 3, `make trial` exits 0 and names the verdict, receipt and report command.
    Mutation control: the script passing `harness trial`'s status through."""
    done = _make_trial(tmp_path, "--profile", "qwen4b", "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr[-2000:]
    receipt = next((tmp_path / "out").glob("trial-*.zip"))
    lines = done.stdout.splitlines()
    assert any(line.startswith("trial: verdict failed_") for line in lines), done.stdout
    assert f"trial: receipt {receipt}" in lines
    assert f"trial: report  .venv/bin/harness view {receipt} -o report.html" in done.stdout


def test_no_receipt_is_a_non_zero_exit(tmp_path: Path) -> None:
    done = _make_trial(tmp_path, "--profile", "no-such-profile")
    assert done.returncode == 2
    assert "trial: no receipt was written" in done.stderr
    assert "trial: verdict" not in done.stdout


def test_a_receipt_that_does_not_audit_is_a_non_zero_exit(tmp_path: Path) -> None:
    """A stand-in for `harness trial` that reports a damaged receipt (what exit 4 means):
    the real `harness audit` refuses it and `make trial` fails. Mutation control: the
    audit check removed from the script."""
    data = bundle_bytes(accepted_model_trial())
    receipt = tmp_path / "trial-damaged.zip"
    receipt.write_bytes(tamper.flip_byte(data, tamper.payload_offset(data, "agent.json") + 5))
    stand_in = tmp_path / "harness"
    stand_in.write_text(f"#!/bin/sh\necho 'verdict     accepted'\necho 'receipt     {receipt}'\n")
    stand_in.chmod(0o755)
    done = _make_trial(tmp_path, "--profile", "tiny", HARNESS=str(stand_in))
    assert done.returncode == 4
    assert "does not audit as valid" in done.stderr
    assert "trial: verdict" not in done.stdout
