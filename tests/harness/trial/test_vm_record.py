"""The VM record of a guest that never started: what the stage knew, nothing guessed."""

from __future__ import annotations

import pytest

from harness.profiles import load_profile
from harness.trial.vmstage import verifier_memory_bytes, vm_record


@pytest.mark.parametrize("backend", ["qemu", "libvirt"])
def test_a_guest_without_a_handle_names_its_backend(backend: str) -> None:
    """Its cgroup could not be made, so there is no handle: the record still names the
    backend the trial ran (it said `qemu` for libvirt before; the audit's `backend` rule
    would now refuse that receipt), and every reading it never took is null."""
    profile = load_profile("tiny")
    record = vm_record(None, "cgroup_apply_failed", profile, backend=backend)  # type: ignore[arg-type]
    assert (record.category, record.backend) == ("cgroup_apply_failed", backend)
    assert record.guest_memory_bytes == profile.memory.guest_ram
    assert record.memory_limit_bytes is None and record.oom_kills is None
    assert record.host_key_sha256 is None and record.accelerator is None


def test_the_verification_guest_states_its_own_size() -> None:
    profile = load_profile("qwen4b")
    size = verifier_memory_bytes(profile)
    assert size == 1 << 30 < profile.memory.guest_ram
    record = vm_record(None, "qemu_start_failed", profile, backend="qemu", guest_memory_bytes=size)
    assert record.guest_memory_bytes == 1 << 30
