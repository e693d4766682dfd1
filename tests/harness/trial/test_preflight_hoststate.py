"""Preflight admission and the host-state record, against this real host."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from harness.profiles import load_profile
from harness.trial.hoststate import host_state_record
from harness.trial.preflight import mem_available_bytes, preflight
from host.hoststate.snapshot import take_snapshot
from receipts.records import HostStateRecord


def test_preflight_admits_a_small_profile_on_this_host(tmp_path: Path) -> None:
    record = preflight(load_profile("smollm2"), tmp_path)
    assert record.category == "ok"
    assert record.mem_available_bytes is not None
    assert record.mem_available_bytes >= record.memory_floor_bytes
    assert record.cgroup_version in ("v1", "v2")


def test_preflight_refuses_below_the_memory_floor(tmp_path: Path) -> None:
    profile = load_profile("smollm2")
    available = mem_available_bytes()
    assert available is not None
    memory = profile.memory.model_copy(update={"host_admission_floor": available * 4})
    record = preflight(profile.model_copy(update={"memory": memory}), tmp_path)
    assert record.category == "memory_below_floor"


def test_preflight_refuses_below_the_disk_budget(tmp_path: Path) -> None:
    profile = load_profile("smollm2")
    budget = profile.provisioning.model_copy(update={"disk": 1 << 50})
    record = preflight(profile.model_copy(update={"provisioning": budget}), tmp_path)
    assert record.category == "disk_below_floor"


def _all(record: HostStateRecord, result: str) -> bool:
    return all(facet.result == result for facet in record.facets())


def test_unchanged_host_state_is_unchanged() -> None:
    record = host_state_record(take_snapshot(), take_snapshot())
    assert _all(record, "unchanged")
    assert record.firewall.raw_bytes == "same"
    assert record.routes.raw_bytes == "not_compared"


def test_a_new_listening_socket_is_a_change() -> None:
    before = take_snapshot()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    try:
        record = host_state_record(before, take_snapshot())
    finally:
        listener.close()
    assert record.listening_sockets.result == "changed"
    assert record.resolver.result == "unchanged"


def test_a_trial_without_loopback_stops_at_preflight_with_its_fix(tmp_path: Path) -> None:
    """`unshare -n harness trial` (no loopback) stops at preflight, which names the cause
    and the fix in a receipt that audits, rather than booting a guest and ending
    `vm: ssh_timeout` two minutes later."""
    harness = Path(sys.executable).with_name("harness")
    done = subprocess.run(
        ["unshare", "-n", str(harness), "trial", "--profile", "tiny", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert "failed      preflight: loopback_unavailable" in done.stdout
    assert "fix         ip link set lo up" in done.stdout
    (receipt,) = tmp_path.glob("trial-*.zip")
    audit = subprocess.run(
        [str(harness), "audit", "--json", str(receipt)], capture_output=True, text=True, check=False
    )
    assert audit.returncode == 0, audit.stdout
    assert json.loads(audit.stdout)["valid"] is True
