"""A trial's snapshot pair beside real unrelated churn, and beside its own real leaks.

Real cgroups (under a scratch parent, so nobody else's trial sees them), real listening
sockets of real processes, the real /proc. A real process plays the trial's
orchestrator (`OwnTrial.pid`), so the test process and everything it starts directly
are, like any other program on the host, no trial's.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.trial.hoststate import host_state_record
from host.cgroups import Cgroup, CgroupHierarchy, detect
from host.cgroups.mounts import read_mounts
from host.hoststate import Sources, take_snapshot
from host.hoststate.attribution import OwnTrial
from host.hoststate.sockets import read_listening_sockets

pytestmark = pytest.mark.integration

OWN = "a1b2c3d4e5f60718"
DEAD = "00000000deadbeef"

LISTEN = (
    "import socket, sys, time\n"
    "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
    "print(s.getsockname()[1], flush=True); time.sleep(120)\n"
)
ORCHESTRATOR = (
    "import subprocess, sys, time\n"
    "print('ready', flush=True); sys.stdin.readline()\n"
    f"child = subprocess.Popen([sys.executable, '-c', {LISTEN!r}], stdout=subprocess.PIPE)\n"
    "port = child.stdout.readline().decode().strip()\n"
    "print(child.pid, port, flush=True); time.sleep(120)\n"
)
"""The trial's orchestrator: on a line on stdin it starts a child that listens."""


@dataclass
class Host:
    """Scratch harness parent, the processes and cgroups a test made; all released."""

    parent: str
    hierarchy: CgroupHierarchy
    sources: Sources
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    groups: list[Cgroup] = field(default_factory=list)

    def start(self, code: str) -> tuple[subprocess.Popen[bytes], list[str]]:
        proc = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self.procs.append(proc)
        assert proc.stdout is not None
        return proc, proc.stdout.readline().decode().split()

    def listener(self) -> tuple[int, int]:
        """A real program listening on 127.0.0.1: (pid, port)."""
        proc, (port,) = self.start(LISTEN)
        return proc.pid, int(port)

    def cgroup(self, name: str, *pids: int) -> Cgroup:
        group = self.hierarchy.create(name)
        self.groups.append(group)
        for pid in pids:
            group.add_process(pid)
        return group

    def hierarchies(self) -> int:
        """How many hierarchies hold the scratch parent (v1: one per controller used)."""
        return sum((m.mount_point / self.parent).is_dir() for m in read_mounts())


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    parent = f"hsattr{uuid.uuid4().hex[:8]}"
    nft = tmp_path / "bin" / "nft"
    nft.parent.mkdir()
    nft.write_text("#!/bin/sh\necho 'table inet t {'; echo '}'\n")
    nft.chmod(0o755)
    made = Host(
        parent,
        detect(parent=parent),
        Sources(harness_parent=parent, firewall_search_path=str(nft.parent)),
    )
    try:
        yield made
    finally:
        for proc in made.procs:
            proc.kill()
            proc.wait()
        for group in made.groups:
            with contextlib.suppress(Exception):
                group.kill_members()
                group.remove()
        for mount in read_mounts():
            with contextlib.suppress(OSError):
                os.rmdir(mount.mount_point / parent)


@dataclass
class Orchestrator:
    """A real process playing the trial's orchestrator."""

    proc: subprocess.Popen[bytes]

    @property
    def own(self) -> OwnTrial:
        return OwnTrial(OWN, self.proc.pid)

    def spawn_listener(self) -> int:
        """Its child starts listening; the child's pid (its descendant, a trial process)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()
        child, _port = self.proc.stdout.readline().decode().split()
        return int(child)


def _orchestrator(host: Host) -> Orchestrator:
    proc, ready = host.start(ORCHESTRATOR)
    assert ready == ["ready"]
    return Orchestrator(proc)


def test_unrelated_churn_beside_a_trial_is_counted_not_failed(host: Host) -> None:
    """Other programs' cgroups (one with a listening member), a dead trial's leftover
    cgroup, an unrelated listener, and a cgroup removed meanwhile: the trial's snapshot
    pair is unchanged and counts them. The control, the same pair read without
    attribution (as hoststate/2 did), is changed."""
    own = _orchestrator(host).own
    gone = host.cgroup("churn-gone")
    before = take_snapshot(host.sources, own=own)
    before_control = take_snapshot(host.sources)
    pid, port = host.listener()
    host.cgroup("churn-new", pid)
    host.cgroup(f"trial-{DEAD}")
    _, plain_port = host.listener()
    gone.remove()
    after = take_snapshot(host.sources, own=own)
    after_control = take_snapshot(host.sources)

    record = host_state_record(before, after)
    assert record.cgroups.result == "unchanged"
    assert record.listening_sockets.result == "unchanged"
    layers = host.hierarchies()
    assert (record.cgroups.unrelated_before, record.cgroups.unrelated_after) == (
        layers,
        2 * layers,
    )
    assert record.listening_sockets.unrelated_after >= 2
    assert record.excluded_trials == ()
    for facet in (record.routes, record.resolver, record.firewall):
        assert (facet.unrelated_before, facet.unrelated_after) == (0, 0)

    control = host_state_record(before_control, after_control)
    assert control.cgroups.result == control.listening_sockets.result == "changed"
    seen = read_listening_sockets(Path("/proc/self/net"), proc=Path("/proc"), own=own)
    assert isinstance(seen.canonical, list)
    assert not {("tcp", "127.0.0.1", port), ("tcp", "127.0.0.1", plain_port)} & {
        tuple(row) for row in seen.canonical if isinstance(row, list)
    }


@pytest.mark.parametrize(
    "leak",
    [
        "cgroup_named_for_the_trial",
        "worker_cgroup_named_for_the_trial",
        "socket_of_a_descendant",
        "socket_of_a_process_in_the_trials_cgroup",
        "unnamed_cgroup_holding_a_descendant",
    ],
)
def test_what_the_trial_leaves_behind_still_fails_it(host: Host, leak: str) -> None:
    """Each way a trial's own leftover is attributed to it, beside unrelated churn that is
    left out at the same time: the facet is changed."""
    orchestrator = _orchestrator(host)
    own = orchestrator.own
    before = take_snapshot(host.sources, own=own)
    pid, _ = host.listener()
    host.cgroup("churn-new", pid)  # unrelated, left out as in the test above
    facet = "cgroups"
    if leak == "cgroup_named_for_the_trial":
        host.cgroup(f"trial-{OWN}")
    elif leak == "worker_cgroup_named_for_the_trial":
        host.cgroup(f"worker-{OWN}")
    elif leak == "socket_of_a_descendant":
        facet = "listening_sockets"
        orchestrator.spawn_listener()
    elif leak == "socket_of_a_process_in_the_trials_cgroup":
        facet = "listening_sockets"
        stray, _ = host.listener()  # not a descendant of the orchestrator
        host.cgroup(f"trial-{OWN}", stray)
    else:
        host.cgroup("unnamed-holder", orchestrator.spawn_listener())
    after = take_snapshot(host.sources, own=own)
    record = host_state_record(before, after)
    assert getattr(record, facet).result == "changed"
    assert record.cgroups.unrelated_after == host.hierarchies()  # the churn, still left out


def test_the_first_trial_on_a_fresh_host_leaves_host_state_unchanged(host: Host) -> None:
    """No harness parent exists (a fresh host). The trial creates its cgroup, which
    creates the parent in each hierarchy it uses, and removes its cgroup; the parent
    stays for later trials. Unchanged. The control: its cgroup left behind is changed."""
    own = _orchestrator(host).own
    assert host.hierarchies() == 0
    before = take_snapshot(host.sources, own=own)
    group = host.hierarchy.create(f"trial-{OWN}")
    group.remove()
    assert host.hierarchies() > 0  # the parent the trial made stays
    after = take_snapshot(host.sources, own=own)
    assert host_state_record(before, after).cgroups.result == "unchanged"
    host.cgroup(f"trial-{OWN}")
    leaked = take_snapshot(host.sources, own=own)
    assert host_state_record(before, leaked).cgroups.result == "changed"
