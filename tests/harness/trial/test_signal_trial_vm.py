"""SIGTERM and SIGINT end a real `harness trial` properly, at several stages.

How schedulers stop a job (FIELD-NOTES.md): Slurm sends SIGTERM and SIGKILL after
KillWait (30 s), GitHub Actions SIGINT first, systemd SIGTERM. A real `harness trial`
process (its own session, as a job step is) is signalled while a given stage runs,
read from its own structured log (`stage_begin`). It must exit 143 / 130 within the
grace period, with a receipt that `harness audit` finds valid, verdict `cancelled`
naming that stage and signal, every cleanup receipt `confirmed`, and nothing of the
trial left for `harness gc`. Six real trials (4 scripted, 2 model-driven with the host
worker; about 15 s each on a warm machine) rather than a full stage x signal matrix.

Mutation controls: without the CLI's handlers, SIGTERM kills the process with no
receipt (exit -15) and SIGINT raises KeyboardInterrupt past the teardown; both fail
here.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest

from harness.profiles import load_profile
from harness.trial.gueststart import GuestShape, plan_start
from host.cgroups import detect
from host.vm.leftovers import find_processes, find_trial_dirs
from receipts.audit import audit_and_read
from receipts.records.legacy import guest_start
from tests.host.image.support import session_image

pytestmark = pytest.mark.integration
REPO = Path(__file__).parents[3]
TRIALS = Path.home() / ".cache" / "harness" / "trials"
SOLUTION = "profiles/tasks/py-one-line-fix/scripts/solution.json"
STAGE_DEADLINE_S = 900.0
"""A cold machine builds the image and runtime first; a warm one reaches any stage in ~1 min."""
GRACE_S = 30.0
"""Slurm's default KillWait: everything must be done before SIGKILL would come."""


@pytest.fixture(scope="module", autouse=True)
def restored_guests() -> None:
    """The tiny profile's snapshot in the cache the trials use, made before the first
    signal: these trials run on restored guests (their receipts say so, checked below),
    and the `vm` case signals the restoring QEMU, not a snapshot's maker."""
    profile = load_profile("tiny")
    cgroup = detect().create(f"hsigsnap-{os.getpid()}")
    try:
        cgroup.set_memory_limit(profile.memory.qemu_cgroup_limit)
        shape = GuestShape(
            "tcg", profile.memory.guest_ram >> 20, profile.vm.vcpus, profile.vm.tcg_tb_size_mib
        )
        plan = asyncio.run(
            plan_start(
                request="snapshot",
                backend="qemu",
                guest=shape,
                worker_channel=False,
                image=session_image(),
                cache=TRIALS.parent,
                cgroup=cgroup,
                deadline_s=STAGE_DEADLINE_S,
                tag=secrets.token_hex(8),
            )
        )
    finally:
        cgroup.kill_members(deadline_s=5.0)
        cgroup.remove()
    assert plan.snapshot is not None, plan.record


class StderrLog:
    """The trial's JSON log lines, read on a thread so its stderr pipe never fills."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.events: list[dict[str, object]] = []
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        for line in stream:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self.cond:
                self.events.append(event)
                self.cond.notify_all()

    def seen(
        self, wanted: dict[str, str], process: subprocess.Popen[bytes], deadline_s: float
    ) -> bool:
        """Whether the trial logged an event with the `wanted` fields before it exited
        or the deadline passed."""
        deadline = time.monotonic() + deadline_s
        with self.cond:
            while time.monotonic() < deadline and process.poll() is None:
                if any(all(e.get(k) == v for k, v in wanted.items()) for e in self.events):
                    return True
                self.cond.wait(0.01)
        return False

    def wait_for(self, stage: str, process: subprocess.Popen[bytes]) -> bool:
        return self.seen({"event": "stage_begin", "stage": stage}, process, STAGE_DEADLINE_S)

    def acknowledged(self, signum: signal.Signals, process: subprocess.Popen[bytes]) -> bool:
        """Whether the trial logged taking `signum` (its `stop_signal` line). Two signals
        sent back to back may be taken in either order: the kernel may hand them to two
        of the process's threads, whose handlers then race to wake the event loop (seen:
        SIGINT then SIGTERM sent, exit 143). A fixed pause instead of this wait lost the
        other race: the cancelled trial had read the host state before it came (CI)."""
        wanted = {"event": "stop_signal", "category": signum.name}
        return self.seen(wanted, process, GRACE_S)


def _guests_of(parent: int) -> set[int]:
    """PIDs of the full-boot QEMU processes (not accelerator probes) `parent` started."""
    pids = set()
    for process in find_processes(qemu_only=True):
        try:
            status = Path(f"/proc/{process.pid}/status").read_text()
            cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes()
        except OSError:
            continue
        if f"PPid:\t{parent}\n" in status and b"hostfwd=" in cmdline:
            pids.add(process.pid)
    return pids


@pytest.mark.parametrize(
    ("policy", "stage", "signums"),
    [
        ("scripted", "vm", (signal.SIGTERM,)),  # QEMU booting, under TCG ~6-10 s
        ("scripted", "gate", (signal.SIGINT,)),  # a guest command over SSH
        ("model", "agent", (signal.SIGTERM,)),  # the host worker serving the agent's command
        # Ctrl-C at a terminal: SIGINT to the whole process group (see `group` below)
        ("model", "worker", (signal.SIGINT,)),  # the host worker starting, loading the GGUF
        ("scripted", "verification", (signal.SIGTERM,)),  # the workspace handed to the verifier
        # GitHub Actions' cancel: SIGINT, then SIGTERM. The second means hurry.
        ("scripted", "agent", (signal.SIGINT, signal.SIGTERM)),
    ],
)
def test_a_stop_signal_cancels_the_trial_with_a_valid_receipt(
    policy: str, stage: str, signums: tuple[signal.Signals, ...], tmp_path: Path
) -> None:
    signum = signums[0]  # the first signal cancels, and sets the exit status
    out = tmp_path / "out"
    argv = [
        *(sys.executable, "-m", "harness.cli", "--log-format", "json", "--log-level", "info"),
        *("trial", "--profile", "tiny", "--accel", "tcg", "--out", str(out), "--json"),
    ]
    if policy == "scripted":
        argv += ["--agent", f"scripted:{SOLUTION}"]
    child = subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    assert child.stderr is not None and child.stdout is not None
    log = StderrLog(child.stderr)
    try:
        reached = log.wait_for(stage, child)
        if reached and stage == "vm":  # a new guest booting, not only the stage begun
            earlier = _guests_of(child.pid)
            deadline = time.monotonic() + 120
            while not _guests_of(child.pid) - earlier and time.monotonic() < deadline:
                time.sleep(0.05)
            reached = bool(_guests_of(child.pid) - earlier)
        if reached and stage == "verification":  # the agent's guest gone: the verifier,
            earlier = _guests_of(child.pid)  # started beside it, gets the workspace
            deadline = time.monotonic() + 120
            while not earlier - _guests_of(child.pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            reached = len(earlier) == 2 and bool(earlier - _guests_of(child.pid))
        assert reached, f"the trial never reached {stage}: {log.events[-5:]}"
        signalled = time.monotonic()
        for index, each in enumerate(signums):
            if index:  # the second once the first is taken (see `acknowledged`)
                assert log.acknowledged(signums[index - 1], child), log.events[-5:]
            if stage == "worker":  # the terminal's Ctrl-C: the whole foreground group
                os.killpg(child.pid, each)
            else:
                os.kill(child.pid, each)
        stdout = child.stdout.read()
        code = child.wait(timeout=GRACE_S + 30)
        took = time.monotonic() - signalled
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    names = "+".join(each.name for each in signums)
    print(f"{policy} {stage} {names}: exit {code} after {took:.1f} s")
    assert code == 128 + signum, (code, log.events[-5:])
    assert took < GRACE_S, took
    summary = json.loads(stdout)
    assert (summary["verdict"], summary["valid"]) == ("cancelled", True), summary

    receipt = Path(summary["receipt"])
    audit = subprocess.run(
        [sys.executable, "-m", "harness.cli", "audit", "--json", str(receipt)],
        cwd=REPO,
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert audit.returncode == 0, audit.stdout
    assert json.loads(audit.stdout)["derived_verdict"] == "cancelled"
    result, records = audit_and_read(receipt.read_bytes())
    assert result.valid and records is not None and records.trial is not None
    trial = records.trial
    assert (trial.cancelled_stage, trial.cancel_signal) == (stage, signum.name)  # type: ignore[union-attr]
    assert trial.failed_stage == stage and records.stage_record(stage) is None
    assert records.cleanup and {c.status for c in records.cleanup} == {"confirmed"}
    if stage != "vm":  # how the agent's guest started (the vm case cancels its restore)
        assert records.vm is not None and records.vm.category == "ok"
        start = guest_start(records.vm)
        assert start is not None, records.vm
        if policy == "scripted":
            assert (start.how, start.found) == ("snapshot", "present"), start
        else:  # the host worker's channel is not in a snapshot: booted, and why
            assert (start.how, start.cold_boot_reason) == ("cold_boot", "worker_channel")
    resources = {c.resource for c in records.cleanup}
    assert {"qemu_process", "cgroup", "data_disk"} <= resources, resources
    if stage == "verification" or (policy == "model" and stage == "agent"):  # by then the
        # verification guest was up beside the agent's (begun with the gate)
        assert [c.resource for c in records.cleanup].count("qemu_process") == 2
    if policy == "model":
        assert "worker_process" in resources, resources
    assert records.hoststate is not None
    results = {facet.result for facet in records.hoststate.facets()}
    assert (results == {"unread"}) == (len(signums) > 1)  # a hurry does not read it again

    # Nothing of this trial is left: no process, cgroup, directory, lease; gc sees nothing.
    tag = trial.trial_id[:16]
    assert [p for p in find_processes() if p.tag == tag] == []
    listing = detect().list_names(prefix=f"trial-{tag}")
    assert not any(item.names for item in listing.values())
    assert [p for p in find_trial_dirs(TRIALS) if tag in p.name] == []
    assert not (TRIALS / f"lease-{tag}").exists()
    dry = subprocess.run(
        [sys.executable, "-m", "harness.cli", "gc", "--dry-run"],
        cwd=REPO,
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert dry.returncode == 0 and tag.encode() not in dry.stdout, dry.stdout
