"""Set up once, then run offline: whole trials through the CLI in a new network namespace.

`unshare -n` gives the trial a network namespace with nothing in it but a loopback
(brought up: QEMU's SSH forward listens on 127.0.0.1). No interface reaches anything,
so every fetch fails the way it does on a machine with no network. A warm cache (filled
by `harness image build`, the set-up step) runs a whole trial to `accepted`; a cache
that lacks what a stage needs ends the trial with that stage's closed `*fetch_failed`
category in a receipt that audits, and the output names the command to run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from receipts.audit import audit_and_read
from receipts.recordset import RecordSet

pytestmark = pytest.mark.integration
REPO = Path(__file__).parents[3]
SCRIPT = REPO / "profiles" / "tasks" / "py-one-line-fix" / "scripts" / "solution.json"
OFFLINE = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]


def _harness(*args: str, home: Path | None = None, offline: bool = True) -> tuple[int, str]:
    env = dict(os.environ)
    if home is not None:
        env["HOME"] = str(home)
    done = subprocess.run(
        [*(OFFLINE if offline else []), sys.executable, "-m", "harness.cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done.returncode, done.stdout


def _lines(stdout: str) -> dict[str, str]:
    """`harness trial`'s human output: a 12-character label, then the value, a line."""
    return {line[:12].strip(): line[12:] for line in stdout.splitlines() if line.strip()}


def _valid_records(stdout: str) -> RecordSet:
    receipt = Path(_lines(stdout)["receipt"])
    audit, records = audit_and_read(receipt.read_bytes())
    assert audit.valid, audit.findings
    assert records is not None
    return records


def _trial(out: Path, *extra: str, home: Path | None = None) -> tuple[int, str]:
    return _harness(
        "trial", "--profile", "tiny", "--accel", "tcg", "--out", str(out), *extra, home=home
    )


def test_a_warm_machine_runs_a_trial_with_no_network(tmp_path: Path) -> None:
    code, _ = _harness("image", "build", offline=False)  # the set-up step (fills or adopts)
    assert code == 0
    code, stdout = _trial(tmp_path, "--agent", f"scripted:{SCRIPT}")
    assert (code, _lines(stdout)["verdict"]) == (0, "accepted"), stdout
    records = _valid_records(stdout)
    assert records.image is not None and records.image.provenance == "adopted_from_cache"
    assert records.vm is not None and records.vm.category == "ok"
    assert records.verification is not None and records.verification.result == "passed"
    assert {c.status for c in records.cleanup} == {"confirmed"}


def test_an_empty_cache_with_no_network_is_image_fetch_failed(tmp_path: Path) -> None:
    code, stdout = _trial(tmp_path / "out", "--agent", f"scripted:{SCRIPT}", home=tmp_path)
    lines = _lines(stdout)
    assert (code, lines["verdict"], lines["failed"]) == (3, "failed_image", "image: fetch_failed")
    assert lines["fix"].startswith("run `make setup`") and "network" in lines["fix"]
    records = _valid_records(stdout)
    assert records.image is not None and records.image.category == "fetch_failed"
    assert records.vm is None


def test_a_missing_runtime_with_no_network_is_vm_runtime_fetch_failed(tmp_path: Path) -> None:
    code, _ = _harness("image", "build", offline=False)
    assert code == 0
    cache = tmp_path / ".cache" / "harness"
    cache.mkdir(parents=True)
    (cache / "images").symlink_to(Path.home() / ".cache" / "harness" / "images")
    code, stdout = _trial(tmp_path / "out", "--agent", f"scripted:{SCRIPT}", home=tmp_path)
    lines = _lines(stdout)
    assert (code, lines["verdict"]) == (3, "failed_vm"), stdout
    assert lines["failed"] == "vm: runtime_fetch_failed"
    assert lines["fix"].startswith("run `make setup`")
    records = _valid_records(stdout)
    assert records.vm is not None and records.vm.category == "runtime_fetch_failed"
    assert records.vm.memory_limit_bytes is not None  # the stage's budgets, as read back
    assert {c.resource for c in records.cleanup} >= {"cgroup", "data_disk"}
    assert {c.status for c in records.cleanup} == {"confirmed"}
    kept = (cache / "wheelsets").iterdir() if (cache / "wheelsets").exists() else iter([])
    assert [p.name for p in kept if not p.name.endswith(".lock")] == []  # nothing fetched


def test_an_unfetched_model_with_no_network_is_model_source_fetch_failed(tmp_path: Path) -> None:
    code, stdout = _harness(
        *("trial", "--profile", "smollm2", "--out", str(tmp_path / "out")), home=tmp_path
    )
    lines = _lines(stdout)
    assert (code, lines["verdict"]) == (3, "failed_model"), stdout
    assert lines["failed"] == "model: source_fetch_failed"
    assert "harness model prepare --profile smollm2" in lines["fix"]
    records = _valid_records(stdout)
    assert records.model is not None and records.model.category == "source_fetch_failed"


def test_set_up_on_a_warm_machine_needs_no_network() -> None:
    """`make setup` runs before every `make trial`: once it has filled the cache it must
    adopt everything without the network (no loopback either: nothing listens)."""
    online = subprocess.run(
        ["bash", ".ci/setup"], cwd=REPO, capture_output=True, text=True, timeout=1800, check=False
    )
    assert online.returncode == 0, online.stderr[-3000:]
    offline = subprocess.run(
        ["unshare", "-n", "bash", ".ci/setup"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert offline.returncode == 0, offline.stderr[-3000:]
    assert "setup: could not" not in offline.stderr
