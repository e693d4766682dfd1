"""`harness audit` through the real console script: exit codes, human and JSON output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from receipts.bundle import bundle_bytes, write_bundle
from tests.receipts import tamper
from tests.receipts.builders import accepted_model_trial
from tests.receipts.legacy import v1_receipt

HARNESS = [sys.executable, "-m", "harness.cli"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HARNESS, *args], capture_output=True, text=True, check=False)


@pytest.fixture
def valid_zip(tmp_path: Path) -> Path:
    path = tmp_path / "receipt.zip"
    write_bundle(accepted_model_trial(), path)
    return path


def test_valid_receipt_exits_zero_with_a_table(valid_zip: Path) -> None:
    result = run("audit", str(valid_zip))
    assert result.returncode == 0, result.stderr
    assert "valid        yes" in result.stdout
    assert "verdict      accepted" in result.stdout


def test_json_output_is_a_closed_canonical_result(valid_zip: Path) -> None:
    result = run("audit", "--json", str(valid_zip))
    assert result.returncode == 0
    payload = json.loads(result.stdout)
    assert payload["schema"] == "harness.audit.result/6"
    assert (payload["signature"], payload["signed_by"]) == ("unsigned", None)
    assert payload["failed_stage"] is payload["failed_category"] is payload["remedy"] is None
    assert payload["valid"] is True
    assert payload["derived_verdict"] == "accepted"
    assert result.stdout.endswith("\n") and "\n" not in result.stdout[:-1]


def test_tampered_receipt_exits_one_naming_the_category(tmp_path: Path) -> None:
    data = bundle_bytes(accepted_model_trial())
    path = tmp_path / "bad.zip"
    path.write_bytes(tamper.flip_byte(data, tamper.payload_offset(data, "agent.json") + 5))
    result = run("audit", str(path))
    assert result.returncode == 1
    assert "crc_mismatch" in result.stdout and "agent.json" in result.stdout
    as_json = run("audit", "--json", str(path))
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["findings"][0]["category"] == "crc_mismatch"


@pytest.mark.parametrize("problem", ["missing", "directory"])
def test_unreadable_file_exits_two(tmp_path: Path, problem: str) -> None:
    path = tmp_path / "receipt.zip"
    if problem == "directory":
        path.mkdir()
    result = run("audit", str(path))
    assert result.returncode == 2
    assert result.stderr.startswith("harness audit: cannot read the receipt")
    assert str(tmp_path) not in result.stderr


def test_usage_error_exits_two() -> None:
    assert run("audit").returncode == 2
    assert run("audit", "--bogus", "x.zip").returncode == 2


def test_trial_usage_errors_are_one_line_and_exit_two() -> None:
    bad_agent = run("trial", "--profile", "tiny", "--agent", "human")
    assert bad_agent.returncode == 2
    assert bad_agent.stderr.startswith("harness trial: --agent must be")
    unknown = run("trial", "--profile", "nope")
    assert unknown.returncode == 2
    assert unknown.stderr.startswith("harness trial: profile nope: not found")


def test_trial_refuses_an_unreadable_dispatch_ticket_before_starting(tmp_path: Path) -> None:
    ticket = tmp_path / "ticket.json"
    ticket.write_text('{"not": "a ticket"}')
    result = run(
        "trial",
        "--profile",
        "tiny",
        "--dispatch",
        str(ticket),
        "--agent",
        "scripted:profiles/tasks/py-one-line-fix/scripts/solution.json",
    )
    assert result.returncode == 2
    assert result.stderr.startswith("harness trial: dispatch ticket refused: malformed")


def test_an_older_harness_receipt_exits_zero(tmp_path: Path) -> None:
    """A hoststate/1 receipt written by the harness before hoststate/2 (the fixture's
    provenance is in tests/receipts/test_hoststate_versions.py) audits valid."""
    fixture = tmp_path / "old.zip"
    fixture.write_bytes(v1_receipt())  # with the cleanup receipts a real one has
    result = run("audit", "--json", str(fixture))
    assert result.returncode == 0, result.stdout
    payload = json.loads(result.stdout)
    assert payload["valid"] is True and payload["derived_verdict"] == "accepted"
