"""Budgets that contradict each other are refused, each with its own stable message.

Every relation in harness/profiles/budgets.py is broken by exactly one byte (or one
MiB) from a profile that meets it exactly, so an off-by-one or a dropped check fails a
test; the profile at the exact boundary must load.
"""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.profiles import ProfileError, load_profile
from harness.profiles.budgets import MIB, REQUEST_NEED_BOUND, budget_contradiction
from harness.profiles.load import PROFILES_DIR
from harness.profiles.model import profile_contradiction
from tests.harness.profiles.test_load import _to_toml

GIB = 1 << 30

# A profile that meets every relation with nothing to spare: W = M + N + F,
# H = Q + W, Q = G + T, R = F. (W < G is strict, so the guest checks use guest_ram > W.)
EXACT: dict[str, Any] = {
    "guest_ram": 2 * GIB,
    "qemu_cgroup_limit": 2 * GIB + 64 * MIB,
    "worker_cgroup_limit": 10 * GIB + REQUEST_NEED_BOUND + 512 * MIB,
    "request_admission_floor": 512 * MIB,
    "runtime_guard": 512 * MIB,
    "model_working_set": 10 * GIB,
    "tcg_tb_size_mib": 64,
    "placement": "host",
}
EXACT["host_admission_floor"] = EXACT["qemu_cgroup_limit"] + EXACT["worker_cgroup_limit"]


def _check(**changes: Any) -> str | None:
    return budget_contradiction(**{**EXACT, **changes})


def test_the_exact_boundary_is_accepted() -> None:
    assert _check() is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"qemu_cgroup_limit": EXACT["qemu_cgroup_limit"] - 1},
            "memory.qemu_cgroup_limit must be at least memory.guest_ram + vm.tcg_tb_size_mib",
        ),
        (
            {"tcg_tb_size_mib": 65},
            "memory.qemu_cgroup_limit must be at least memory.guest_ram + vm.tcg_tb_size_mib",
        ),
        (
            {
                "placement": "guest",
                "guest_ram": 12 * GIB,
                "qemu_cgroup_limit": 13 * GIB,
                "host_admission_floor": 13 * GIB - 1,
            },
            "memory.host_admission_floor must be at least memory.qemu_cgroup_limit",
        ),
        (
            {"host_admission_floor": EXACT["host_admission_floor"] - 1},
            'with placement = "host", memory.host_admission_floor must be at least'
            " memory.qemu_cgroup_limit + memory.worker_cgroup_limit",
        ),
        (
            {"runtime_guard": EXACT["request_admission_floor"] + 1},
            "memory.runtime_guard must not exceed memory.request_admission_floor",
        ),
        (
            {"request_admission_floor": EXACT["request_admission_floor"] + 1},
            "memory.model_working_set + 64 MiB (a request's need) +"
            " memory.request_admission_floor must fit in memory.worker_cgroup_limit",
        ),
        (
            {"model_working_set": EXACT["model_working_set"] + 1},
            "memory.model_working_set + 64 MiB (a request's need) +"
            " memory.request_admission_floor must fit in memory.worker_cgroup_limit",
        ),
    ],
)
def test_each_relation_broken_by_one_is_refused(changes: dict[str, Any], message: str) -> None:
    refusal = _check(**changes)
    assert refusal is not None and refusal.startswith(message)


def _guest_placed(placement: str, guest_ram: int) -> dict[str, Any]:
    qemu = guest_ram + 64 * MIB
    return {
        "placement": placement,
        "guest_ram": guest_ram,
        "qemu_cgroup_limit": qemu,
        "host_admission_floor": qemu + EXACT["worker_cgroup_limit"],
    }


def test_worker_in_the_guest_must_be_below_guest_ram() -> None:
    worker = EXACT["worker_cgroup_limit"]
    assert _check(**_guest_placed("guest", worker + 1)) is None
    refusal = _check(**_guest_placed("guest", worker))
    assert refusal is not None
    assert refusal.startswith(
        'with placement = "guest", memory.worker_cgroup_limit must be below memory.guest_ram'
    )


def test_auto_must_meet_both_placements() -> None:
    """`auto` is the guest under KVM and the host under TCG: both relations apply."""
    worker = EXACT["worker_cgroup_limit"]
    assert _check(**_guest_placed("auto", worker + 1)) is None
    in_guest = _check(**_guest_placed("auto", worker))
    assert in_guest is not None and in_guest.startswith('with placement = "auto", memory.worker')
    on_host = {**_guest_placed("auto", worker + 1), "host_admission_floor": 0}
    on_host["host_admission_floor"] = on_host["qemu_cgroup_limit"] + worker - 1
    refusal = _check(**on_host)
    assert refusal is not None
    assert refusal.startswith('with placement = "auto", memory.host_admission_floor')


def test_host_placement_does_not_need_the_worker_inside_guest_ram() -> None:
    """On the host the worker's cgroup is beside the VM: a small guest is fine."""
    assert EXACT["guest_ram"] < EXACT["worker_cgroup_limit"]
    assert _check() is None


def _qwen4b() -> dict[str, Any]:
    return tomllib.loads((PROFILES_DIR / "qwen4b.toml").read_text())


def _load(tmp_path: Path, data: dict[str, Any]) -> None:
    (tmp_path / "qwen4b.toml").write_text(_to_toml(data))
    load_profile("qwen4b", tmp_path)


def test_the_seed_floors_are_refused_through_the_loader(tmp_path: Path) -> None:
    """The budgets qwen4b shipped with (a 10.5 GiB request floor in an 11 GiB worker
    cgroup) against the measured working set: one line, naming the keys."""
    data = copy.deepcopy(_qwen4b())
    data["memory"]["worker_cgroup_limit"] = "11 GiB"
    data["memory"]["request_admission_floor"] = 11_274_289_152
    with pytest.raises(ProfileError) as info:
        _load(tmp_path, data)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("profile qwen4b: ")
    assert "memory.request_admission_floor must fit in memory.worker_cgroup_limit" in message


def test_shipped_profiles_meet_every_relation() -> None:
    for name in ("qwen4b", "smollm2", "tiny"):
        assert profile_contradiction(load_profile(name)) is None


def test_a_placement_override_that_breaks_the_budgets_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """qwen4b's 12 GiB worker cgroup cannot sit inside its 2 GiB guest: `--placement
    guest` is a usage error before anything starts, not a worker killed in the guest."""
    argv = ["trial", "--profile", "qwen4b", "--placement", "guest", "--out", str(tmp_path)]
    assert main(argv) == 2
    message = capsys.readouterr().err
    assert message.startswith("harness trial: profile qwen4b with --placement guest: ")
    assert "memory.worker_cgroup_limit must be below memory.guest_ram" in message
    assert not list(tmp_path.iterdir())  # no receipt: nothing started
