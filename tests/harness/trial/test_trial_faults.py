"""Faults injected into whole trials in a real QEMU guest (TCG here).

Each fault is injected the way the existing QEMU-kill test does it: the trial's stage
table with one stage wrapped (stagetable.py), or a guest that does the damage at a
fixed point of a stage, then lets the real stage run. Each
must end with its named, closed category, every cleanup receipt confirmed, no QEMU of
the trial left, and a receipt that `harness audit` accepts (exit 0).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from types import MethodType

import pytest

from harness.profiles import Profile
from harness.trial.context import TrialOptions
from harness.trial.guests import Guest
from harness.trial.pipeline import Trial, TrialResult
from harness.trial.stage import StageAction, TrialState
from harness.trial.verifierprep import VerifierPreparation
from host.ssh import CommandResult
from tests.harness.trial.stagetable import around, before
from tests.harness.trial.test_trial_vm import _no_leftovers, _options, _records, _why

pytestmark = pytest.mark.integration

MIB = 1 << 20

HOG = "python3 -c \"a = []\nwhile True: a.append(b'\\x01' * (32 << 20))\""
"""Touches every page it allocates, so guest RAM is really committed in QEMU."""

FILL = (
    "avail=$(stat -f -c '%a*%S' /); "
    "fallocate -l $(( $avail - (64 << 20) )) /var/tmp/fill-a 2>/dev/null; "
    "dd if=/dev/zero of=/var/tmp/fill-b bs=1M 2>/dev/null; sync; "
    "stat -f -c '%a' /"
)
"""Fill the guest's root filesystem (where /work lives) to ENOSPC: fallocate takes all
but 64 MiB at once, dd writes the rest until the kernel refuses. Prints what is left."""

DROP_OUR_CONNECTION = (
    "p=$PPID; pp=$(cut -d' ' -f4 /proc/$p/stat); gp=$(cut -d' ' -f4 /proc/$pp/stat); "
    '[ "$gp" = 1 ] && pp=; '
    'setsid sh -c "sleep 1; kill -KILL $p $pp" </dev/null >/dev/null 2>&1 &'
)
"""Kill the guest's sshd processes that serve this connection (the session process
and, when it is not the listener, its monitor), a second after the command returns.
The listener and PID 1 live on, so QEMU keeps running: only the connection drops."""


def _audits_by_cli(result: TrialResult) -> None:
    audit = subprocess.run(
        [sys.executable, "-m", "harness.cli", "audit", str(result.receipt)],
        capture_output=True,
        check=False,
    )
    assert audit.returncode == 0, audit.stdout


def _over_budget(profile: Profile, qemu_limit: int) -> Profile:
    """The profile with QEMU's no-swap cgroup below guest RAM. The profile validator
    refuses this on purpose (QEMU needs room of its own); the fault needs exactly it."""
    memory = profile.memory.model_copy(update={"qemu_cgroup_limit": qemu_limit})
    return profile.model_copy(update={"memory": memory})


async def guest_outgrows_qemu_budget(state: TrialState) -> None:
    """A guest process commits more memory than QEMU's cgroup allows: the host's OOM
    killer ends QEMU while the agent stage runs."""
    await state.guests.agent.run(HOG, 300.0)


async def test_qemu_over_its_budget_is_failed_oom(tmp_path: Path) -> None:
    options = _options(tmp_path, "py-one-line-fix", "solution")
    limit = 640 * MIB
    assert limit < options.profile.memory.guest_ram
    options = TrialOptions(
        profile=_over_budget(options.profile, limit),
        task=options.task,
        script=options.script,
        out_dir=options.out_dir,
        accel=options.accel,
    )
    result = await Trial(options, stages=before("agent", guest_outgrows_qemu_budget)).run()
    assert (result.valid, result.verdict) == (True, "failed_oom"), _why(result)
    records = _records(result)
    assert records.trial.failed_stage == "vm"
    assert records.vm.category == "oom_killed"
    assert records.vm.memory_limit_bytes == limit and records.vm.swap_limit_bytes == 0
    assert records.vm.oom_kills is not None and records.vm.oom_kills >= 1
    assert records.agent is None and records.verification is None
    _no_leftovers(result)
    _audits_by_cli(result)


class DiskFillsBeforeTheAgentWrites(Guest):
    """The guest's disk is filled to ENOSPC just before the agent runs: its edit and its
    own record cannot be written."""

    left: bytes = b""

    async def run(
        self, command: str, deadline_s: float, stdin: bytes | None = None
    ) -> CommandResult:
        if "guest.agent" in command:
            self.left = (await super().run(FILL, 600.0)).stdout
        return await super().run(command, deadline_s, stdin)


async def test_guest_disk_full_is_named(tmp_path: Path) -> None:
    trial = Trial(_options(tmp_path, "py-one-line-fix", "solution"))
    guest = trial.guests.agent = DiskFillsBeforeTheAgentWrites()
    result = await trial.run()
    assert guest.left.strip() == b"0", "the injection really filled the disk"
    assert (result.valid, result.verdict) == (True, "failed_vm"), _why(result)
    records = _records(result)
    assert records.vm.category == "guest_disk_full"
    assert records.gate is None and records.agent is None and records.verification is None
    _no_leftovers(result)
    _audits_by_cli(result)


async def connection_drops(state: TrialState) -> None:
    await state.guests.agent.run(DROP_OUR_CONNECTION, 30.0)
    await asyncio.sleep(3.0)


async def test_ssh_dropped_while_qemu_runs(tmp_path: Path) -> None:
    options = _options(tmp_path, "py-one-line-fix", "solution")
    trial = Trial(options, stages=before("agent", connection_drops))
    result = await trial.run()
    assert (result.valid, result.verdict) == (True, "failed_vm"), _why(result)
    records = _records(result)
    assert records.vm.category == "ssh_dropped"
    assert records.vm.oom_kills == 0
    assert records.agent is None
    _no_leftovers(result)
    _audits_by_cli(result)


def _another_task_disk(preparation: VerifierPreparation) -> Path:
    """The verification guest is sent a task that differs from the pinned one by one
    comment line."""
    root = VerifierPreparation.disk_source(preparation)
    task = preparation.context.options.task
    hidden = next((root / "task" / task / "hidden_tests").glob("test_*.py"))
    hidden.write_text(hidden.read_text() + "\n# not the pinned task\n")
    return root


async def _verify_another_task(state: TrialState, run: StageAction) -> None:
    state.verifier.disk_source = MethodType(  # type: ignore[method-assign]
        _another_task_disk, state.verifier
    )
    await run(state)


async def test_verification_of_another_task_is_runner_error(tmp_path: Path) -> None:
    """Mutation control for the task_sha256 cross-check: without it this trial would be
    accepted (the changed task still passes)."""
    options = _options(tmp_path / "out", "py-one-line-fix", "solution")
    trial = Trial(options, stages=around("gate", _verify_another_task))
    result = await trial.run()
    assert (result.valid, result.verdict) == (True, "failed_verification"), _why(result)
    records = _records(result)
    assert records.verification.category == "runner_error"
    assert records.verification.result == "failed"
    _no_leftovers(result)


async def crashes_in_the_agent_stage(state: TrialState, _run: StageAction) -> None:
    """A defect of ours: an exception that is no stage's named failure, raised while the
    VM, its cgroup, disks, keys and port are all held."""
    await state.guests.agent.run("true", 30.0)
    raise RuntimeError("injected harness defect")


async def test_unexpected_exception_is_failed_internal(tmp_path: Path) -> None:
    options = _options(tmp_path, "py-one-line-fix", "solution")
    result = await Trial(options, stages=around("agent", crashes_in_the_agent_stage)).run()
    assert (result.valid, result.verdict) == (True, "failed_internal"), _why(result)
    records = _records(result)
    assert records.trial.internal_error_stage == "agent"
    assert records.trial.failed_stage == "agent"
    assert records.vm.category == "ok" and records.gate is not None
    assert records.agent is None and records.verification is None
    assert {c.resource for c in records.cleanup} >= {"qemu_process", "cgroup", "data_disk"}
    _no_leftovers(result)
    _audits_by_cli(result)
