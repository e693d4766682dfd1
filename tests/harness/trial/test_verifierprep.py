"""When the verification guest may start beside the agent's: the memory rule."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from harness.profiles import load_profile
from harness.trial.context import TrialOptions
from harness.trial.owned import OwnedResources
from harness.trial.pipeline import Trial
from harness.trial.verifierprep import _Started, cores_for_another_guest, spare_for_verifier
from harness.trial.vmstage import VmHandle
from host.cgroups import detect
from receipts.records.hostreading import GuestCommandFailure
from receipts.records.vm import VerifierPrepared
from tests.harness.trial.test_vmstage import cpu_share

SOLUTION = Path(__file__).parents[3] / "profiles/tasks/py-one-line-fix/scripts/solution.json"

GIB = 1 << 30


def test_spare_counts_what_each_cgroup_may_still_grow_by() -> None:
    # 10 GiB available; the agent's QEMU may grow 2 - 0.5, the worker 12 - 8; verifier 2
    spare = spare_for_verifier(10 * GIB, (2 * GIB, GIB // 2), (12 * GIB, 8 * GIB), 2 * GIB)
    assert spare == 10 * GIB - (3 * GIB // 2) - 4 * GIB - 2 * GIB


def test_a_usage_that_does_not_read_counts_its_whole_limit() -> None:
    read = spare_for_verifier(10 * GIB, (2 * GIB, GIB), None, 2 * GIB)
    unread = spare_for_verifier(10 * GIB, (2 * GIB, None), None, 2 * GIB)
    assert read is not None and unread is not None
    assert read - unread == GIB


def test_usage_over_its_limit_adds_nothing() -> None:
    assert spare_for_verifier(4 * GIB, (2 * GIB, 3 * GIB), None, 2 * GIB) == 2 * GIB


def test_not_enough_is_negative_and_unread_is_none() -> None:
    spare = spare_for_verifier(5 * GIB, (2 * GIB, 0), (12 * GIB, None), 2 * GIB)
    assert spare is not None and spare < 0
    assert spare_for_verifier(None, (2 * GIB, 0), None, 2 * GIB) is None


def test_no_more_guests_than_cores() -> None:
    # the agent's guest alone on 2 cores: room for its verifier; two trials' guests: none
    assert cores_for_another_guest(1, 2)
    assert not cores_for_another_guest(2, 2)
    assert not cores_for_another_guest(0, None)


@pytest.mark.integration  # writes a real cgroup
@pytest.mark.parametrize("when", ["beside_agent", "after_agent"])
def test_a_verifier_that_yielded_takes_its_share_back_for_the_tests(
    tmp_path: Path, when: VerifierPrepared
) -> None:
    # the hidden tests' wall deadline must not be spent behind another trial's guests
    options = TrialOptions(
        profile=load_profile("tiny"),
        task="py-one-line-fix",
        script=SOLUTION,
        out_dir=tmp_path,
        accel="tcg",
    )
    preparation = Trial(options).state(tmp_path).verifier
    cgroup = detect().create(f"tverifierprep-{uuid.uuid4().hex[:8]}")
    try:
        cgroup.set_cpu_weight_lowest()
        lowest = cpu_share(cgroup)
        preparation.when = when
        preparation.guests.verifier.handle = VmHandle(cgroup, OwnedResources().owner(()))
        preparation.take_full_cpu_share()
        default = "1024" if cgroup.version == "v1" else "100"
        assert cpu_share(cgroup) == (default if when == "beside_agent" else lowest)
    finally:
        cgroup.remove()


def test_a_verifier_still_waiting_at_teardown_is_cancelled(tmp_path: Path) -> None:
    options = TrialOptions(
        profile=load_profile("tiny"),
        task="py-one-line-fix",
        script=SOLUTION,
        out_dir=tmp_path,
        accel="tcg",
    )
    preparation = Trial(options).state(tmp_path).verifier

    async def waiting_verifier() -> None:
        await asyncio.sleep(3600)  # the gated verifier, waiting for the workspace

    async def prepared() -> _Started:
        return _Started(asyncio.ensure_future(waiting_verifier()))

    async def teardown() -> asyncio.Task[GuestCommandFailure | None]:
        preparation._task = asyncio.ensure_future(prepared())
        running = await preparation.ready()
        await asyncio.wait_for(preparation.abandon(), 5)
        return running

    running = asyncio.run(teardown())
    assert running.cancelled() and not preparation.begun()
