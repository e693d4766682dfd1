"""A whole trial in a real QEMU guest (TCG here) while another "trial" lives beside it:
a second lease held by this process, and a real process in that trial's cgroup
(`trial-<tag>`) listening on a TCP port, both appearing after the first snapshot. With
the lease held they are left out as another live trial's and named in hoststate.json;
without it they belong to no trial (a dead trial's leftovers, another program) and are
left out and counted as such (hoststate/3). The control: a cgroup the trial itself
leaves behind (`worker-<its tag>`) fails its host-state check.

The neighbour's process is detached (its parent exits), as another program's would be:
this test runs the trial in-process, so a direct child of the test process would be a
descendant of the trial's orchestrator, that is the trial's own."""

from __future__ import annotations

import contextlib
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from harness.trial.context import TrialOptions
from harness.trial.pipeline import Trial
from harness.trial.stage import StageAction, TrialState
from host.cgroups import Cgroup, detect, spawn_in_cgroup
from host.vm.lease import TrialLease
from tests.harness.trial.stagetable import around
from tests.harness.trial.test_trial_vm import _no_leftovers, _options, _records

pytestmark = pytest.mark.integration

LISTENER = (
    "import os, socket, time\n"
    "if os.fork():\n    os._exit(0)\n"
    "s = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\n"
    "print('listening', flush=True)\ntime.sleep(600)\n"
)


class NeighbourAppearsDuringAgent(Trial):
    """Before its agent runs, another trial's cgroup and listening process appear."""

    other_tag = secrets.token_hex(8)
    hold_lease = True
    leak_own = False
    leaked: Cgroup | None = None
    lease: TrialLease | None = None
    cgroup: Cgroup | None = None
    listener: subprocess.Popen[bytes] | None = None
    hierarchies = 0
    """In how many cgroup hierarchies the neighbour's cgroup appears (v1: one per
    controller mount; each is one entry of the cgroups facet)."""

    def __init__(self, options: TrialOptions) -> None:
        super().__init__(options, stages=around("agent", self._agent))

    async def _agent(self, state: TrialState, run: StageAction) -> None:
        if self.hold_lease:
            self.lease = TrialLease(self.options.cache / "trials", self.other_tag)
            self.lease.acquire()
        hierarchy = detect()
        self.cgroup = hierarchy.create(f"trial-{self.other_tag}")
        listings = hierarchy.list_names(prefix=f"trial-{self.other_tag}").values()
        self.hierarchies = sum(self.cgroup.name in listing.names for listing in listings)
        self.listener = spawn_in_cgroup(
            self.cgroup, [sys.executable, "-c", LISTENER], stdout=subprocess.PIPE
        )
        assert self.listener.stdout is not None
        assert self.listener.stdout.readline() == b"listening\n"
        self.listener.wait()  # the listener is its detached child
        if self.leak_own:
            self.leaked = hierarchy.create(f"worker-{self.context.tag}")
        await run(state)

    def neighbour_gone(self) -> None:
        if self.leaked is not None:
            self.leaked.remove()
        if self.cgroup is not None:
            with contextlib.suppress(Exception):
                self.cgroup.kill_members()
            self.cgroup.remove()
        if self.lease is not None:
            self.lease.release()


def _harness_cgroups() -> dict[str, list[str]]:
    """The harness parent's children per hierarchy, to name them when a count is off."""
    return {str(key): sorted(listing.names) for key, listing in detect().list_names().items()}


@pytest.mark.parametrize(("hold_lease", "leak_own"), [(True, False), (False, False), (False, True)])
async def test_a_live_neighbours_resources_are_left_out_and_named(
    tmp_path: Path, hold_lease: bool, leak_own: bool
) -> None:
    trial = NeighbourAppearsDuringAgent(_options(tmp_path, "py-one-line-fix", "solution"))
    trial.hold_lease = hold_lease
    trial.leak_own = leak_own
    try:
        result = await trial.run()
    finally:
        trial.neighbour_gone()
    assert result.valid
    records = _records(result)
    hoststate = records.hoststate
    assert hoststate is not None
    if hold_lease:
        assert result.verdict == "accepted"
        assert {f.result for f in hoststate.facets()} == {"unchanged"}
        assert hoststate.excluded_trials == (trial.other_tag,)
        assert trial.hierarchies >= 1
        assert hoststate.cgroups.excluded_before == 0
        assert hoststate.cgroups.excluded_after == trial.hierarchies
        assert hoststate.listening_sockets.excluded_before == 0
        assert hoststate.listening_sockets.excluded_after == 1
        # Cgroups of no trial that were there before (another program's, a killed
        # run's) stay left out; the trial adds none.
        assert hoststate.cgroups.unrelated_after == hoststate.cgroups.unrelated_before, (
            _harness_cgroups()
        )
    elif not leak_own:
        assert result.verdict == "accepted"
        assert {f.result for f in hoststate.facets()} == {"unchanged"}
        assert hoststate.excluded_trials == ()
        assert hoststate.cgroups.excluded_after == 0
        assert hoststate.cgroups.unrelated_after - hoststate.cgroups.unrelated_before == (
            trial.hierarchies
        )
        assert hoststate.listening_sockets.unrelated_after >= 1
    else:
        assert result.verdict == "failed_host_state"
        assert hoststate.cgroups.result == "changed"
        assert hoststate.listening_sockets.result == "unchanged"
        assert hoststate.excluded_trials == ()
    _no_leftovers(result)
