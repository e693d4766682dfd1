"""gc releases a killed trial's leftovers by name and touches nothing else."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from host.cgroups.detect import detect
from host.gc import collect, find_leftovers
from host.vm.leftovers import LIBVIRT_LOG_DIR

pytestmark = pytest.mark.integration
TAG = "0123abcd4567ef89"


def test_gc_releases_a_trials_leftovers_and_nothing_else(tmp_path: Path) -> None:
    hierarchy = detect()
    temp_root = tmp_path / "tmp"
    temp_root.mkdir()
    group = hierarchy.create(f"trial-{TAG}")
    worker_group = hierarchy.create(f"worker-{TAG}")
    verifier_group = hierarchy.create(f"verifier-{TAG}")
    bystander = hierarchy.create("other-gc-test")
    qemu = subprocess.Popen(
        [
            "qemu-system-x86_64",
            "-name",
            f"guest=harness-vm-{TAG}",
            "-machine",
            "none",
            "-nodefaults",
            "-display",
            "none",
            "-S",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        group.add_process(qemu.pid)
        (tmp_path / f"data-{TAG}").mkdir()
        (tmp_path / f"harness-vm-{TAG}-x1y2z3w4").mkdir()
        (tmp_path / "keep-me").mkdir()
        (temp_root / f"harness-trial-{TAG}-a1b2c3d4").mkdir()
        (temp_root / "harness-trial-notatag").mkdir()
        time.sleep(0.3)
        kinds = {item.kind for item in find_leftovers(tmp_path, temp_root, temp_root)}
        assert kinds == {"qemu_process", "cgroup", "scratch_dir"}
        results = collect(tmp_path, temp_root, temp_root)
        assert {r.status for _item, r in results} == {"confirmed"}
        assert qemu.wait(timeout=10) is not None
        assert not group.exists() and not worker_group.exists() and not verifier_group.exists()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["keep-me", "tmp"]
        assert sorted(p.name for p in temp_root.iterdir()) == ["harness-trial-notatag"]
        assert bystander.exists()
        assert find_leftovers(tmp_path, temp_root, temp_root) == []
    finally:
        if qemu.poll() is None:
            qemu.kill()
            qemu.wait()
        for leftover in (group, worker_group, verifier_group, bystander):
            if leftover.exists():
                leftover.kill_members()
                leftover.remove()


def test_gc_destroys_a_leftover_libvirt_domain(tmp_path: Path) -> None:
    # A domain that outlived its owner (e.g. created before a libvirtd restart, which
    # forgets AUTODESTROY): created here without it, paused, with the trial's name.
    from host.vm.virtconn import domain_state, open_connection

    tag = "0123abcd4567ef8a"
    name = f"harness-vm-{tag}"
    xml = (
        f"<domain type='qemu'><name>{name}</name><memory unit='MiB'>64</memory>"
        "<os><type arch='x86_64' machine='q35'>hvm</type></os>"
        "<devices><emulator>/usr/bin/qemu-system-x86_64</emulator>"
        "<controller type='usb' model='none'/><memballoon model='none'/></devices></domain>"
    )
    conn = open_connection()
    bystander = None
    try:
        import libvirt

        conn.createXML(xml, libvirt.VIR_DOMAIN_START_PAUSED)
        (tmp_path / f"lease-{tag}").write_bytes(b"")  # its killed orchestrator's trace
        bystander = conn.createXML(
            xml.replace(name, "not-harness-gc-test"), libvirt.VIR_DOMAIN_START_PAUSED
        )
        found = find_leftovers(tmp_path, tmp_path)
        assert ("libvirt_domain", name) in {(item.kind, item.name) for item in found}
        results = [(item, r) for item, r in collect(tmp_path, tmp_path) if item.tag == tag]
        released = [(r.resource, r.status, r.evidence) for _item, r in results]
        assert released[:1] == [("libvirt_domain", "confirmed", "domain_absent")]
        assert {r.status for _item, r in results} == {"confirmed"}
        assert domain_state(conn, name) == "absent"
        assert domain_state(conn, "not-harness-gc-test") == "present"
    finally:
        if domain_state(conn, name) == "present":
            conn.lookupByName(name).destroy()
        if bystander is not None:
            bystander.destroy()
        conn.close()
        (LIBVIRT_LOG_DIR / "not-harness-gc-test.log").unlink(missing_ok=True)  # our bystander's
    assert not (LIBVIRT_LOG_DIR / f"{name}.log").exists()  # gc released libvirt's log too


def _paused_qemu(tag: str, scratch: Path) -> subprocess.Popen[bytes]:
    """A QEMU named like a trial's whose command line names its scratch directory."""
    scratch.mkdir(parents=True)
    return subprocess.Popen(
        [
            "qemu-system-x86_64",
            "-name",
            f"guest=harness-vm-{tag}",
            "-machine",
            "none",
            "-nodefaults",
            "-display",
            "none",
            "-S",
            "-pidfile",
            str(scratch / "qemu.pid"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def test_gc_of_one_trials_root_leaves_another_roots_trial_running(tmp_path: Path) -> None:
    # The defect this guards: gc took every QEMU whose tag had no lease *in the root it
    # was given*, so a test's or a second operator's gc killed the trials of the default
    # root mid-run (seen as an intermittent verifier_vm_failed / qemu_exited).
    mine, theirs = tmp_path / "a", tmp_path / "b"
    mine.mkdir()
    tag = "0123abcd4567ef8b"
    qemu = _paused_qemu(tag, theirs / f"harness-vm-{tag}-x1y2z3w4")
    try:
        time.sleep(0.3)
        assert [r for item, r in collect(mine, mine, mine) if item.tag == tag] == []
        assert qemu.poll() is None
        taken = [
            (item.kind, r.status) for item, r in collect(theirs, theirs, theirs) if item.tag == tag
        ]
        assert ("qemu_process", "confirmed") in taken
        assert qemu.wait(timeout=10) is not None
    finally:
        if qemu.poll() is None:
            qemu.kill()
            qemu.wait()


def test_a_failed_release_keeps_the_lease_file_so_gc_can_retry(tmp_path: Path) -> None:
    # A leftover directory with a mount inside cannot be removed; the tag's lease file is
    # its only trace in this root, so gc keeps it and a later gc finishes the job.
    tag = "0123abcd4567ef8c"
    data = tmp_path / f"data-{tag}"
    (data / "mnt").mkdir(parents=True)
    lease = tmp_path / f"lease-{tag}"
    lease.write_bytes(b"")
    subprocess.run(["mount", "-t", "tmpfs", "none", str(data / "mnt")], check=True)
    try:
        first = [(item.kind, r.status) for item, r in collect(tmp_path, tmp_path, tmp_path)]
        assert first == [("scratch_dir", "failed")]
        assert lease.exists()
    finally:
        subprocess.run(["umount", str(data / "mnt")], check=True)
    second = {(item.kind, r.status) for item, r in collect(tmp_path, tmp_path, tmp_path)}
    assert second == {("scratch_dir", "confirmed"), ("trial_file", "confirmed")}
    assert sorted(tmp_path.iterdir()) == []
