"""The suite report's figures, and the CLI around suite receipts (audit, report, view)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.suite.report import percentile, suite_report, wilson
from receipts.audit.suite import audit_suite_and_read
from receipts.suitebundle import write_suite_bundle
from tests.receipts.test_suite_receipt import entry, receipt, suite


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [
        (0, 1, 0.0, 0.7935),
        (1, 1, 0.2065, 1.0),
        (5, 10, 0.2366, 0.7634),
        (0, 34, 0.0, 0.1015),
        (34, 34, 0.8985, 1.0),
        (3, 34, 0.0305, 0.2296),
    ],
)
def test_wilson_interval(k: int, n: int, low: float, high: float) -> None:
    """Reference values: the Wilson score interval at z = 1.96 (e.g. statsmodels'
    proportion_confint(method='wilson'))."""
    interval = wilson(k, n)
    assert interval is not None
    assert interval[0] == pytest.approx(low, abs=5e-4)
    assert interval[1] == pytest.approx(high, abs=5e-4)


def test_nothing_scored_has_no_interval() -> None:
    assert wilson(0, 0) is None


def test_percentiles_are_nearest_rank() -> None:
    values = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    assert percentile(values, 0.5) == 50 and percentile(values, 0.9) == 90
    assert percentile([7], 0.9) == 7 and percentile([], 0.5) is None


@pytest.fixture
def suite_zip(tmp_path: Path) -> Path:
    oracle, null = receipt("a" * 32, "accepted"), receipt("b" * 32, "task_incomplete")
    failed = receipt("c" * 32, "failed_host_state")
    cancelled = receipt("d" * 32, "cancelled")
    unguarded = receipt("e" * 32, "accepted_unguarded")
    members = (
        entry("0000", oracle),
        entry("0001", null, script="null"),
        entry("0002", None, state="cancelled", exit_code=None, missing="cancelled_before_start"),
        entry("0003", failed, exit_code=3),
        entry("0004", cancelled, state="cancelled", exit_code=143),
        entry("0005", unguarded, exit_code=5),
    )
    blobs = {"0000": oracle, "0001": null, "0003": failed, "0004": cancelled, "0005": unguarded}
    target = tmp_path / "suite.zip"
    write_suite_bundle(suite(members), blobs, target)
    return target


def test_the_report_counts_members_and_separates_agents(suite_zip: Path) -> None:
    _result, record, members = audit_suite_and_read(suite_zip.read_bytes())
    assert record is not None
    report = suite_report(record, members)
    groups = {g["agent"]: g for g in report["groups"]}
    oracle, null = groups["scripted:oracle"], groups["scripted:null"]
    assert (oracle["trials"], oracle["with_receipt"], oracle["judged"]) == (5, 4, 3)
    assert (oracle["scored"], oracle["accepted"], oracle["unguarded"]) == (1, 1, 1)
    assert oracle["verdicts"] == {
        "accepted": 1,
        "accepted_unguarded": 1,
        "cancelled": 1,
        "failed_host_state": 1,
    }
    assert oracle["missing"] == {"cancelled_before_start": 1}, "counted, not judged"
    # A harness failure is not passed (never left out to raise the rate), nor is an
    # unguarded pass; a cancel is not judged.
    assert oracle["pass_rate"] == 0.3333
    assert (null["accepted"], null["pass_rate"]) == (0, 0.0)
    assert oracle["wall_ms_median"] == 60_000 == oracle["wall_ms_p90"]
    assert report["verdicts"] == {
        "accepted": 1,
        "accepted_unguarded": 1,
        "cancelled": 1,
        "failed_host_state": 1,
        "task_incomplete": 1,
    }
    languages = {g["agent"]: g for g in report["languages"]}
    assert languages["scripted:null"]["language"] == "python"


def _harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_audit_report_and_view_on_the_command_line(suite_zip: Path, tmp_path: Path) -> None:
    audited = _harness("audit", str(suite_zip), "--json")
    assert audited.returncode == 0, audited.stderr
    assert json.loads(audited.stdout)["valid"] is True
    reported = _harness("suite", "report", str(suite_zip))
    assert reported.returncode == 0 and json.loads(reported.stdout)["members"] == 6
    page = tmp_path / "suite.html"
    viewed = _harness("view", str(suite_zip), "-o", str(page))
    assert viewed.returncode == 0
    html = page.read_text()
    assert "<svg" in html and "polyglot-py-bowling" in html and "<script" not in html
    # One byte of a member changed: the suite does not audit, and no figures are shown.
    data = bytearray(suite_zip.read_bytes())
    at = data.index(b"trial.json") + 200
    data[at] ^= 1
    bad = tmp_path / "bad.zip"
    bad.write_bytes(bytes(data))
    assert _harness("audit", str(bad)).returncode == 1
    assert _harness("suite", "report", str(bad)).returncode == 1
    assert _harness("view", str(bad), "-o", str(page)).returncode == 1
    assert "does not audit" in page.read_text()
